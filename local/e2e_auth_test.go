package local_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuthE2E checks that every endpoint but GET /health demands a valid
// bearer token, and that a refusal never echoes the presented token.
func TestAuthE2E(t *testing.T) {
	t.Parallel()
	c := start(t)
	id := c.create(t, nil)

	endpoints := []struct {
		method, path string
		body         string
	}{
		{"POST", "/api/v1beta/events", `{"event":{"event_type":"a.b"}}`},
		{"POST", "/api/v1beta/events/batch", `{"events":[{"event_type":"a.b"}]}`},
		{"POST", "/v1/event-destinations", `{"type":"DURABLE_CONSUMER"}`},
		{"GET", "/v1/event-destinations", ``},
		{"GET", "/v1/event-destinations/" + id, ``},
		{"DELETE", "/v1/event-destinations/" + id, ``},
		{"POST", "/v1/event-destinations/" + id + "/pause", ``},
		{"POST", "/v1/event-destinations/" + id + "/resume", ``},
		{"POST", "/v1/event-destinations/" + id + "/pull", ``},
		{"POST", "/v1/event-destinations/" + id + "/acknowledge", `{"leaseId":"x","generation":0,"status":"ok"}`},
	}
	const wrong = "wrong-token-s3cr3t-value"
	headers := map[string]string{
		"missing header":         "",
		"wrong token":            "Bearer " + wrong,
		"wrong scheme":           "Basic " + wrong,
		"token without scheme":   wrong,
		"empty bearer":           "Bearer ",
		"right token, no scheme": c.token,
	}
	for _, ep := range endpoints {
		for name, h := range headers {
			t.Run(ep.method+" "+ep.path+": "+name, func(t *testing.T) {
				var body []byte
				if ep.body != "" {
					body = []byte(ep.body)
				}
				r, err := c.rawWithHeader(ep.method, ep.path, h, body)
				require.NoError(t, err)
				checkUnauthorized(t, r, wrong, c.token)
			})
		}
	}

	t.Run("the destination is untouched by refused calls", func(t *testing.T) {
		d := c.getDest(t, id)
		require.False(t, d.Paused)
	})

	t.Run("health needs no token", func(t *testing.T) {
		r, err := c.raw("GET", "/health", "", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, `{"status":"ok"}`, string(r.Body))
		// A wrong token does not break it either.
		r, err = c.raw("GET", "/health", wrong, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
	})

	t.Run("the right token is accepted with a case-insensitive scheme", func(t *testing.T) {
		r, err := c.rawWithHeader("GET", "/v1/event-destinations", "bearer "+c.token, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
	})
}

// checkUnauthorized asserts a 401 with a JSON error body and a
// WWW-Authenticate challenge that contain none of the secrets.
func checkUnauthorized(t *testing.T, r *response, secrets ...string) {
	t.Helper()
	require.Equal(t, http.StatusUnauthorized, r.Status, "body %s", r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var e errorBody
	r.decode(t, &e)
	require.Equal(t, "unauthenticated", e.Code)
	require.NotEmpty(t, e.Message)
	require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer")
	containsNone(t, r.Body, secrets...)
	containsNone(t, []byte(r.Header.Get("WWW-Authenticate")), secrets...)
}
