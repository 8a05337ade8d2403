package wslambda_test

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/wslambda"
)

// TestConnectWithJWT: $connect takes the identity provider's JWTs through
// app.App.Authenticator: a valid one connects, an expired one is 401 and
// one the issuer's keys cannot be fetched for is 503.
func TestConnectWithJWT(t *testing.T) {
	iss := jwttest.New(t)
	env := map[string]string{
		config.EnvTopicURL: "mem://wslambda-jwt", config.EnvStoreURL: "mem://wslambda-jwt/key",
		config.EnvJWTIssuer: iss.URL, config.EnvJWTAudience: jwttest.DefaultAudience,
	}
	cfg, err := config.Load(config.Local, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	a, err := app.Open(t.Context(), cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	h := wslambda.New(wslambda.Config{Service: a.Service(), Store: a.Store(), Auth: a.Authenticator(), SessionTTL: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	connect := func(id, token string) int {
		ev := events.APIGatewayWebsocketProxyRequest{
			Headers:        map[string]string{"Authorization": "Bearer " + token},
			RequestContext: events.APIGatewayWebsocketProxyRequestContext{EventType: "CONNECT", ConnectionID: id},
		}
		res, err := h.Handle(t.Context(), ev)
		require.NoError(t, err)
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, connect("jwt-conn-1", iss.Token(t, "alice", "receive:*")))
	c := iss.Claims("alice", "receive:*")
	c["exp"] = time.Now().Add(-time.Hour).Unix()
	require.Equal(t, http.StatusUnauthorized, connect("jwt-conn-2", iss.Sign(t, c)))
	iss.SetDown(true)
	iss.Rotate(t)
	require.Equal(t, http.StatusServiceUnavailable, connect("jwt-conn-3", iss.Token(t, "alice", "receive:*")))
}
