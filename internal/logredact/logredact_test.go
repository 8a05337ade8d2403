package logredact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/logredact"
)

const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

func TestString(t *testing.T) {
	t.Parallel()
	token := "nd-" + uuid.NewString()
	require.True(t, logredact.IsToken(token))
	require.False(t, logredact.IsToken(token+"x"))
	require.False(t, logredact.IsToken("nd-1234"))
	got := logredact.String("consumer " + token + ": gone; Authorization: Bearer " + jwt + "; again " + token)
	require.Equal(t, "consumer "+token[:7]+"…: gone; Authorization: Bearer [jwt]; again "+token[:7]+"…", got)
	for _, s := range []string{"", "plain text", "nd-short", "/v1/event-destinations/{id}", "dq-" + uuid.NewString()} {
		require.Equal(t, s, logredact.String(s), "nothing to redact in %q", s)
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestHandler: tokens are cut from the message and every kind of
// attribute — strings, errors, Stringers, other values, groups, and
// attributes given to WithAttrs — whatever the handler below.
func TestHandler(t *testing.T) {
	t.Parallel()
	token := "nd-" + uuid.NewString()
	var buf bytes.Buffer
	log := slog.New(logredact.Handler(slog.NewJSONHandler(&buf, nil))).With("bound", "q="+token)
	log.Error("lost "+token,
		"path", "/v1/event-destinations/"+token,
		"err", fmt.Errorf("lease store: consumer %q: %w", token, errors.New("unavailable")),
		"stringer", stringer(token),
		"any", map[string]string{"k": token},
		slog.Group("g", "inner", token, "n", 1),
		"auth", "Bearer "+jwt,
		"fine", "dq-orders",
	)
	out := buf.String()
	require.NotContains(t, out, token)
	require.NotContains(t, out, jwt)
	require.Equal(t, 7, strings.Count(out, token[:7]+"…"), out)
	require.Contains(t, out, `"fine":"dq-orders"`)
	require.Contains(t, out, `"n":1`)

	// A record with nothing to redact keeps its values as they were.
	buf.Reset()
	slog.New(logredact.Handler(slog.NewJSONHandler(&buf, nil))).Info("ok", "n", 2, "m", map[string]int{"a": 1})
	require.Contains(t, buf.String(), `"m":{"a":1}`)
}

// TestSecret: a webhook signing secret is replaced wherever it appears in
// a line, in a message or an attribute; the prefix alone is left.
func TestSecret(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	require.Equal(t, "key "+logredact.SecretRedacted+" end", logredact.String("key "+secret+" end"))
	require.Equal(t, "whsec_… whsec_", logredact.String("whsec_… whsec_"))
	var buf bytes.Buffer
	log := slog.New(logredact.Handler(slog.NewTextHandler(&buf, nil)))
	log.Info("rotated "+secret, "secret", secret, "err", errors.New("bad "+secret))
	require.NotContains(t, buf.String(), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.Equal(t, 3, strings.Count(buf.String(), logredact.SecretRedacted), buf.String())
}
