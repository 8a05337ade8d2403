package jwtauth_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/herr"
)

func verifier(t *testing.T, iss *jwttest.Issuer, edit ...func(*jwtauth.Config)) *jwtauth.Verifier {
	t.Helper()
	c := jwtauth.Config{Issuer: iss.URL, Audiences: []string{jwttest.DefaultAudience}}
	for _, e := range edit {
		e(&c)
	}
	v, err := jwtauth.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// refused asserts that token is a 401 whose message is desc and repeats
// nothing of the token.
func refused(t *testing.T, v *jwtauth.Verifier, token, desc string) {
	t.Helper()
	p, err := v.Authenticate(t.Context(), token)
	require.Error(t, err)
	require.Nil(t, p)
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err), "%v", err)
	require.Equal(t, desc, herr.MessageOf(err))
	for _, part := range strings.Split(token, ".") {
		if len(part) > 8 {
			require.NotContains(t, err.Error(), part)
		}
	}
}

func TestValidToken(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	p, err := v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events openid publish:myapp.* event-consumer-service:consume-durable-queues"))
	require.NoError(t, err)
	require.Equal(t, "alice", p.ID)
	require.Equal(t, []string{"event-consumer-service:consume-durable-queues", "publish:myapp.*", "read:events"}, p.Permissions, "openid is no permission")
	require.True(t, p.Can(auth.PermReadEvents))
	require.True(t, p.Can(auth.PermConsumeDurableQueues))
	require.True(t, p.CanPublish("myapp.created"))
	require.False(t, p.CanPublish("other.created"))
	require.False(t, p.Can(auth.PermManageDestinations))
	require.Equal(t, int64(1), iss.KeySetFetches(), "the key set is fetched once and cached")
	_, err = v.Authenticate(t.Context(), iss.Token(t, "bob", "read:events"))
	require.NoError(t, err)
	require.Equal(t, int64(1), iss.KeySetFetches())
}

func TestRefusedTokens(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	now := time.Now()
	with := func(k string, val any) map[string]any {
		c := iss.Claims("alice", "read:events")
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	cases := map[string]struct{ token, desc string }{
		"expired":              {iss.Sign(t, with("exp", now.Add(-time.Minute).Unix())), "token expired"},
		"not yet valid":        {iss.Sign(t, with("nbf", now.Add(5*time.Minute).Unix())), "token not yet valid"},
		"issued in the future": {iss.Sign(t, with("iat", now.Add(5*time.Minute).Unix())), "token issued in the future"},
		"no exp":               {iss.Sign(t, with("exp", nil)), "token has no expiry (exp)"},
		"wrong issuer":         {iss.Sign(t, with("iss", "https://evil.example")), "wrong issuer"},
		"wrong audience":       {iss.Sign(t, with("aud", "https://other.example")), "wrong audience"},
		"no audience":          {iss.Sign(t, with("aud", nil)), "wrong audience"},
		"alg none":             {iss.Unsigned(t, iss.Claims("alice", "read:events")), "token signing algorithm not accepted"},
		"HS256 public key":     {iss.HS256WithPublicKey(t, iss.Claims("alice", "read:events")), "token signing algorithm not accepted"},
		"no sub":               {iss.Sign(t, with("sub", nil)), "token has no sub claim"},
		"sub not a string":     {iss.Sign(t, with("sub", 42)), "malformed token claims"},
		"not a JWT":            {"opaque-token", "unknown token (neither a configured token nor a JWT)"},
		"bad base64":           {"a.b.c", "malformed token"},
	}
	good := iss.Token(t, "alice", "read:events")
	parts := strings.Split(good, ".")
	forged := iss.Token(t, "mallory", "*")
	cases["bad signature"] = struct{ token, desc string }{parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2], "bad signature"}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { refused(t, v, c.token, c.desc) })
	}
	// Within the clock skew an expired token still passes.
	_, err := v.Authenticate(t.Context(), iss.Sign(t, with("exp", now.Add(-jwtauth.ClockSkew/2).Unix())))
	require.NoError(t, err)
}

