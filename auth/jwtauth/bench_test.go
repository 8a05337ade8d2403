package jwtauth_test

import (
	"testing"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
)

// BenchmarkAuthenticate measures one verification with the key cached:
// the cost a JWT adds to every request. RS256 is the issuer's first key,
// ES256 its rotated one; Static is a static-token lookup for comparison.
func BenchmarkAuthenticate(b *testing.B) {
	iss := jwttest.New(b)
	v, err := jwtauth.New(jwtauth.Config{Issuer: iss.URL, Audiences: []string{jwttest.DefaultAudience}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = v.Close() })
	run := func(b *testing.B, token string) {
		if _, err := v.Authenticate(b.Context(), token); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Authenticate(b.Context(), token); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("RS256", func(b *testing.B) { run(b, iss.Token(b, "alice", "read:events receive:orders.*")) })
	iss.Rotate(b)
	b.Run("ES256", func(b *testing.B) { run(b, iss.Token(b, "alice", "read:events receive:orders.*")) })
	b.Run("Static", func(b *testing.B) {
		tokens := auth.StaticTokens{"static-token-0123456789": {ID: "svc", Permissions: []string{"*"}}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tokens.Authenticate(b.Context(), "static-token-0123456789"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
