package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
)

// TestSetupReadsTheIdentityProvider: the bootstrap reads HERALD_JWT_*,
// starts without static tokens, and answers API Gateway events by the
// issuer's JWTs: 200 with the scope, 403 insufficient_scope without, 401
// invalid_token for an expired one, and CORS headers for a listed origin.
func TestSetupReadsTheIdentityProvider(t *testing.T) {
	iss := jwttest.New(t)
	env := map[string]string{
		"HERALD_FUNCTION": "publish", "HERALD_TOPIC_URL": "mem://lambda-jwt-test", "HERALD_STORE_URL": "mem://lambda-jwt-test/key",
		"HERALD_JWT_ISSUER": iss.URL, "HERALD_JWT_AUDIENCE": jwttest.DefaultAudience,
		"HERALD_CORS_ORIGINS": "https://app.example.com",
	}
	h, err := setup(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)

	invoke := func(token string) (int, map[string]string) {
		ev := map[string]any{
			"version": "2.0", "routeKey": "POST /api/v1beta/events", "rawPath": "/api/v1beta/events",
			"headers":        map[string]string{"authorization": "Bearer " + token, "content-type": "application/json", "origin": "https://app.example.com"},
			"body":           `{"event":{"event_type":"orders.created"}}`,
			"requestContext": map[string]any{"http": map[string]any{"method": "POST", "path": "/api/v1beta/events", "sourceIp": "127.0.0.1"}},
		}
		payload, err := json.Marshal(ev)
		require.NoError(t, err)
		out, err := h.Invoke(t.Context(), payload)
		require.NoError(t, err)
		var res struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
		}
		require.NoError(t, json.Unmarshal(out, &res), "%s", out)
		return res.StatusCode, res.Headers
	}
	status, hdr := invoke(iss.Token(t, "svc", "publish:orders.*"))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "https://app.example.com", hdr["Access-Control-Allow-Origin"])
	status, hdr = invoke(iss.Token(t, "svc", "publish:billing.*"))
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, hdr["Www-Authenticate"], "insufficient_scope")
	c := iss.Claims("svc", "publish:orders.*")
	c["exp"] = 1
	status, hdr = invoke(iss.Sign(t, c))
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, hdr["Www-Authenticate"], `error_description="token expired"`)
}
