package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
)

// TestDevTokenOnlyOnLoopback: the built-in development token is on only
// when nothing asks otherwise: the local adapter on a loopback address,
// no identity provider. Off loopback or beside an identity provider there
// is no default token, and naming the built-in one is refused; a token of
// one's own in HERALD_DEV_TOKEN is the explicit opt-in, at least
// MinCloudTokenLength characters off loopback.
func TestDevTokenOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	const own = "my-own-dev-token-0123456789"
	jwt := map[string]string{config.EnvJWTIssuer: "https://issuer.example", config.EnvJWTAudience: "herald"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	for _, addr := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.0.0.2:9000"} {
		c, err := config.Load(config.Local, env(map[string]string{config.EnvAddr: addr}))
		require.NoError(t, err, addr)
		require.Equal(t, config.DefaultDevToken, c.DevToken, "%s is loopback: the quick start's token works", addr)
		require.NoError(t, c.Validate())
	}

	t.Run("no default off loopback", func(t *testing.T) {
		for _, addr := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.0.2.10:8080", "herald.internal:8080"} {
			// Another token is configured, so Herald can start; the
			// built-in one is not among its tokens.
			c, err := config.Load(config.Local, env(map[string]string{config.EnvAddr: addr, config.EnvTokens: `{"svc-token-0123456789": {"id": "svc", "permissions": ["read:events"]}}`}))
			require.NoError(t, err, addr)
			require.Empty(t, c.DevToken, addr)
			_, err = c.Authenticator().Authenticate(t.Context(), config.DefaultDevToken)
			require.Error(t, err, "%s: the built-in token is refused", addr)

			// Without any other token it says how to get one.
			_, err = config.Load(config.Local, env(map[string]string{config.EnvAddr: addr}))
			require.ErrorContains(t, err, config.EnvDevToken+": ", addr)
			require.ErrorContains(t, err, "not a loopback address", addr)
		}
	})

	t.Run("no default beside an identity provider", func(t *testing.T) {
		c, err := config.Load(config.Local, env(jwt))
		require.NoError(t, err)
		require.Empty(t, c.DevToken)
		_, err = c.Authenticator().Authenticate(t.Context(), config.DefaultDevToken)
		require.Error(t, err)
	})

	t.Run("the built-in token cannot be named where it is off", func(t *testing.T) {
		for name, vars := range map[string]map[string]string{
			"off loopback":              {config.EnvAddr: "0.0.0.0:8080", config.EnvDevToken: config.DefaultDevToken},
			"with an identity provider": with(jwt, config.EnvDevToken, config.DefaultDevToken),
		} {
			_, err := config.Load(config.Local, env(vars))
			require.ErrorContains(t, err, config.EnvDevToken+": the built-in development token", name)
		}
		_, err := config.Load(config.CloudRun, env(map[string]string{
			config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: config.DefaultDevToken,
		}))
		require.ErrorContains(t, err, config.EnvDevToken+": ", "the cloud has no development token unless one is set")
	})

	t.Run("an own token is the opt-in", func(t *testing.T) {
		for name, vars := range map[string]map[string]string{
			"off loopback":              {config.EnvAddr: "0.0.0.0:8080", config.EnvDevToken: own},
			"with an identity provider": with(jwt, config.EnvDevToken, own),
		} {
			c, err := config.Load(config.Local, env(vars))
			require.NoError(t, err, name)
			p, err := c.Authenticator().Authenticate(t.Context(), own)
			require.NoError(t, err, name)
			require.True(t, p.Can(auth.PermAll))
		}
		_, err := config.Load(config.Local, env(map[string]string{config.EnvAddr: "0.0.0.0:8080", config.EnvDevToken: "short-token"}))
		require.ErrorContains(t, err, config.EnvDevToken+": the token is shorter than 16 characters", "off loopback a token must be long")
		require.NotContains(t, err.Error(), "short-token")
	})

	t.Run("a Config built in code is held to the same rules", func(t *testing.T) {
		c := config.Defaults(config.Local)
		require.Equal(t, config.DefaultDevToken, c.DevToken)
		c.Addr = "0.0.0.0:8080"
		require.ErrorContains(t, c.Validate(), "DevToken ("+config.EnvDevToken+"): the built-in development token")
		c = config.Defaults(config.Local)
		c.JWT.Issuer, c.JWT.Audiences = "https://issuer.example", []string{"herald"}
		require.ErrorContains(t, c.Validate(), "DevToken ("+config.EnvDevToken+"): the built-in development token")
		c.DevToken = own
		require.NoError(t, c.Validate())
		c.DevToken = ""
		require.NoError(t, c.Validate())
	})
}

// TestDevTokenPrincipal: the development token's principal is
// auth.DevPrincipalID, which no HERALD_TOKENS entry and no JWT can name.
func TestDevTokenPrincipal(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Local, env(nil))
	require.NoError(t, err)
	p, err := c.Authenticator().Authenticate(t.Context(), config.DefaultDevToken)
	require.NoError(t, err)
	require.Equal(t, auth.DevPrincipalID, p.ID)
	require.NotEqual(t, "dev", p.ID)

	for _, id := range []string{auth.DevPrincipalID, auth.ReservedPrincipalPrefix + "ops"} {
		_, err = config.Load(config.Local, env(map[string]string{
			config.EnvTokens: `{"svc-token-0123456789": {"id": "` + id + `", "permissions": ["*"]}}`,
		}))
		require.ErrorContains(t, err, config.EnvTokens+": ")
		require.ErrorContains(t, err, "reserved")
		require.False(t, strings.Contains(err.Error(), "svc-token-0123456789"))

		_, err = config.Load(config.Local, env(map[string]string{
			config.EnvJWTIssuer: "https://issuer.example", config.EnvJWTAudience: "herald",
			config.EnvJWTGrants: `{"` + id + `": ["*"]}`,
		}))
		require.ErrorContains(t, err, config.EnvJWTGrants+": ")
		require.ErrorContains(t, err, "reserved")
	}
}

// TestAuthModeNamesNoSecret: the start-up line's auth mode names the kinds
// of token accepted and counts the static ones, and holds none of them.
func TestAuthModeNamesNoSecret(t *testing.T) {
	t.Parallel()
	const own, static = "my-own-dev-token-0123456789", "static-token-0123456789abc"
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "development token (the built-in default)"},
		{map[string]string{config.EnvDevToken: own}, "development token"},
		{map[string]string{config.EnvDevToken: own, config.EnvTokens: `{"` + static + `": {"id": "alice", "permissions": ["publish:a.*"]}}`}, "development token + static tokens (1)"},
		{map[string]string{config.EnvJWTIssuer: "https://issuer.example", config.EnvJWTAudience: "herald"}, "JWT (https://issuer.example)"},
	} {
		c, err := config.Load(config.Local, env(tc.env))
		require.NoError(t, err, "%v", tc.env)
		got := c.AuthMode()
		require.Equal(t, tc.want, got, "%v", tc.env)
		require.NotContains(t, got, own)
		require.NotContains(t, got, static)
		require.NotContains(t, got, config.DefaultDevToken, "the built-in token is a credential too")
	}
}
