package queues_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/queues"
	"github.com/heraldevents/herald/internal/testkit/inmem"
)

const path = "/api/v1beta/queues/durable"

// serve returns the three endpoints over a fresh in-memory service, behind
// bearer tokens: "admin" may do all, "creator" create and update only,
// "reader" nothing of this package's.
func serve(t *testing.T) func(method, target, token, body string) (int, map[string]any) {
	t.Helper()
	h := &queues.Handler{Service: inmem.New(t, inmem.Options{}).Service}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+path, h.Create)
	mux.HandleFunc("PATCH "+path, h.Update)
	mux.HandleFunc("DELETE "+path, h.Delete)
	srv := httpx.Authenticate(auth.StaticTokens{
		"admin":   {ID: "admin", Permissions: []string{auth.PermAll}},
		"creator": {ID: "creator", Permissions: []string{auth.PermCreateDurableQueues}},
		"reader":  {ID: "reader", Permissions: []string{auth.PermReadEvents}},
	}, mux)
	return func(method, target, token, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var out map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
		return rec.Code, out
	}
}

// TestCreateEnsuresTheQueue: 201 for a new id, 200 created:false with the
// queue's own filters for an existing one, 200 created:true for a
// generated id.
func TestCreateEnsuresTheQueue(t *testing.T) {
	t.Parallel()
	do := serve(t)
	code, q := do("POST", path, "creator", `{"queue_id":"q1","filter_groups":[{"event_type":"a.b"}]}`)
	require.Equal(t, http.StatusCreated, code, q)
	require.Equal(t, "q1", q["queue_id"])
	require.Equal(t, true, q["created"])
	require.Equal(t, []any{map[string]any{"event_type": "a.b", "filters": []any{}}}, q["filter_groups"], "[] rather than null")

	code, q = do("POST", path, "creator", `{"queue_id":"q1","filter_groups":[{"event_type":"other"}]}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, false, q["created"])
	require.Equal(t, "a.b", q["filter_groups"].([]any)[0].(map[string]any)["event_type"], "the queue's own filters")

	code, q = do("POST", path, "creator", `{}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, q["created"])
	require.True(t, strings.HasPrefix(q["queue_id"].(string), "dq-"), q)
}

// TestUpdateAndDelete: PATCH is compare-and-set on the current filters;
// DELETE needs delete-durable-queues; an unknown queue is 404.
func TestUpdateAndDelete(t *testing.T) {
	t.Parallel()
	do := serve(t)
	code, _ := do("POST", path, "creator", `{"queue_id":"q2","filter_groups":[{"event_type":"a"}]}`)
	require.Equal(t, http.StatusCreated, code)

	code, res := do("PATCH", path, "creator", `{"queue_id":"q2","current_filter_groups":[{"event_type":"wrong"}],"new_filter_groups":[{"event_type":"b"}]}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, res)
	code, res = do("PATCH", path, "creator", `{"queue_id":"q2","current_filter_groups":[{"event_type":"a"}],"new_filter_groups":[{"event_type":"b"}]}`)
	require.Equal(t, http.StatusOK, code, res)
	require.Equal(t, map[string]any{"success": true}, res)

	code, res = do("DELETE", path+"?queue_id=q2", "creator", "")
	require.Equal(t, http.StatusForbidden, code, res)
	code, res = do("DELETE", path+"?queue_id=q2", "admin", "")
	require.Equal(t, http.StatusOK, code, res)
	require.Equal(t, map[string]any{"success": true}, res)
	code, _ = do("DELETE", path+"?queue_id=q2", "admin", "")
	require.Equal(t, http.StatusNotFound, code)
}

// TestPreamble: every endpoint refuses an unknown token (401), a token
// without the permission (403), and a body that is not the documented
// JSON (400) before it reaches the service; a bad id is 422.
func TestPreamble(t *testing.T) {
	t.Parallel()
	do := serve(t)
	for method, body := range map[string]string{
		"POST": `{"queue_id":"q"}`, "DELETE": "",
		"PATCH": `{"queue_id":"q","current_filter_groups":[],"new_filter_groups":[]}`,
	} {
		code, res := do(method, path+"?queue_id=q", "nobody", body)
		require.Equal(t, http.StatusUnauthorized, code, "%s %v", method, res)
		code, res = do(method, path+"?queue_id=q", "reader", body)
		require.Equal(t, http.StatusForbidden, code, "%s %v", method, res)
	}
	for _, method := range []string{"POST", "PATCH"} {
		code, res := do(method, path, "admin", `{"queue_id":"q","delay":1}`)
		require.Equal(t, http.StatusBadRequest, code, "%s %v", method, res)
		require.Contains(t, res["message"], `unknown field "delay"`)
		code, _ = do(method, path, "admin", `not json`)
		require.Equal(t, http.StatusBadRequest, code, method)
	}
	code, res := do("POST", path, "admin", `{"queue_id":"bad id!"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, res)
}
