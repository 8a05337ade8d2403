// Package logredact keeps credentials that Herald recognizes by their
// shape out of its logs: the reconnect tokens it issues for non-durable
// queues, JWTs, and webhook signing secrets. It is the last line of defence behind the rule that no
// log line quotes a token: a handler logs a route pattern, never the raw
// path (functions/accesslog), and package delivery names a non-durable
// queue by a prefix (delivery.RedactQueue); but the store's and the
// broker's error texts quote consumer ids, and a non-durable queue's id is
// its reconnect token, so every line is scrubbed once more on its way out
// (Handler, which functions/app puts in front of every logger).
//
// Static bearer tokens (HERALD_TOKENS, HERALD_DEV_TOKEN) have no shape to
// recognize; no code path logs one, and the test support package
// internal/logcheck fails any test whose log lines hold one.
package logredact

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// TokenPrefix starts every reconnect token Herald issues: "nd-" and a
// UUID in its canonical lowercase form (package delivery makes them).
const TokenPrefix = "nd-"

// Kept is how many leading characters of a reconnect token a redacted
// one keeps ("nd-" and four hex digits): enough to tell queues apart when
// reading logs, far too little to resume one.
const Kept = 7

var (
	tokenPattern = regexp.MustCompile(`nd-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// jwtPattern is a JWS in compact serialization whose header and
	// payload are JSON objects: both start with `{"`, "eyJ" in base64url.
	jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*`)
	// secretPattern is a webhook signing secret as Herald issues them
	// (package internal/whsign): "whsec_" and standard base64.
	secretPattern = regexp.MustCompile(`whsec_[A-Za-z0-9+/]{8,}={0,2}`)
)

// SecretRedacted replaces a webhook signing secret in a log line.
const SecretRedacted = "whsec_[redacted]"

// IsToken reports whether s is, as a whole, a reconnect token of the
// shape Herald issues.
func IsToken(s string) bool {
	return len(s) == len(TokenPrefix)+36 && tokenPattern.MatchString(s)
}

// String returns s with every reconnect token cut to its first Kept
// characters and "…", every JWT replaced by "[jwt]" and every webhook
// signing secret by SecretRedacted.
func String(s string) string {
	if !needs(s) {
		return s
	}
	s = tokenPattern.ReplaceAllStringFunc(s, func(t string) string { return t[:Kept] + "…" })
	s = jwtPattern.ReplaceAllString(s, "[jwt]")
	return secretPattern.ReplaceAllString(s, SecretRedacted)
}

// needs is the cheap test String makes first: most log text holds
// neither marker.
func needs(s string) bool {
	return strings.Contains(s, TokenPrefix) || strings.Contains(s, "eyJ") || strings.Contains(s, "whsec_")
}

// Handler returns h behind a filter that passes every record's message and
// attributes (groups, errors and other values included, as they print)
// through String. A record with nothing to redact goes to h unchanged.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	dirty := needs(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		_, changed := redactAttr(a)
		dirty = dirty || changed
		return !dirty
	})
	if !dirty {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		a, _ = redactAttr(a)
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i], _ = redactAttr(a)
	}
	return handler{h.Handler.WithAttrs(out)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }

// redactAttr returns a with its value redacted, and whether that changed
// it. A value that is not a string (an error, a Stringer, anything else)
// is looked at as it prints, and replaced by its redacted text only when
// that text needed redacting.
func redactAttr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); needs(s) {
			if r := String(s); r != s {
				return slog.String(a.Key, r), true
			}
		}
	case slog.KindGroup:
		as := v.Group()
		out := make([]slog.Attr, len(as))
		changed := false
		for i, g := range as {
			var c bool
			out[i], c = redactAttr(g)
			changed = changed || c
		}
		if changed {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
		}
	case slog.KindAny:
		// fmt prints errors and Stringers by their text, and survives
		// one that panics (a nil pointer behind the interface).
		if s := fmt.Sprint(v.Any()); needs(s) {
			if r := String(s); r != s {
				return slog.String(a.Key, r), true
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}, false
}