// TestRotatedKey: a token signed with a key published after the set was
// cached makes exactly one fetch and is accepted; a flood of tokens with
// unknown kids right after fetches nothing more.
func TestRotatedKey(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	_, err := v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events"))
	require.NoError(t, err)
	require.Equal(t, int64(1), iss.KeySetFetches())

	iss.Rotate(t)
	p, err := v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events"))
	require.NoError(t, err)
	require.Equal(t, "alice", p.ID)
	require.Equal(t, int64(2), iss.KeySetFetches(), "one fetch for the unknown kid")

	iss.Rotate(t) // published, but the refresh interval has not passed
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { refused(t, v, iss.Token(t, "alice", "read:events"), "unknown signing key") })
	}
	wg.Wait()
	require.Equal(t, int64(2), iss.KeySetFetches(), "unknown kids are rate-limited")
}

// TestRefreshAfterInterval: once the refresh interval has passed, an
// unknown kid fetches again.
func TestRefreshAfterInterval(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss, func(c *jwtauth.Config) { c.RefreshInterval = time.Millisecond })
	_, err := v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events"))
	require.NoError(t, err)
	time.Sleep(2 * time.Millisecond)
	iss.Rotate(t)
	_, err = v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events"))
	require.NoError(t, err)
	require.Equal(t, int64(2), iss.KeySetFetches())
}

// TestIssuerDown: without a cached key that fits, an unreachable issuer is
// 503 (retryable), never 401; a cached key keeps working.
func TestIssuerDown(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	iss.SetDown(true)
	v := verifier(t, iss, func(c *jwtauth.Config) { c.RefreshInterval = time.Millisecond })
	token := iss.Token(t, "alice", "read:events")
	_, err := v.Authenticate(t.Context(), token)
	require.Equal(t, herr.Unavailable, herr.CodeOf(err), "%v", err)
	require.True(t, herr.Retryable(err))

	iss.SetDown(false)
	time.Sleep(2 * time.Millisecond)
	_, err = v.Authenticate(t.Context(), token)
	require.NoError(t, err, "the issuer is back")

	iss.SetDown(true)
	_, err = v.Authenticate(t.Context(), iss.Token(t, "bob", "read:events"))
	require.NoError(t, err, "the cached key still verifies")
	iss.Rotate(t)
	time.Sleep(2 * time.Millisecond)
	_, err = v.Authenticate(t.Context(), iss.Token(t, "bob", "read:events"))
	require.Equal(t, herr.Unavailable, herr.CodeOf(err), "a new kid while the issuer is down: %v", err)
}

// TestJWKSURLOnly: HERALD_JWT_JWKS_URL skips discovery and checks no iss.
func TestJWKSURLOnly(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss, func(c *jwtauth.Config) { c.Issuer, c.JWKSURL = "", iss.URL+"/jwks.json" })
	c := iss.Claims("alice", "read:events")
	c["iss"] = "https://anything.example"
	_, err := v.Authenticate(t.Context(), iss.Sign(t, c))
	require.NoError(t, err)
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss, func(c *jwtauth.Config) { c.Issuer = iss.URL + "/" })
	_, err := v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events"))
	require.Equal(t, herr.Unavailable, herr.CodeOf(err), "a discovery document for another issuer gives no keys: %v", err)
}

