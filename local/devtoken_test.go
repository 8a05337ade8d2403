package local_test

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/local"
)

// TestDevTokenOffLoopback: the local adapter does not start with the
// built-in development token on an address beyond loopback, whether the
// address comes from the Config or from the listener it is handed, and
// starts with a token of one's own there.
func TestDevTokenOffLoopback(t *testing.T) {
	t.Parallel()
	cfg := local.DefaultConfig()
	cfg.Addr = "0.0.0.0:0"
	_, err := local.New(t.Context(), cfg)
	require.ErrorContains(t, err, config.EnvDevToken)
	require.ErrorContains(t, err, "built-in development token")

	// The default address is loopback, the listener is not.
	srv, err := local.New(t.Context(), local.DefaultConfig())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	err = srv.Serve(t.Context(), ln) // returns at once: nothing is served
	require.ErrorContains(t, err, config.EnvDevToken)

	cfg.DevToken = "an-own-token-of-26-characters"
	srv, err = local.New(t.Context(), cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Close())
}

// TestDevTokenBesideIdentityProvider: with an identity provider and no
// HERALD_DEV_TOKEN, the built-in token is refused (401) while JWTs work;
// a token of one's own in HERALD_DEV_TOKEN is the opt-in. A JWT whose sub
// is "dev" and the development token publish as two principals.
func TestDevTokenBesideIdentityProvider(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	load := func(vars map[string]string) local.Config {
		vars[config.EnvJWTIssuer], vars[config.EnvJWTAudience] = iss.URL, jwttest.DefaultAudience
		c, err := config.Load(config.Local, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
		require.NoError(t, err)
		return local.Config{Config: c}
	}
	jwtDev := iss.Token(t, "dev", "publish:* receive:* read:events manage:destinations")

	cfg := load(map[string]string{})
	require.Empty(t, cfg.DevToken)
	h := start(t, local.WithConfig(cfg), uniqueBackends())
	r, err := h.raw("POST", "/api/v1beta/events", config.DefaultDevToken, []byte(`{"event":{"event_type":"a.b"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	h.as(jwtDev).publish(t, ev("a.b", "/x", nil))

	const own = "own-dev-token-0123456789"
	h = start(t, local.WithConfig(load(map[string]string{config.EnvDevToken: own})), uniqueBackends())
	admin := h.as(own)
	id := admin.create(t, nil)
	admin.publish(t, ev("who.published", "/by-dev-token", nil))
	h.as(jwtDev).publish(t, ev("who.published", "/by-jwt", nil))
	l := admin.pullLease(t, id, "limit", "10")
	require.Len(t, l.Events, 2)
	by := map[string]string{}
	for _, raw := range l.Events {
		var e struct {
			Subject   string `json:"subject"`
			Principal string `json:"principalidentity"`
		}
		require.NoError(t, json.Unmarshal(raw, &e))
		by[e.Subject] = e.Principal
	}
	require.Equal(t, map[string]string{"/by-dev-token": auth.DevPrincipalID, "/by-jwt": "dev"}, by)
}

// uniqueBackends gives an instance started with local.WithConfig its own
// in-memory broker and store, as local.Start does for its defaults.
func uniqueBackends() local.Option {
	return func(c *local.Config) {
		name := "herald-devtoken-" + uuid.NewString()
		c.TopicURL, c.StoreURL = "mem://"+name, "mem://"+name+"/key"
	}
}
