package destinations_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/destinations"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/internal/testkit/inmem"
)

// answer is one response: status, Location header and decoded body.
type answer struct {
	code     int
	location string
	body     map[string]any
}

// handler mounts every endpoint of the package over a fresh in-memory
// service behind bearer tokens: "admin" may do all, "reader" only read
// events.
func handler(t *testing.T) func(method, target, token, body string) answer {
	t.Helper()
	h := &destinations.Handler{Service: inmem.New(t, inmem.Options{}).Service}
	mux := http.NewServeMux()
	for pattern, fn := range map[string]http.HandlerFunc{
		"POST /v1/event-destinations":                    h.Create,
		"GET /v1/event-destinations":                     h.List,
		"GET /v1/event-destinations/{id}":                h.Get,
		"DELETE /v1/event-destinations/{id}":             h.Delete,
		"POST /v1/event-destinations/{id}/pause":         h.Pause,
		"POST /v1/event-destinations/{id}/resume":        h.Resume,
		"POST /v1/event-destinations/{id}/rotate-secret": h.RotateSecret,
	} {
		mux.Handle(pattern, fn)
	}
	srv := httpx.Authenticate(auth.StaticTokens{
		"admin":  {ID: "admin", Permissions: []string{auth.PermAll}},
		"reader": {ID: "reader", Permissions: []string{auth.PermReadEvents}},
	}, mux)
	return func(method, target, token, body string) answer {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		a := answer{code: rec.Code, location: rec.Header().Get("Location")}
		if rec.Body.Len() > 0 {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a.body), rec.Body.String())
		}
		return a
	}
}

// TestLifecycle: create (201 with Location), get, list, pause, resume,
// delete (204, no body), then 404.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	do := handler(t)
	a := do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER","filter_groups":[{"event_type":"a.b"}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	id, _ := a.body["id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "/v1/event-destinations/"+id, a.location)
	require.Equal(t, "001.00000000000000000000", a.body["committed"], "the zero position before the first commit")
	require.Equal(t, false, a.body["paused"])

	a = do("GET", "/v1/event-destinations/"+id, "admin", "")
	require.Equal(t, http.StatusOK, a.code)
	require.Equal(t, id, a.body["id"])
	a = do("GET", "/v1/event-destinations", "admin", "")
	require.Equal(t, http.StatusOK, a.code)
	require.Len(t, a.body["destinations"], 1)

	a = do("POST", "/v1/event-destinations/"+id+"/pause", "admin", "")
	require.Equal(t, http.StatusOK, a.code)
	require.Equal(t, true, a.body["paused"])
	a = do("POST", "/v1/event-destinations/"+id+"/resume", "admin", "")
	require.Equal(t, http.StatusOK, a.code)
	require.Equal(t, false, a.body["paused"])

	a = do("DELETE", "/v1/event-destinations/"+id, "admin", "")
	require.Equal(t, http.StatusNoContent, a.code)
	require.Nil(t, a.body)
	for _, method := range []string{"GET", "DELETE"} {
		a = do(method, "/v1/event-destinations/"+id, "admin", "")
		require.Equal(t, http.StatusNotFound, a.code, method)
	}
	a = do("POST", "/v1/event-destinations/"+id+"/pause", "admin", "")
	require.Equal(t, http.StatusNotFound, a.code)
}

// TestPreamble: an unknown token is 401 and a token without
// manage:destinations 403 on every endpoint; a control character in the
// path's id is 400 before any lookup; a bad body is 400, an unknown type
// 400 and bad filter groups 422.
func TestPreamble(t *testing.T) {
	t.Parallel()
	do := handler(t)
	for _, r := range []struct{ method, target, body string }{
		{"POST", "/v1/event-destinations", `{"type":"DURABLE_CONSUMER"}`},
		{"GET", "/v1/event-destinations", ""},
		{"GET", "/v1/event-destinations/x", ""},
		{"DELETE", "/v1/event-destinations/x", ""},
		{"POST", "/v1/event-destinations/x/pause", ""},
		{"POST", "/v1/event-destinations/x/resume", ""},
	} {
		require.Equal(t, http.StatusUnauthorized, do(r.method, r.target, "nobody", r.body).code, "%s %s", r.method, r.target)
		require.Equal(t, http.StatusForbidden, do(r.method, r.target, "reader", r.body).code, "%s %s", r.method, r.target)
	}
	for _, target := range []string{"/v1/event-destinations/a%00b", "/v1/event-destinations/a%1Bb/pause"} {
		method := "GET"
		if strings.HasSuffix(target, "pause") {
			method = "POST"
		}
		a := do(method, target, "admin", "")
		require.Equal(t, http.StatusBadRequest, a.code, target)
		require.Contains(t, a.body["message"], "the event destination id must be valid UTF-8")
	}
	require.Equal(t, http.StatusBadRequest, do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER","x":1}`).code)
	require.Equal(t, http.StatusBadRequest, do("POST", "/v1/event-destinations", "admin", `{"type":"FIREHOSE"}`).code)
	require.Equal(t, http.StatusUnprocessableEntity, do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER","filter_groups":[{"event_type":""}]}`).code)
}

// TestWebhookDestination: a WEBHOOK is created with its url (201 with the
// webhook's configuration and the secret), shown by get without the
// secret, rotated (a new secret); a refused url is 422, webhook members
// on another type 400, a webhook without url 400, rotating a durable
// consumer 404; a pull-only principal may do none of it.
func TestWebhookDestination(t *testing.T) {
	t.Parallel()
	do := handler(t)
	a := do("POST", "/v1/event-destinations", "admin", `{"type":"WEBHOOK","url":"https://hooks.example.com/in?k=v","timeout":5,"max_batch":20}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	secret, _ := a.body["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"), a.body)
	require.Equal(t, "WEBHOOK", a.body["type"])
	require.Equal(t, map[string]any{"url": "https://hooks.example.com/in?k=v", "timeout": 5.0, "max_batch": 20.0}, a.body["webhook"])
	id := a.body["id"].(string)

	g := do("GET", "/v1/event-destinations/"+id, "admin", "")
	require.Equal(t, http.StatusOK, g.code)
	require.NotContains(t, g.body, "secret")
	require.Equal(t, a.body["webhook"], g.body["webhook"])

	r := do("POST", "/v1/event-destinations/"+id+"/rotate-secret", "admin", "")
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.True(t, strings.HasPrefix(r.body["secret"].(string), "whsec_"))
	require.NotEqual(t, secret, r.body["secret"])

	for body, code := range map[string]int{
		`{"type":"WEBHOOK","url":"https://169.254.169.254/latest"}`:  http.StatusUnprocessableEntity,
		`{"type":"WEBHOOK","url":"http://hooks.example.com/"}`:       http.StatusUnprocessableEntity,
		`{"type":"WEBHOOK","url":"https://x.example","timeout":61}`:  http.StatusUnprocessableEntity,
		`{"type":"WEBHOOK","url":"https://x.example","max_batch":0}`: http.StatusUnprocessableEntity,
		`{"type":"WEBHOOK"}`: http.StatusBadRequest,
		`{"type":"DURABLE_CONSUMER","url":"https://x.example"}`: http.StatusBadRequest,
	} {
		require.Equal(t, code, do("POST", "/v1/event-destinations", "admin", body).code, body)
	}
	dc := do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER"}`)
	require.Equal(t, http.StatusNotFound, do("POST", "/v1/event-destinations/"+dc.body["id"].(string)+"/rotate-secret", "admin", "").code)
	require.Equal(t, http.StatusForbidden, do("POST", "/v1/event-destinations/"+id+"/rotate-secret", "reader", "").code)
}
