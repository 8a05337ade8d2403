package jwtauth_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/herr"
)

// TestVerifyIDToken: an ID token is checked against the client it was
// minted for and the nonce of the sign-in, not against Herald's
// audiences; every failure is a 401 naming the check.
func TestVerifyIDToken(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	claims := func(edit func(map[string]any)) string {
		c := iss.Claims("alice", "")
		delete(c, "scope")
		c["aud"], c["nonce"] = "console-client", "n-123"
		if edit != nil {
			edit(c)
		}
		return iss.Sign(t, c)
	}
	got, err := v.VerifyIDToken(t.Context(), claims(nil), "console-client", "n-123")
	require.NoError(t, err)
	_, err = v.VerifyIDToken(t.Context(), claims(func(c map[string]any) { c["azp"] = "console-client" }), "console-client", "n-123")
	require.NoError(t, err, "azp naming this client")
	require.Equal(t, "alice", got.Subject)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), got.Expiry, time.Minute)

	for name, c := range map[string]struct {
		token, client, nonce, want string
	}{
		"wrong nonce":    {claims(nil), "console-client", "n-456", "wrong nonce"},
		"no nonce claim": {claims(func(c map[string]any) { delete(c, "nonce") }), "console-client", "n-123", "wrong nonce"},
		"empty nonce":    {claims(nil), "console-client", "", "wrong nonce"},
		"another client": {claims(nil), "other-client", "n-123", "wrong audience"},
		"another's azp": {claims(func(c map[string]any) {
			c["aud"], c["azp"] = []string{"other-client", "console-client"}, "other-client"
		}), "console-client", "n-123", "wrong authorized party (azp)"},
		"Herald's aud":     {claims(func(c map[string]any) { c["aud"] = "https://herald.test" }), "console-client", "n-123", "wrong audience"},
		"expired":          {claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), "console-client", "n-123", "token expired"},
		"another issuer":   {claims(func(c map[string]any) { c["iss"] = "https://evil.example" }), "console-client", "n-123", "wrong issuer"},
		"no sub":           {claims(func(c map[string]any) { delete(c, "sub") }), "console-client", "n-123", "token has no valid sub claim"},
		"unsigned":         {iss.Unsigned(t, map[string]any{"aud": "console-client", "nonce": "n-123"}), "console-client", "n-123", "token signing algorithm not accepted"},
		"not a JWT at all": {"opaque-token", "console-client", "n-123", "unknown token (neither a configured token nor a JWT)"},
	} {
		_, err := v.VerifyIDToken(t.Context(), c.token, c.client, c.nonce)
		require.Error(t, err, name)
		require.Equal(t, herr.Unauthenticated, herr.CodeOf(err), name)
		require.Equal(t, c.want, herr.MessageOf(err), name)
	}

	// Without an issuer to compare iss with, no ID token is accepted.
	keysOnly := verifier(t, iss, func(c *jwtauth.Config) { c.Issuer, c.JWKSURL = "", iss.URL+"/jwks.json" })
	_, err = keysOnly.VerifyIDToken(t.Context(), claims(nil), "console-client", "n-123")
	require.Error(t, err)
}