func TestClaims(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	auth0 := verifier(t, iss, func(c *jwtauth.Config) { c.PermissionsClaim = "permissions"; c.PrincipalClaim = "email" })
	c := iss.Claims("auth0|123", "")
	c["permissions"] = []string{"read:events", "receive:orders.*", "bogus"}
	c["email"] = "svc@example.com"
	p, err := auth0.Authenticate(t.Context(), iss.Sign(t, c))
	require.NoError(t, err)
	require.Equal(t, "svc@example.com", p.ID)
	require.Equal(t, []string{"read:events", "receive:orders.*"}, p.Permissions)

	// scope as an array, and scp (Entra ID) beside it.
	v := verifier(t, iss)
	c = iss.Claims("alice", "")
	c["scope"] = []string{"read:events"}
	c["scp"] = "manage:destinations"
	p, err = v.Authenticate(t.Context(), iss.Sign(t, c))
	require.NoError(t, err)
	require.Equal(t, []string{"manage:destinations", "read:events"}, p.Permissions)

	// Cognito: custom scopes are RESOURCE-SERVER/NAME, and access tokens
	// carry client_id instead of aud.
	cognito := verifier(t, iss, func(c *jwtauth.Config) { c.ScopePrefix = "herald/"; c.Audiences = []string{"app-client-1"} })
	c = iss.Claims("alice", "herald/read:events read:events-unprefixed aws.cognito.signin.user.admin")
	delete(c, "aud")
	c["client_id"] = "app-client-1"
	p, err = cognito.Authenticate(t.Context(), iss.Sign(t, c))
	require.NoError(t, err)
	require.Equal(t, []string{"read:events"}, p.Permissions)
	c["client_id"] = "app-client-2"
	refused(t, cognito, iss.Sign(t, c), "wrong audience")

	// Grants: Google's service-to-service ID tokens carry no scope.
	google := verifier(t, iss, func(c *jwtauth.Config) {
		c.Grants = map[string][]string{"1234567890": {"publish:billing.*"}}
	})
	c = iss.Claims("1234567890", "")
	delete(c, "scope")
	p, err = google.Authenticate(t.Context(), iss.Sign(t, c))
	require.NoError(t, err)
	require.True(t, p.CanPublish("billing.paid"))
}

// TestAlgorithms: HERALD_JWT_ALGORITHMS narrows what is accepted.
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss, func(c *jwtauth.Config) { c.Algorithms = []string{"ES256"} })
	refused(t, v, iss.Token(t, "alice", "read:events"), "token signing algorithm not accepted")
	iss.Rotate(t) // ES256
	_, err := v.Authenticate(t.Context(), iss.Token(t, "alice", "read:events"))
	require.NoError(t, err)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := jwtauth.Config{Issuer: "https://issuer.example", Audiences: []string{"a"}}
	require.NoError(t, ok.Validate())
	for name, c := range map[string]jwtauth.Config{
		"no issuer":     {Audiences: []string{"a"}},
		"no audience":   {Issuer: "https://issuer.example"},
		"plain http":    {Issuer: "http://issuer.example", Audiences: []string{"a"}},
		"jwks http":     {JWKSURL: "http://10.0.0.1/jwks", Audiences: []string{"a"}},
		"HS256":         {Issuer: "https://issuer.example", Audiences: []string{"a"}, Algorithms: []string{"HS256"}},
		"none":          {Issuer: "https://issuer.example", Audiences: []string{"a"}, Algorithms: []string{"none"}},
		"not a URL":     {Issuer: "issuer.example", Audiences: []string{"a"}},
		"ftp":           {Issuer: "ftp://issuer.example", Audiences: []string{"a"}},
		"empty entries": {Issuer: "https://issuer.example", Audiences: []string{""}},
	} {
		require.Error(t, c.Validate(), name)
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://localhost/realms/x", "http://[::1]:9000", "https://x.example"} {
		require.NoError(t, jwtauth.CheckFetchURL(u), u)
	}
}

// TestCanceledWhileFetching: a caller that goes away while the key set is
// fetched gets its context's error, not a 401.
func TestCanceledWhileFetching(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := v.Authenticate(ctx, iss.Token(t, "alice", "read:events"))
	require.Error(t, err)
	require.NotEqual(t, herr.Unauthenticated, herr.CodeOf(err))
}

func TestLooksLikeJWT(t *testing.T) {
	t.Parallel()
	require.True(t, jwtauth.LooksLikeJWT("eyJh.eyJz.c2ln"))
	require.True(t, jwtauth.LooksLikeJWT("eyJh.eyJz."), "an unsigned token has the shape")
	for _, s := range []string{"", "abc", "a.b", "a.b.c.d", ".b.c", "a..c", "a+b.c.d", "a.b.c d"} {
		require.False(t, jwtauth.LooksLikeJWT(s), s)
	}
}

