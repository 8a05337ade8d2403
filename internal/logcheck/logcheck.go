// Package logcheck fails tests whose log lines hold a credential. It is
// test support: a slog.Handler that looks at every record on its way to
// the handler below and remembers the ones holding a reconnect token of
// the shape Herald issues, a JWT, or a secret the test registered (a
// static bearer token, a password); Check reports them as test errors,
// Main as a failed run.
//
// Two hookups cover Herald's suites:
//
//   - local.Start puts a Checker in front of its instance's logger, with
//     the instance's static tokens registered, and checks it when the test
//     ends: every test that starts a Herald checks every line it logs.
//   - A package's TestMain calls Main, which puts the global Checker in
//     front of slog.Default, so a line logged past the configured logger
//     is checked too.
//
// The second is one line:
//
//	func TestMain(m *testing.M) { os.Exit(logcheck.Main(m)) }
//
// A report names the record's message and the attribute that held the
// credential, and never the credential itself.
package logcheck

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// maxLeaks bounds what a Checker remembers: a leak is usually repeated on
// every request, and the first few say enough.
const maxLeaks = 20

var (
	// tokenPattern is a reconnect token as package delivery issues them
	// ("nd-" and a UUID); the redacted form keeps 7 characters.
	tokenPattern = regexp.MustCompile(`nd-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// jwtPattern is a JWS in compact serialization with JSON header and
	// payload.
	jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{2,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`)
	// whsecPattern is a webhook signing secret (package internal/whsign).
	whsecPattern = regexp.MustCompile(`whsec_[A-Za-z0-9+/]{8,}={0,2}`)
)

// Checker remembers the log records that hold a credential. Its methods
// are safe for concurrent use.
type Checker struct {
	mu      sync.Mutex
	secrets []string
	leaks   []string
	dropped int
}

// New returns a Checker that also looks for secrets (empty strings are
// ignored).
func New(secrets ...string) *Checker {
	c := &Checker{}
	c.Forbid(secrets...)
	return c
}

// Forbid adds secrets to what c looks for. Secrets shorter than 6
// characters are ignored: they would match ordinary text.
func (c *Checker) Forbid(secrets ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range secrets {
		if len(s) >= 6 {
			c.secrets = append(c.secrets, s)
		}
	}
}

// Handler returns next behind c: every record (and every attribute given
// to WithAttrs) is looked at, then passed on unchanged.
func (c *Checker) Handler(next slog.Handler) slog.Handler { return &handler{c: c, next: next} }

// Leaks returns descriptions of the records that held a credential, in
// the order they were logged (at most 20, then a count of the rest).
func (c *Checker) Leaks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.leaks...)
	if c.dropped > 0 {
		out = append(out, fmt.Sprintf("… and %d more", c.dropped))
	}
	return out
}

// Check fails t with one error per leak.
func (c *Checker) Check(t testing.TB) {
	t.Helper()
	for _, l := range c.Leaks() {
		t.Errorf("logcheck: %s", l)
	}
}

// Global is the Checker Main puts in front of slog.Default.
var Global = New()

// Main runs m with Global in front of slog.Default and returns m.Run's
// exit code, or 1 when the run passed but a line logged through
// slog.Default held a credential (each is printed to standard error).
func Main(m *testing.M) int {
	// A handler of its own on standard error, not slog.Default's: once
	// SetDefault is given a handler other than the default one, the log
	// package writes through it, and the default handler writes through
	// the log package, so wrapping it would loop (and deadlock).
	slog.SetDefault(slog.New(Global.Handler(slog.NewTextHandler(os.Stderr, nil))))
	code := m.Run()
	if leaks := Global.Leaks(); len(leaks) > 0 {
		for _, l := range leaks {
			fmt.Fprintf(os.Stderr, "logcheck: %s\n", l)
		}
		if code == 0 {
			code = 1
		}
	}
	return code
}

type handler struct {
	c      *Checker
	next   slog.Handler
	groups []string
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	// Disabled records are never written, so they cannot leak; but a
	// handler below that drops a level must not hide a leak above it
	// either: every record is looked at.
	return true
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	h.c.look(r.Message, "message", r.Message)
	r.Attrs(func(a slog.Attr) bool {
		h.lookAttr(r.Message, h.groups, a)
		return true
	})
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		h.lookAttr("(With)", h.groups, a)
	}
	return &handler{c: h.c, next: h.next.WithAttrs(as), groups: h.groups}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{c: h.c, next: h.next.WithGroup(name), groups: append(append([]string(nil), h.groups...), name)}
}

func (h *handler) lookAttr(msg string, groups []string, a slog.Attr) {
	v := a.Value.Resolve()
	path := append(append([]string(nil), groups...), a.Key)
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			h.lookAttr(msg, path, g)
		}
		return
	}
	var s string
	if v.Kind() == slog.KindAny {
		s = fmt.Sprint(v.Any())
	} else {
		s = v.String()
	}
	h.c.look(msg, "attribute "+strings.Join(path, "."), s)
}

// look records a leak when text holds a credential. The description
// quotes the record's message with the credential cut out.
func (c *Checker) look(msg, where, text string) {
	var what string
	switch {
	case tokenPattern.MatchString(text):
		what = "a reconnect token"
	case jwtPattern.MatchString(text):
		what = "a JWT"
	case whsecPattern.MatchString(text):
		what = "a webhook signing secret"
	default:
		c.mu.Lock()
		for _, s := range c.secrets {
			if strings.Contains(text, s) {
				what = "a registered secret"
				break
			}
		}
		c.mu.Unlock()
	}
	if what == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.leaks) >= maxLeaks {
		c.dropped++
		return
	}
	c.leaks = append(c.leaks, fmt.Sprintf("log record %q: %s holds %s", c.scrub(msg), where, what))
}

// scrub cuts every credential out of s (c.mu held).
func (c *Checker) scrub(s string) string {
	s = tokenPattern.ReplaceAllString(s, "[reconnect token]")
	s = jwtPattern.ReplaceAllString(s, "[jwt]")
	s = whsecPattern.ReplaceAllString(s, "[webhook secret]")
	for _, secret := range c.secrets {
		s = strings.ReplaceAll(s, secret, "[secret]")
	}
	return s
}
