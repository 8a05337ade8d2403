package config_test

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
)

// TestConsoleOIDCVariables: the console's sign-in variables, their
// default and what is refused, with errors naming the variable and never
// quoting the secret or the key.
func TestConsoleOIDCVariables(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Local, env(nil))
	require.NoError(t, err)
	require.False(t, c.ConsoleOIDC.Enabled())

	idp := map[string]string{"HERALD_JWT_ISSUER": "https://issuer.example", "HERALD_JWT_AUDIENCE": "herald"}
	with := func(more map[string]string) map[string]string {
		out := maps.Clone(idp)
		maps.Copy(out, more)
		return out
	}
	key := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // 32 bytes, 0…31
	c, err = config.Load(config.Local, env(with(map[string]string{
		"HERALD_CONSOLE_OIDC_CLIENT_ID": "herald-console", "HERALD_CONSOLE_OIDC_CLIENT_SECRET": "s3cret-value",
		"HERALD_CONSOLE_OIDC_REDIRECT_URL": "https://herald.example.com/console/callback",
		"HERALD_CONSOLE_SESSION_KEY":       key,
	})))
	require.NoError(t, err)
	o := c.ConsoleOIDC
	require.True(t, o.Enabled())
	require.Equal(t, "herald-console", o.ClientID)
	require.Equal(t, "s3cret-value", o.ClientSecret)
	require.Equal(t, []string{"openid"}, o.Scopes, "the default")
	require.Equal(t, "https://herald.example.com/console/callback", o.RedirectURL)
	require.Len(t, o.SessionKey, 32)
	require.Equal(t, byte(31), o.SessionKey[31])

	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no issuer":           {map[string]string{"HERALD_CONSOLE_OIDC_CLIENT_ID": "c", "HERALD_JWT_JWKS_URL": "https://i.example/k", "HERALD_JWT_AUDIENCE": "a"}, "HERALD_CONSOLE_OIDC_CLIENT_ID: needs HERALD_JWT_ISSUER"},
		"secret alone":        {with(map[string]string{"HERALD_CONSOLE_OIDC_CLIENT_SECRET": "s3cret-value"}), "HERALD_CONSOLE_OIDC_CLIENT_SECRET: is set, but HERALD_CONSOLE_OIDC_CLIENT_ID is not"},
		"scopes alone":        {with(map[string]string{"HERALD_CONSOLE_OIDC_SCOPES": "openid"}), "HERALD_CONSOLE_OIDC_SCOPES: is set, but"},
		"no openid":           {with(map[string]string{"HERALD_CONSOLE_OIDC_CLIENT_ID": "c", "HERALD_CONSOLE_OIDC_SCOPES": "manage:destinations"}), "HERALD_CONSOLE_OIDC_SCOPES: must include openid"},
		"redirect plain http": {with(map[string]string{"HERALD_CONSOLE_OIDC_CLIENT_ID": "c", "HERALD_CONSOLE_OIDC_REDIRECT_URL": "http://herald.example.com/console/callback"}), "HERALD_CONSOLE_OIDC_REDIRECT_URL: "},
		"redirect elsewhere":  {with(map[string]string{"HERALD_CONSOLE_OIDC_CLIENT_ID": "c", "HERALD_CONSOLE_OIDC_REDIRECT_URL": "https://herald.example.com/callback"}), "HERALD_CONSOLE_OIDC_REDIRECT_URL: must be Herald's own /console/callback"},
		"short key":           {with(map[string]string{"HERALD_CONSOLE_SESSION_KEY": "c2hvcnQta2V5LXZhbHVl"}), "HERALD_CONSOLE_SESSION_KEY: must be 32 random bytes"},
		"key not base64":      {with(map[string]string{"HERALD_CONSOLE_SESSION_KEY": "not base64 at all!"}), "HERALD_CONSOLE_SESSION_KEY: must be 32 random bytes"},
	} {
		_, err := config.Load(config.Local, env(tc.env))
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), "s3cret-value", name)
		require.NotContains(t, err.Error(), "c2hvcnQta2V5LXZhbHVl", name)
	}
}
