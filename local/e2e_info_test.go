package local_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/local"
)

// TestConfigurationSummary: GET /v1/info tells an operator what the
// deployment runs with — the start-up line's facts — and never a token;
// a principal without manage:destinations is refused.
func TestConfigurationSummary(t *testing.T) {
	t.Parallel()
	c := start(t, func(cfg *local.Config) {
		cfg.Tokens = auth.StaticTokens{"info-reader-token-1234": {ID: "info-reader", Permissions: []string{auth.PermReadEvents}}}
	})
	r := c.expect(t, http.StatusOK, "GET", health.InfoPath, nil)
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	var s health.Summary
	r.decode(t, &s)
	require.NotEmpty(t, s.Version.Version)
	require.Equal(t, "local", s.Profile)
	require.Equal(t, "all", s.Function)
	require.Equal(t, "mem", s.Broker)
	require.Equal(t, "mem", s.Store)
	require.Equal(t, "development token + static tokens (1)", s.Auth)
	require.Equal(t, "token", s.ConsoleSignIn)
	require.Equal(t, "off", s.Telemetry)
	require.NotContains(t, string(r.Body), c.token)
	require.NotContains(t, string(r.Body), "info-reader-token-1234")

	c.as("info-reader-token-1234").expect(t, http.StatusForbidden, "GET", health.InfoPath, nil)
	c.as("").expect(t, http.StatusUnauthorized, "GET", health.InfoPath, nil)
}
