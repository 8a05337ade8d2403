package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
)

// TestHTTP2PingInterval: HERALD_HTTP2_PING_INTERVAL defaults to 30s on the
// servers, "0s" turns the PINGs off, values outside 1s–10m are refused
// naming the variable, and the Lambda bootstrap (no server) does not
// read it.
func TestHTTP2PingInterval(t *testing.T) {
	t.Parallel()
	cloud := map[string]string{config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://t/key", config.EnvTokens: `{"` + longToken + `": {"id": "a", "permissions": ["*"]}}`}
	for _, p := range []config.Profile{config.Local, config.CloudRun} {
		c, err := config.Load(p, env(cloud))
		require.NoError(t, err, p)
		require.Equal(t, config.DefaultHTTP2PingInterval, c.PingInterval(), p)
		require.Equal(t, 30*time.Second, c.PingInterval())

		m := map[string]string{config.EnvHTTP2PingInterval: "45s"}
		for k, v := range cloud {
			m[k] = v
		}
		c, err = config.Load(p, env(m))
		require.NoError(t, err)
		require.Equal(t, 45*time.Second, c.PingInterval())
		m[config.EnvHTTP2PingInterval] = "0s"
		c, err = config.Load(p, env(m))
		require.NoError(t, err)
		require.Zero(t, c.PingInterval(), "0s: no PINGs")
		for _, bad := range []string{"500ms", "11m", "-1s", "often"} {
			m[config.EnvHTTP2PingInterval] = bad
			_, err = config.Load(p, env(m))
			require.ErrorContains(t, err, config.EnvHTTP2PingInterval+":", bad)
		}
	}
	require.Equal(t, config.DefaultHTTP2PingInterval, config.Defaults(config.CloudRun).PingInterval(), "a Config built in code from Defaults gets the default")

	var lambda, run []string
	for _, v := range config.ReadBy(config.Lambda, config.All) {
		lambda = append(lambda, v.Name)
	}
	for _, v := range config.ReadBy(config.CloudRun, config.Publish) {
		run = append(run, v.Name)
	}
	require.NotContains(t, lambda, config.EnvHTTP2PingInterval, "Lambda runs no server")
	require.Contains(t, run, config.EnvHTTP2PingInterval, "every Cloud Run function serves HTTP/2")
}