// TestScopeClaimParsing: a scope string is a list separated by spaces
// (RFC 8693, section 4.2; RFC 6749, section 3.3) and nothing else splits
// it, so a value with a tab or another Unicode space inside is one value,
// not two; a permission value with a control character in it is refused
// (401) rather than read, in a string and in an array alike.
func TestScopeClaimParsing(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	with := func(scope any) string {
		c := iss.Claims("alice", "")
		c["scope"] = scope
		return iss.Sign(t, c)
	}
	for name, scope := range map[string]any{
		"tab before *":           "x\t*",
		"newline before *":       "read:events\n*",
		"carriage return":        "read:events\r\npublish:*",
		"NUL":                    "read:events\x00",
		"C1 control (NEL)":       "read:events\u0085*",
		"DEL":                    "read:events\x7f",
		"tab in an array value":  []string{"read:events", "x\t*"},
		"newline in scp as well": nil, // filled below
	} {
		token := with(scope)
		if scope == nil {
			c := iss.Claims("alice", "read:events")
			c["scp"] = "manage:destinations\n*"
			token = iss.Sign(t, c)
		}
		t.Run(name, func(t *testing.T) { refused(t, v, token, "malformed permissions claim") })
	}

	for name, tc := range map[string]struct {
		scope any
		want  []string
	}{
		"spaces":                         {"read:events publish:a.*", []string{"publish:a.*", "read:events"}},
		"runs of spaces":                 {"  read:events   publish:a.*  ", []string{"publish:a.*", "read:events"}},
		"no-break space is no separator": {"read:events\u00a0*", nil},
		"em space is no separator":       {"x\u2003*", nil},
		"array values are exact":         {[]string{" *", "* ", "read:events"}, []string{"read:events"}},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := v.Authenticate(t.Context(), with(tc.scope))
			require.NoError(t, err)
			require.Equal(t, tc.want, p.Permissions)
			require.False(t, p.Can(auth.PermAll))
		})
	}
}

// TestCritHeader: Herald understands no JWS extension, so a token whose
// protected header lists any in "crit" is refused (RFC 7515, section
// 4.1.11), whatever its signature.
func TestCritHeader(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	claims := iss.Claims("alice", "read:events")
	for name, hdr := range map[string]map[string]any{
		"an extension":       {"crit": []string{"https://example.com/must-check"}, "https://example.com/must-check": true},
		"an unknown listed":  {"crit": []string{"exp"}},
		"b64 (RFC 7797)":     {"crit": []string{"b64"}, "b64": true},
		"an empty crit list": {"crit": []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, v, iss.SignWithHeaders(t, claims, hdr), "unsupported critical header (crit)")
		})
	}
	_, err := v.Authenticate(t.Context(), iss.SignWithHeaders(t, claims, map[string]any{"x-extra": "not critical"}))
	require.NoError(t, err, "a header parameter that is not critical may be ignored")
}

// TestReservedPrincipal: a JWT cannot name a principal Herald reserves for
// its own (the development token's is auth.DevPrincipalID), nor one with
// a control character (principal ids are stamped on events and logged).
func TestReservedPrincipal(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v := verifier(t, iss)
	refused(t, v, iss.Token(t, auth.DevPrincipalID, "read:events"), "token's sub claim is reserved")
	refused(t, v, iss.Token(t, auth.ReservedPrincipalPrefix+"anything", "read:events"), "token's sub claim is reserved")
	refused(t, v, iss.Token(t, "alice\nlevel=ERROR", "read:events"), "token's sub claim is malformed")
	p, err := v.Authenticate(t.Context(), iss.Token(t, "dev", "read:events"))
	require.NoError(t, err)
	require.Equal(t, "dev", p.ID)
	require.NotEqual(t, auth.DevPrincipalID, p.ID, "a JWT whose sub is dev is not the development token's principal")
	email := verifier(t, iss, func(c *jwtauth.Config) { c.PrincipalClaim = "email" })
	c := iss.Claims("alice", "read:events")
	c["email"] = auth.DevPrincipalID
	refused(t, email, iss.Sign(t, c), "token's email claim is reserved")
}
