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
		"PATCH /v1/event-destinations/{id}":              h.Update,
		"GET /v1/event-destinations/{id}/attempts":       h.Attempts,
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
	require.Equal(t, map[string]any{"url": "https://hooks.example.com/in?k=v", "timeout": 5.0, "max_batch": 20.0, "ordered": false, "consecutive_failures": 0.0}, a.body["webhook"])
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

// TestWebhookPatch: PATCH changes a webhook's url, timeout, max_batch,
// rate_limit and ordering, and its policies, in one request; get shows
// the result. A bad member is refused with nothing changed, even when
// other members of the request are good: a refused url or a value out of
// range 422, a member of the wrong shape 400, webhook members on a
// durable consumer 400, an unknown id 404, a pull-only principal 403.
func TestWebhookPatch(t *testing.T) {
	t.Parallel()
	do := handler(t)
	a := do("POST", "/v1/event-destinations", "admin", `{"type":"WEBHOOK","url":"https://hooks.example.com/a","rate_limit":5}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	id := a.body["id"].(string)
	require.Equal(t, 5.0, a.body["webhook"].(map[string]any)["rate_limit"])
	require.Equal(t, 8.0, a.body["dead_letter_policy"].(map[string]any)["max_delivery_attempts"], "the schedule's 8 attempts")
	path := "/v1/event-destinations/" + id

	p := do("PATCH", path, "admin", `{"url":"https://hooks.example.com/b","timeout":30,"max_batch":50,"rate_limit":0.5,"ordered":true,"dead_letter_policy":{"max_delivery_attempts":3}}`)
	require.Equal(t, http.StatusOK, p.code, p.body)
	want := map[string]any{"url": "https://hooks.example.com/b", "timeout": 30.0, "max_batch": 50.0, "rate_limit": 0.5, "ordered": true, "consecutive_failures": 0.0}
	require.Equal(t, want, p.body["webhook"])
	require.Equal(t, 3.0, p.body["dead_letter_policy"].(map[string]any)["max_delivery_attempts"])
	g := do("GET", path, "admin", "")
	require.Equal(t, want, g.body["webhook"])
	require.NotContains(t, g.body, "secret")

	for body, code := range map[string]int{
		`{"url":"https://169.254.169.254/latest","timeout":10}`: http.StatusUnprocessableEntity,
		`{"url":"http://hooks.example.com/c"}`:                  http.StatusUnprocessableEntity,
		`{"url":"https://user:pw@hooks.example.com/"}`:          http.StatusUnprocessableEntity,
		`{"timeout":0}`:                     http.StatusUnprocessableEntity,
		`{"timeout":61,"ordered":false}`:    http.StatusUnprocessableEntity,
		`{"timeout":9223372036854775807}`:   http.StatusUnprocessableEntity,
		`{"max_batch":101}`:                 http.StatusUnprocessableEntity,
		`{"max_batch":0}`:                   http.StatusUnprocessableEntity,
		`{"rate_limit":-1}`:                 http.StatusUnprocessableEntity,
		`{"rate_limit":1001}`:               http.StatusUnprocessableEntity,
		`{"rate_limit":0.0001}`:             http.StatusUnprocessableEntity,
		`{"rate_limit":"fast"}`:             http.StatusBadRequest,
		`{"ordered":"yes"}`:                 http.StatusBadRequest,
		`{"url":7}`:                         http.StatusBadRequest,
		`{"secret":"whsec_x"}`:              http.StatusBadRequest,
		`{"ack_timeout":5,"ordered":false}`: http.StatusBadRequest,
		`{"dead_letter_policy":{"max_delivery_attempts":0},"ordered":false}`: http.StatusUnprocessableEntity,
	} {
		r := do("PATCH", path, "admin", body)
		require.Equal(t, code, r.code, "%s: %v", body, r.body)
		g := do("GET", path, "admin", "")
		require.Equal(t, want, g.body["webhook"], "%s changed nothing", body)
		require.Equal(t, 3.0, g.body["dead_letter_policy"].(map[string]any)["max_delivery_attempts"], body)
	}

	// null removes the rate limit and the dead-letter policy, which for a
	// webhook falls back to the schedule's 8 attempts.
	p = do("PATCH", path, "admin", `{"rate_limit":null,"dead_letter_policy":null}`)
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.NotContains(t, p.body["webhook"], "rate_limit")
	require.Equal(t, 8.0, p.body["dead_letter_policy"].(map[string]any)["max_delivery_attempts"])
	// An empty PATCH changes nothing and answers the destination.
	p = do("PATCH", path, "admin", `{}`)
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Equal(t, "https://hooks.example.com/b", p.body["webhook"].(map[string]any)["url"])

	dc := do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER"}`)
	dcPath := "/v1/event-destinations/" + dc.body["id"].(string)
	for _, body := range []string{`{"url":"https://hooks.example.com/"}`, `{"rate_limit":1}`, `{"ordered":true}`, `{"timeout":5}`, `{"max_batch":5}`} {
		r := do("PATCH", dcPath, "admin", body)
		require.Equal(t, http.StatusBadRequest, r.code, body)
		require.Contains(t, r.body["message"], "only for destinations of type WEBHOOK", body)
	}
	r := do("PATCH", dcPath, "admin", `{"dead_letter_policy":{"max_delivery_attempts":4}}`)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.NotContains(t, r.body, "webhook")
	require.Equal(t, http.StatusNotFound, do("PATCH", "/v1/event-destinations/nope", "admin", `{"ordered":true}`).code)
	require.Equal(t, http.StatusForbidden, do("PATCH", path, "reader", `{"ordered":false}`).code)
	require.Equal(t, http.StatusBadRequest, do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER","ordered":true}`).code)
}

// TestWebhookAttempts: GET …/attempts answers a webhook's attempt log (an
// empty list before the first push); a durable consumer or an unknown id
// is 404, a bad id 400, a pull-only principal 403.
func TestWebhookAttempts(t *testing.T) {
	t.Parallel()
	do := handler(t)
	a := do("POST", "/v1/event-destinations", "admin", `{"type":"WEBHOOK","url":"https://hooks.example.com/a"}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	path := "/v1/event-destinations/" + a.body["id"].(string) + "/attempts"
	g := do("GET", path, "admin", "")
	require.Equal(t, http.StatusOK, g.code, g.body)
	require.Equal(t, map[string]any{"attempts": []any{}}, g.body)
	require.Equal(t, http.StatusForbidden, do("GET", path, "reader", "").code)
	dc := do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER"}`)
	require.Equal(t, http.StatusNotFound, do("GET", "/v1/event-destinations/"+dc.body["id"].(string)+"/attempts", "admin", "").code)
	require.Equal(t, http.StatusNotFound, do("GET", "/v1/event-destinations/nope/attempts", "admin", "").code)
	require.Equal(t, http.StatusBadRequest, do("GET", "/v1/event-destinations/a%00b/attempts", "admin", "").code)
}
