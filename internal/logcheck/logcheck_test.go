package logcheck_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/logcheck"
)

// TestChecker: a reconnect token, a JWT or a registered secret anywhere in
// a record (message, attribute, group, error, WithAttrs) is a leak; the
// report names where, never the credential; a redacted token is none.
func TestChecker(t *testing.T) {
	t.Parallel()
	token := "nd-" + uuid.NewString()
	const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"
	const secret = "static-bearer-0123456789"
	c := logcheck.New(secret)
	log := slog.New(c.Handler(slog.NewTextHandler(io.Discard, nil)))

	log.Info("fine", "queue", token[:7]+"…", "route", "/v1/event-destinations/{id}")
	require.Empty(t, c.Leaks())

	log.Error("request failed", "path", "/v1/event-destinations/"+token)
	log.Info("x", slog.Group("g", "err", errors.New("store: "+token)))
	log.Info("auth " + jwt)
	log.With("tok", secret).Info("y")
	log.Debug("debug lines count too", "t", secret)
	leaks := c.Leaks()
	require.Len(t, leaks, 5, "%v", leaks)
	require.Contains(t, leaks[0], `"request failed": attribute path holds a reconnect token`)
	require.Contains(t, leaks[1], "attribute g.err holds a reconnect token")
	require.Contains(t, leaks[2], "message holds a JWT")
	require.Contains(t, leaks[3], "attribute tok holds a registered secret")
	all := strings.Join(leaks, "\n")
	for _, s := range []string{token, jwt, secret} {
		require.NotContains(t, all, s, "a report quotes no credential")
	}

	ft := &fakeT{TB: t}
	c.Check(ft)
	require.Equal(t, 5, ft.errors)
}

type fakeT struct {
	testing.TB
	errors int
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.errors++ }

// TestWebhookSecret: a webhook signing secret in a record is a leak, and
// the report does not quote it.
func TestWebhookSecret(t *testing.T) {
	t.Parallel()
	c := logcheck.New()
	log := slog.New(c.Handler(slog.NewTextHandler(io.Discard, nil)))
	log.Info("fine", "secret", "whsec_…")
	require.Empty(t, c.Leaks())
	log.Info("rotated", "secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.Len(t, c.Leaks(), 1)
	require.Contains(t, c.Leaks()[0], "webhook signing secret")
	require.NotContains(t, c.Leaks()[0], "MfKQ9r8G")
}
