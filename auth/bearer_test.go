package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
)

func TestParseBearer(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"Bearer abc":          "abc",
		"bearer abc":          "abc",
		"BEARER abc":          "abc",
		"bEaReR \t abc  ":     "abc",
		"  Bearer a.b.c":      "a.b.c",
		"Bearer abc/def+g==":  "abc/def+g==",
		"Bearer with space x": "with space x",
	} {
		got, ok := auth.ParseBearer(h)
		require.True(t, ok, "%q", h)
		require.Equal(t, want, got, "%q", h)
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Bearer \t ", "Bearerabc", "Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Token abc", "abc"} {
		_, ok := auth.ParseBearer(h)
		require.False(t, ok, "%q", h)
	}
}

// FuzzParseBearer holds the Authorization header parser to its contract
// on any input: a token it returns is non-empty, has no surrounding
// whitespace and comes from the header after a case-insensitive
// "Bearer"; and it reads back every token it is given.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic x", "", "Bearer", "Bearer\t\tx ", "  BEARER  y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := auth.ParseBearer(h)
		if !ok {
			require.Empty(t, tok)
		} else {
			require.NotEmpty(t, tok)
			require.Equal(t, strings.Trim(tok, " \t"), tok)
			require.True(t, strings.HasSuffix(strings.TrimRight(h, " \t"), tok))
			require.True(t, strings.EqualFold(strings.TrimLeft(h, " \t")[:6], "Bearer"))
		}
		// Round trip: the token of a well-formed header is read back.
		if clean := strings.Trim(h, " \t"); clean != "" {
			got, ok := auth.ParseBearer("Bearer " + clean)
			require.True(t, ok)
			require.Equal(t, clean, got)
		}
	})
}

type stubJWT struct {
	p   *auth.Principal
	err error
}

func (s stubJWT) Authenticate(context.Context, string) (*auth.Principal, error) { return s.p, s.err }

func TestChain(t *testing.T) {
	t.Parallel()
	static := auth.StaticTokens{"static-token": {ID: "svc", Permissions: []string{auth.PermReadEvents}}}
	jwtP := &auth.Principal{ID: "alice"}
	c := auth.Chain{Static: static, JWT: stubJWT{p: jwtP}}
	p, err := c.Authenticate(t.Context(), "static-token")
	require.NoError(t, err)
	require.Equal(t, "svc", p.ID, "static tokens are looked up first")
	p, err = c.Authenticate(t.Context(), "eyJ.eyJ.sig")
	require.NoError(t, err)
	require.Same(t, jwtP, p)

	down := herr.New(herr.Unavailable, "keys")
	_, err = auth.Chain{Static: static, JWT: stubJWT{err: down}}.Authenticate(t.Context(), "x")
	require.True(t, errors.Is(err, down), "the JWT verifier's answer is passed on")

	_, err = auth.Chain{Static: static}.Authenticate(t.Context(), "x")
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err))
}

func TestKnown(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"*", "read:events", "publish:a.*", "receive:*", "event-consumer-service:consume-durable-queues", "inspect-and-replay-all-dlq", "run:jobs"} {
		require.True(t, auth.Known(p), p)
	}
	for _, p := range []string{"", "openid", "publish:", "receive:", "event-consumer-service:read", "email"} {
		require.False(t, auth.Known(p), p)
	}
}
