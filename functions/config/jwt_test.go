package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
)

// TestJWTVariables: the HERALD_JWT_* variables, their defaults and what
// is refused, with errors naming the variable.
func TestJWTVariables(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Local, env(nil))
	require.NoError(t, err)
	require.False(t, c.JWTEnabled())
	require.Empty(t, c.CORSOrigins)

	c, err = config.Load(config.CloudRun, env(map[string]string{
		"HERALD_FUNCTION": "publish", "HERALD_TOPIC_URL": "mem://x", "HERALD_STORE_URL": "mem://x/key",
		"HERALD_JWT_ISSUER": "https://issuer.example/", "HERALD_JWT_AUDIENCE": "a1, a2",
		"HERALD_JWT_ALGORITHMS": "RS256,ES256", "HERALD_JWT_SCOPE_PREFIX": "herald/",
		"HERALD_JWT_GRANTS":   `{"svc@p.iam.gserviceaccount.com": ["publish:billing.*"]}`,
		"HERALD_CORS_ORIGINS": "https://app.example.com, http://localhost:3000",
	}))
	require.NoError(t, err, "an identity provider alone is enough in the cloud")
	require.True(t, c.JWTEnabled())
	require.Equal(t, "https://issuer.example/", c.JWT.Issuer)
	require.Equal(t, []string{"a1", "a2"}, c.JWT.Audiences)
	require.Equal(t, "scope", c.JWT.PermissionsClaim)
	require.Equal(t, "sub", c.JWT.PrincipalClaim)
	require.Equal(t, []string{"RS256", "ES256"}, c.JWT.Algorithms)
	require.Equal(t, "herald/", c.JWT.ScopePrefix)
	require.Equal(t, []string{"publish:billing.*"}, c.JWT.Grants["svc@p.iam.gserviceaccount.com"])
	require.Equal(t, []string{"https://app.example.com", "http://localhost:3000"}, c.CORSOrigins)

	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no audience":         {map[string]string{"HERALD_JWT_ISSUER": "https://i.example"}, "HERALD_JWT_AUDIENCE: required"},
		"plain http":          {map[string]string{"HERALD_JWT_ISSUER": "http://i.example", "HERALD_JWT_AUDIENCE": "a"}, "HERALD_JWT_ISSUER: "},
		"HMAC":                {map[string]string{"HERALD_JWT_ISSUER": "https://i.example", "HERALD_JWT_AUDIENCE": "a", "HERALD_JWT_ALGORITHMS": "HS256"}, "HERALD_JWT_ALGORITHMS: "},
		"none":                {map[string]string{"HERALD_JWT_JWKS_URL": "https://i.example/k", "HERALD_JWT_AUDIENCE": "a", "HERALD_JWT_ALGORITHMS": "none"}, "HERALD_JWT_ALGORITHMS: "},
		"audience alone":      {map[string]string{"HERALD_JWT_AUDIENCE": "a"}, "HERALD_JWT_AUDIENCE: is set, but neither"},
		"grants not JSON":     {map[string]string{"HERALD_JWT_ISSUER": "https://i.example", "HERALD_JWT_AUDIENCE": "a", "HERALD_JWT_GRANTS": "x"}, "HERALD_JWT_GRANTS: must be"},
		"grants unknown perm": {map[string]string{"HERALD_JWT_ISSUER": "https://i.example", "HERALD_JWT_AUDIENCE": "a", "HERALD_JWT_GRANTS": `{"p": ["fly"]}`}, `HERALD_JWT_GRANTS: principal "p": unknown permission "fly"`},
		"origin with path":    {map[string]string{"HERALD_CORS_ORIGINS": "https://app.example.com/"}, "HERALD_CORS_ORIGINS: "},
		"origin no scheme":    {map[string]string{"HERALD_CORS_ORIGINS": "app.example.com"}, "HERALD_CORS_ORIGINS: "},
	} {
		_, err := config.Load(config.Local, env(tc.env))
		require.ErrorContains(t, err, tc.want, name)
	}
	c, err = config.Load(config.Local, env(map[string]string{"HERALD_CORS_ORIGINS": "*"}))
	require.NoError(t, err)
	require.Equal(t, []string{"*"}, c.CORSOrigins)
}
