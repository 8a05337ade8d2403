package local_test

// This file validates Herald's live requests and answers against its own
// OpenAPI document (package functions/openapi) with
// github.com/getkin/kin-openapi: a local.Start server is driven through
// every route — successes and the error statuses a client must handle —
// and each request a client sends and each answer Herald gives is held to
// the document. The answers are held more strictly than the document
// reads: an object schema with properties admits no member it does not
// list (the document leaves answers open so that clients ignore members a
// later version adds), so a member Herald answers and the document lacks
// fails here.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/openapi"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/local"
)

// The document describes an SSE response as the list of frames an
// EventSource parses from it; kin-openapi decodes the stream so.
func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", decodeEventStream)
}

// decodeEventStream parses Server-Sent Events (the HTML standard's rules,
// for the single-line data Herald writes) into [{event, id?, data}],
// comments left out.
func decodeEventStream(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	var frames []any
	frame := map[string]any{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(frame) > 0 {
				frames = append(frames, frame)
			}
			frame = map[string]any{}
		case strings.HasPrefix(line, ":"):
		default:
			field, value, _ := strings.Cut(line, ":")
			frame[field] = strings.TrimPrefix(value, " ")
		}
	}
	if len(frame) > 0 {
		return nil, errors.New("the stream ends inside a frame")
	}
	return frames, sc.Err()
}

// liveSpec checks requests and answers against the OpenAPI document and
// remembers which operations answered which statuses.
type liveSpec struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]map[int]bool // operationId → statuses validated
}

// newLiveSpec loads the document for a server at base, with every object
// schema of properties closed to other members (see the file comment).
func newLiveSpec(t *testing.T, base string) *liveSpec {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	closeObjects(doc)
	doc.Servers = openapi3.Servers{{URL: base}}
	r, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &liveSpec{doc: doc, router: r, seen: map[string]map[int]bool{}}
}

// closeObjects sets additionalProperties false on every schema with
// properties that says nothing about other members. Schemas that admit
// them on purpose (the publish bodies, whose published schemas allow
// additional properties) say so with additionalProperties: true.
func closeObjects(doc *openapi3.T) {
	visited := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || visited[ref.Value] {
			return
		}
		s := ref.Value
		visited[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			walk(p)
		}
		for _, group := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for _, r := range group {
				walk(r)
			}
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		walk(s.ContentSchema)
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				for _, mt := range r.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
}

// saw records that op answered status, validated.
func (s *liveSpec) saw(op string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[op] == nil {
		s.seen[op] = map[int]bool{}
	}
	s.seen[op][status] = true
}

// route finds req's operation; every request a test sends has one.
func (s *liveSpec) route(t *testing.T, req *http.Request) (*routers.Route, map[string]string) {
	t.Helper()
	route, params, err := s.router.FindRoute(req)
	require.NoError(t, err, "%s %s is not in the OpenAPI document", req.Method, req.URL.Path)
	return route, params
}

// checkRequest validates a request a generated client would send.
func (s *liveSpec) checkRequest(t *testing.T, req *http.Request, route *routers.Route, params map[string]string, body []byte) *openapi3filter.RequestValidationInput {
	t.Helper()
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	require.NoError(t, openapi3filter.ValidateRequest(context.Background(), in), "%s %s: the request does not follow the document", req.Method, req.URL)
	req.Body = io.NopCloser(bytes.NewReader(body))
	return in
}

// checkResponse validates an answer: its status is listed, its headers and
// body follow the document.
func (s *liveSpec) checkResponse(t *testing.T, req *http.Request, route *routers.Route, params map[string]string, status int, header http.Header, body []byte) {
	t.Helper()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(body)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out), "%s %s answered %d %s", req.Method, req.URL.Path, status, body)
	s.saw(route.Operation.OperationID, status)
}

// request is one call to send.
type request struct {
	method, path string
	// token is the bearer token ("" sends no Authorization header).
	token string
	// header adds or replaces request headers.
	header http.Header
	// body is sent as JSON: marshalled, or as is when a []byte.
	body any
	// status is the answer required.
	status int
	// invalid says the request breaks the document on purpose, so it is
	// not validated (a 400 or a 422 always is).
	invalid bool
}

// do sends r to the server at base, validates request and answer, and
// returns the answer.
func (s *liveSpec) do(t *testing.T, base string, r request) *response {
	t.Helper()
	var raw []byte
	switch b := r.body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(t, err)
	}
	req, err := http.NewRequest(r.method, base+r.path, bytes.NewReader(raw))
	require.NoError(t, err)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	route, params := s.route(t, req)
	if !r.invalid && r.status != http.StatusBadRequest && r.status != http.StatusUnprocessableEntity {
		s.checkRequest(t, req, route, params, raw)
	}
	sent := req.Clone(context.Background())
	sent.Body = io.NopCloser(bytes.NewReader(raw))
	res, err := http.DefaultTransport.RoundTrip(sent)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, r.status, res.StatusCode, "%s %s: %s", r.method, r.path, body)
	s.checkResponse(t, req, route, params, res.StatusCode, res.Header, body)
	return &response{Status: res.StatusCode, Header: res.Header, Body: body}
}

// checkStream validates an open SSE stream: its request (sent by c to
// path with headers), its 200 answer's headers, and the frames read so far
// — each one of the document's frames, its data of the frame's
// contentSchema.
func (s *liveSpec) checkStream(t *testing.T, base, path string, headers map[string]string, st *sseConn, frames []sseFrame) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	route, params := s.route(t, req)
	s.checkRequest(t, req, route, params, nil)
	var body strings.Builder
	for _, f := range frames {
		if f.Comment != "" {
			fmt.Fprintf(&body, ": %s\n\n", f.Comment)
			continue
		}
		fmt.Fprintf(&body, "event: %s\n", f.Event)
		if f.HasID {
			fmt.Fprintf(&body, "id: %s\n", f.ID)
		}
		fmt.Fprintf(&body, "data: %s\n\n", f.Data)
	}
	s.checkResponse(t, req, route, params, http.StatusOK, st.header, []byte(body.String()))

	// The data of each frame, against the contentSchema of the frame
	// schema its event name picks (JSON Schema treats contentSchema as an
	// annotation; the harness asserts it).
	stream := s.doc.Components.Schemas["EventStream"].Value
	for _, f := range frames {
		if f.Comment != "" {
			continue
		}
		var data *openapi3.Schema
		for _, alt := range stream.Items.Value.OneOf {
			if alt.Value.Properties["event"].Value.Const == f.Event {
				data = alt.Value.Properties["data"].Value.ContentSchema.Value
			}
		}
		require.NotNil(t, data, "frame %q is not one of the document's", f.Event)
		var v any
		require.NoError(t, json.Unmarshal([]byte(f.Data), &v), "frame %q: data %s", f.Event, f.Data)
		require.NoError(t, data.VisitJSON(v, openapi3.EnableJSONSchema2020()), "frame %q: data %s", f.Event, f.Data)
	}
}

// frames reads frames from st until one named last arrives, keep-alive
// comments included, and returns them all.
func frames(t *testing.T, st *sseConn, last string) []sseFrame {
	t.Helper()
	var out []sseFrame
	for {
		f := st.frame(t)
		out = append(out, f)
		if f.Event == last {
			return out
		}
	}
}

// websocketKey is a fresh Sec-WebSocket-Key.
func websocketKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

// upgrade opens the WebSocket at base with the Authorization of token ("":
// none) and header, validates the request a client sends and the answer,
// and requires status (101 when the upgrade succeeds).
func (s *liveSpec) upgrade(t *testing.T, base, token string, header http.Header, status int) {
	t.Helper()
	// The request as gorilla/websocket sends it, for validation (the
	// dialer writes its own, with a key of its choosing).
	mirror, err := http.NewRequest("GET", base+"/api/v1beta/events/websocket", nil)
	require.NoError(t, err)
	mirror.Header.Set("Upgrade", "websocket")
	mirror.Header.Set("Connection", "Upgrade")
	mirror.Header.Set("Sec-WebSocket-Key", websocketKey(t))
	mirror.Header.Set("Sec-WebSocket-Version", "13")
	mirror.Header.Set("Sec-WebSocket-Protocol", "herald.v1")
	send := http.Header{}
	if token != "" {
		send.Set("Authorization", "Bearer "+token)
		mirror.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range header {
		send[k] = vs
		mirror.Header[k] = vs
	}
	route, params := s.route(t, mirror)
	s.checkRequest(t, mirror, route, params, nil)

	d := websocket.Dialer{Subprotocols: []string{"herald.v1"}, HandshakeTimeout: frameWait}
	conn, res, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+"/api/v1beta/events/websocket", send)
	require.NotNil(t, res, "%v", err)
	var body []byte
	if conn != nil {
		require.NoError(t, err)
		require.Equal(t, "herald.v1", conn.Subprotocol())
		_ = conn.Close()
	} else {
		require.ErrorIs(t, err, websocket.ErrBadHandshake)
		body, err = io.ReadAll(res.Body)
		require.NoError(t, err)
	}
	require.Equal(t, status, res.StatusCode, "%s", body)
	s.checkResponse(t, mirror, route, params, res.StatusCode, res.Header, body)
}

// requireCovered requires that every operation of the document answered
// a success validated above, and that the error statuses a client must
// handle were each validated on some route.
func (s *liveSpec) requireCovered(t *testing.T, errors ...int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	all := map[int]bool{}
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ok := false
			for status := range s.seen[op.OperationID] {
				all[status] = true
				ok = ok || status < 300
			}
			require.True(t, ok, "%s %s (%s) answered no success", method, path, op.OperationID)
		}
	}
	for _, status := range errors {
		require.True(t, all[status], "no route answered %d", status)
	}
	ops := slices.Sorted(maps.Keys(s.seen))
	for _, op := range ops {
		t.Logf("%s: %v", op, slices.Sorted(maps.Keys(s.seen[op])))
	}
}

// TestOpenAPILive drives a local Herald through every REST route and
// validates every request and answer against the OpenAPI document: both
// APIs and Herald's own endpoints, their successes, and 400, 401, 403,
// 404, 409, 422, 429 and 503.
func TestOpenAPILive(t *testing.T) {
	t.Parallel()
	const readerToken = "openapi-reader-token"
	c := start(t, func(cfg *local.Config) {
		cfg.Tokens = auth.StaticTokens{readerToken: {ID: "openapi-reader", Permissions: []string{auth.PermReadEvents}}}
		// One publish at a time: a publish held open sheds the next (503).
		cfg.MaxConcurrentPublishes = 1
	})
	s := newLiveSpec(t, c.base)
	call := func(r request) *response {
		t.Helper()
		if r.token == "-" {
			r.token = ""
		} else if r.token == "" {
			r.token = c.token
		}
		return s.do(t, c.base, r)
	}
	const (
		none   = "-" // no token
		reader = readerToken
	)
	event := func(typ string, n int) map[string]any {
		return map[string]any{"event_type": typ, "message": map[string]any{"n": n}, "occurred_at": "2024-10-16T14:30:00Z",
			"resource": map[string]any{"resource_id": fmt.Sprintf("/items/%d", n)}}
	}
	group := func(typ string) []any { return []any{map[string]any{"event_type": typ, "filters": []any{}}} }

	// Health and the document itself, without a token.
	call(request{method: "GET", path: "/health", token: none, status: 200})
	call(request{method: "GET", path: "/api/v1beta/health", token: none, status: 200})
	call(request{method: "GET", path: "/health/ready", token: none, status: 200})
	call(request{method: "GET", path: "/openapi.yaml", token: none, status: 200})
	call(request{method: "GET", path: "/openapi.json", token: none, status: 200})

	// Durable consumers: create, list, get, change, pause, resume.
	var dest struct{ ID string }
	r := call(request{method: "POST", path: "/v1/event-destinations", body: map[string]any{
		"type": "DURABLE_CONSUMER", "filter_groups": group("oa.dest"),
		"retry_policy": map[string]any{"minimum_backoff": 0, "maximum_backoff": 1}, "dead_letter_policy": map[string]any{"max_delivery_attempts": 5},
	}, status: 201})
	r.decode(t, &dest)
	require.Equal(t, "/v1/event-destinations/"+dest.ID, r.Header.Get("Location"))
	destPath := "/v1/event-destinations/" + dest.ID
	call(request{method: "GET", path: "/v1/event-destinations", status: 200})
	// A webhook: its create answer (with the secret), get and rotation.
	// Deleted at once, so that no push tries its host.
	var hook struct {
		ID string `json:"id"`
	}
	call(request{method: "POST", path: "/v1/event-destinations", body: map[string]any{"type": "WEBHOOK", "url": "https://hooks.example.com/oa", "timeout": 5, "max_batch": 2,
		"filter_groups": group("oa.webhook")}, status: 201}).decode(t, &hook)
	call(request{method: "GET", path: "/v1/event-destinations/" + hook.ID, status: 200})
	call(request{method: "POST", path: "/v1/event-destinations/" + hook.ID + "/rotate-secret", status: 200})
	call(request{method: "PATCH", path: "/v1/event-destinations/" + hook.ID, body: map[string]any{"rate_limit": 2.5, "ordered": true, "timeout": 10,
		"dead_letter_policy": nil}, status: 200})
	call(request{method: "PATCH", path: "/v1/event-destinations/" + hook.ID, body: map[string]any{"url": "https://169.254.169.254/"}, status: 422})
	call(request{method: "GET", path: "/v1/event-destinations/" + hook.ID + "/attempts", status: 200})
	call(request{method: "DELETE", path: "/v1/event-destinations/" + hook.ID, status: 204})
	call(request{method: "GET", path: "/v1/event-destinations/" + hook.ID + "/attempts", status: 404})
	call(request{method: "POST", path: "/v1/event-destinations/" + hook.ID + "/rotate-secret", status: 404})
	call(request{method: "GET", path: destPath, status: 200})
	call(request{method: "PATCH", path: destPath, body: map[string]any{"retry_policy": nil}, status: 200})
	r = call(request{method: "POST", path: destPath + "/pause", status: 200})
	require.Contains(t, string(r.Body), `"paused":true`)
	call(request{method: "POST", path: destPath + "/pull", status: 409})
	call(request{method: "POST", path: destPath + "/resume", status: 200})

	// Publish, single and batch: one event of the batch, which a client
	// that follows the document would not send, fails alone.
	call(request{method: "POST", path: "/api/v1beta/events", body: map[string]any{"event": event("oa.dest", 1)}, status: 200})
	r = call(request{method: "POST", path: "/api/v1beta/events/batch", body: map[string]any{"events": []any{
		event("oa.dest", 2), event("oa.dest", 3), map[string]any{"event_type": "bad type!"}, event("oa.dest", 4),
	}}, status: 200, invalid: true})
	require.Equal(t, 3, strings.Count(string(r.Body), `"success":true`), "%s", r.Body)

	// A keyed publish, its replay, and the key reused for another event.
	keyed := http.Header{"Idempotency-Key": {"oa-key-1"}}
	call(request{method: "POST", path: "/api/v1beta/events", header: keyed, body: map[string]any{"event": event("oa.keyed", 1)}, status: 200})
	r = call(request{method: "POST", path: "/api/v1beta/events", header: keyed, body: map[string]any{"event": event("oa.keyed", 1)}, status: 200})
	require.Contains(t, string(r.Body), `"replayed":true`)
	call(request{method: "POST", path: "/api/v1beta/events", header: keyed, body: map[string]any{"event": event("oa.keyed", 2)}, status: 422})
	batchKey := http.Header{"Idempotency-Key": {"oa-key-2"}}
	for range 2 {
		call(request{method: "POST", path: "/api/v1beta/events/batch", header: batchKey, body: map[string]any{"events": []any{event("oa.keyed", 3)}}, status: 200})
	}

	// Pull, extend, acknowledge: ok, failed with a delay, stale, rejected.
	var l lease
	call(request{method: "POST", path: destPath + "/pull?limit=2&visibility=30&workerId=w1", status: 200}).decode(t, &l)
	require.Len(t, l.Events, 2)
	call(request{method: "POST", path: destPath + "/extend", body: map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "visibility": 120}, status: 200})
	call(request{method: "GET", path: "/v1/info", status: 200})
	r = call(request{method: "GET", path: destPath + "/leases", status: 200})
	require.Contains(t, string(r.Body), `"state":"held"`)
	call(request{method: "GET", path: "/v1/event-destinations/no-such-destination/leases", status: 404})
	r = call(request{method: "POST", path: destPath + "/extend", body: map[string]any{"leaseId": l.LeaseID, "generation": l.Generation + 1, "visibility": 120}, status: 200})
	require.JSONEq(t, `{"status":"stale"}`, string(r.Body))
	r = call(request{method: "POST", path: destPath + "/acknowledge", body: map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": "ok"}, status: 200})
	require.Contains(t, string(r.Body), `"status":"committed"`)
	call(request{method: "POST", path: destPath + "/pull?limit=1&workerId=w2", status: 200}).decode(t, &l)
	r = call(request{method: "POST", path: destPath + "/acknowledge", body: map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": "failed", "retryAfter": 0}, status: 200})
	require.Contains(t, string(r.Body), `"status":"requeued"`)
	r = call(request{method: "POST", path: destPath + "/acknowledge", body: map[string]any{"leaseId": "no-such-lease", "generation": 0, "status": "ok"}, status: 200})
	require.Contains(t, string(r.Body), `"status":"stale"`)
	call(request{method: "POST", path: destPath + "/pull?limit=1&workerId=w2", status: 200}).decode(t, &l)
	r = call(request{method: "POST", path: destPath + "/acknowledge", body: map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": "rejected"}, status: 200})
	require.Contains(t, string(r.Body), `"status":"dead_lettered"`)
	call(request{method: "POST", path: destPath + "/pull?workerId=w3", status: 200}).decode(t, &l)
	call(request{method: "POST", path: destPath + "/acknowledge", body: map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": "ok"}, status: 200})
	call(request{method: "POST", path: destPath + "/pull?workerId=w3", status: 204})

	// The durable-consumer API's errors.
	call(request{method: "POST", path: destPath + "/pull?limit=0", status: 400})
	call(request{method: "POST", path: destPath + "/acknowledge", body: map[string]any{"leaseId": "x", "generation": 0, "status": "ok", "delay": 30}, status: 400})
	call(request{method: "POST", path: "/v1/event-destinations", body: map[string]any{"type": "WEBHOOK"}, status: 400})
	r = call(request{method: "POST", path: "/v1/event-destinations", body: map[string]any{"type": "DURABLE_CONSUMER",
		"filter_groups": []any{map[string]any{"event_type": "no spaces"}}}, status: 422})
	require.Contains(t, string(r.Body), `"detail":"filter_groups[0].event_type`, "a 422 outside /api/ carries detail as a string")
	call(request{method: "GET", path: "/v1/event-destinations", token: none, status: 401})
	call(request{method: "GET", path: "/v1/event-destinations", header: http.Header{"Authorization": {"Bearer " + c.token, "Bearer " + c.token}}, status: 400})
	call(request{method: "POST", path: "/v1/event-destinations", token: reader, body: map[string]any{"type": "DURABLE_CONSUMER"}, status: 403})
	call(request{method: "GET", path: "/v1/event-destinations/no-such-destination", status: 404})
	call(request{method: "DELETE", path: "/v1/event-destinations/no-such-destination", status: 404})
	call(request{method: "POST", path: "/v1/event-destinations/no-such-destination/pull", status: 404})
	call(request{method: "GET", path: "/v1/event-destinations/bad%01id", status: 400})
	call(request{method: "PATCH", path: destPath, body: map[string]any{"dead_letter_policy": map[string]any{"max_delivery_attempts": 0}}, status: 422})
	call(request{method: "PATCH", path: "/v1/event-destinations/no-such-destination", body: map[string]any{}, status: 404})
	call(request{method: "POST", path: destPath + "/extend", body: map[string]any{"leaseId": "x", "generation": 0, "visibility": 0}, status: 400})
	call(request{method: "POST", path: destPath + "/acknowledge", body: []byte("{\"leaseId\":\"\xff\",\"generation\":0,\"status\":\"ok\"}"), status: 422})
	// The notifications API's publish errors: a 422 names the field.
	r = call(request{method: "POST", path: "/api/v1beta/events", body: map[string]any{"event": map[string]any{"event_type": "no spaces"}}, status: 422})
	require.Contains(t, string(r.Body), `"loc":["body","event","event_type"]`)
	call(request{method: "POST", path: "/api/v1beta/events", token: reader, body: map[string]any{"event": event("oa.dest", 0)}, status: 403})
	call(request{method: "POST", path: "/api/v1beta/events/batch", body: map[string]any{"events": []any{}}, status: 422})
	call(request{method: "POST", path: "/api/v1beta/events/batch", token: none, body: map[string]any{"events": []any{event("oa.dest", 0)}}, status: 401})
	// An event the caller may not receive: 403, and the lease waits.
	call(request{method: "POST", path: "/api/v1beta/events", body: map[string]any{"event": event("oa.dest", 5)}, status: 200})
	call(request{method: "POST", path: destPath + "/pull?workerId=reader", token: reader, status: 403})

	// A full in-flight window: 429 with Retry-After and its state.
	var window struct{ ID string }
	call(request{method: "POST", path: "/v1/event-destinations", body: map[string]any{"type": "DURABLE_CONSUMER", "filter_groups": group("oa.window")}, status: 201}).decode(t, &window)
	batch := make([]any, 1000)
	for i := range batch {
		batch[i] = event("oa.window", i)
	}
	call(request{method: "POST", path: "/api/v1beta/events/batch", body: map[string]any{"events": batch}, status: 200})
	for w := 0; c.getDest(t, window.ID).InFlight < 1000; w++ {
		require.Less(t, w, 1000, "the window never filled")
		call(request{method: "POST", path: fmt.Sprintf("/v1/event-destinations/%s/pull?limit=100&workerId=w%d", window.ID, w), status: 200})
	}
	r = call(request{method: "POST", path: "/v1/event-destinations/" + window.ID + "/pull?workerId=late", status: 429})
	require.Contains(t, string(r.Body), `"in_flight":1000`)

	// Durable queues: ensure-exists create (201, then 200), a generated id,
	// re-filter, change policies, the errors.
	call(request{method: "POST", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "oa-queue", "filter_groups": group("oa.queue"), "ack_timeout": 60}, status: 201})
	r = call(request{method: "POST", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "oa-queue"}, status: 200})
	require.Contains(t, string(r.Body), `"created":false`)
	r = call(request{method: "POST", path: "/api/v1beta/queues/durable", body: map[string]any{"filter_groups": group("oa.generated")}, status: 200})
	require.Contains(t, string(r.Body), `"created":true`)
	call(request{method: "GET", path: "/v1/event-destinations/oa-queue", status: 200})
	call(request{method: "PATCH", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "oa-queue",
		"current_filter_groups": group("oa.queue"), "new_filter_groups": []any{
			map[string]any{"event_type": "oa.queue", "filters": []any{map[string]any{"filter_type": "starts_with_greedy", "resource_id": "/items"}}}}}, status: 200})
	call(request{method: "PATCH", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "oa-queue", "ack_timeout": nil}, status: 200})
	call(request{method: "PATCH", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "oa-none",
		"current_filter_groups": []any{}, "new_filter_groups": []any{}}, status: 404})
	r = call(request{method: "PATCH", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "oa-queue",
		"current_filter_groups": group("other"), "new_filter_groups": group("oa.queue")}, status: 422})
	require.Contains(t, string(r.Body), `"loc":["body","current_filter_groups"]`)
	r = call(request{method: "DELETE", path: "/api/v1beta/queues/durable?queue_id=bad%20id", status: 422})
	require.Contains(t, string(r.Body), `"loc":["query","queue_id"]`)
	call(request{method: "POST", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": dest.ID}, status: 409})
	call(request{method: "POST", path: "/api/v1beta/queues/durable", body: []byte(`{"queue_id":"oa-q","filter_groups":"not a list"}`), status: 400})
	call(request{method: "POST", path: "/api/v1beta/queues/durable", token: reader, body: map[string]any{}, status: 403})
	call(request{method: "POST", path: "/api/v1beta/queues/durable", body: map[string]any{"queue_id": "bad id"}, status: 422})
	call(request{method: "DELETE", path: "/api/v1beta/queues/durable?queue_id=oa-none", token: reader, status: 403})

	// The durable stream: connected, then events; deleting its queue ends
	// it with an error frame.
	qpath := durablePath("oa-queue")
	st := c.mustStream(t, qpath, nil)
	got := frames(t, st, "connected")
	call(request{method: "POST", path: "/api/v1beta/events", body: map[string]any{"event": event("oa.queue", 7)}, status: 200})
	got = append(got, frames(t, st, "event")...)
	call(request{method: "DELETE", path: "/api/v1beta/queues/durable?queue_id=oa-queue", status: 200})
	got = append(got, frames(t, st, "error")...)
	s.checkStream(t, c.base, qpath, nil, st, got)
	call(request{method: "DELETE", path: "/api/v1beta/queues/durable?queue_id=oa-queue", status: 404})
	for status, path := range map[int]string{404: durablePath("oa-queue"), 422: durablePath("bad id")} {
		st, res := c.openStream(t, path, nil)
		require.Nil(t, st)
		require.Equal(t, status, res.Status, "%s", res.Body)
		call(request{method: "GET", path: path, status: status})
	}

	// The non-durable stream: fresh, then shared by its token in
	// Last-Event-ID, in the deprecated parameter, and with the token in
	// access_token instead of the header.
	spath := streamPath("filter_groups", `[{"event_type":"oa.stream","filters":[]}]`)
	st = c.mustStream(t, spath, nil)
	first := frames(t, st, "connected")
	token := first[len(first)-1].ID
	call(request{method: "POST", path: "/api/v1beta/events", body: map[string]any{"event": event("oa.stream", 8)}, status: 200})
	s.checkStream(t, c.base, spath, nil, st, append(first, frames(t, st, "event")...))
	for _, v := range []struct {
		path    string
		headers map[string]string
		cl      *client
	}{
		{spath, map[string]string{"Last-Event-ID": token}, c},
		{streamPath("reconnect_token", token), nil, c},
		{streamPath("access_token", c.token, "filter_groups", `[{"event_type":"oa.stream","filters":[]}]`), nil, &client{base: c.base, hc: c.hc}},
	} {
		st := v.cl.mustStream(t, v.path, v.headers)
		s.checkStream(t, c.base, v.path, v.headers, st, frames(t, st, "connected"))
		st.close()
	}
	st.close()
	call(request{method: "GET", path: streamPath("filter_groups", "not-json"), status: 400})
	call(request{method: "GET", path: streamPath("reconnect_token", "nd-no-such-queue"), status: 404})
	call(request{method: "GET", path: streamPath("filter_groups", `[{"event_type":"a b","filters":[]}]`), status: 422})
	call(request{method: "GET", path: "/api/v1beta/events/stream", token: none, status: 401})
	call(request{method: "GET", path: "/api/v1beta/events/stream", token: reader, status: 403})

	// The WebSocket upgrade and its refusals before the upgrade.
	s.upgrade(t, c.base, c.token, nil, http.StatusSwitchingProtocols)
	s.upgrade(t, c.base, "", nil, http.StatusUnauthorized)
	s.upgrade(t, c.base, c.token, http.Header{"Origin": {"https://elsewhere.example"}}, http.StatusForbidden)
	call(request{method: "GET", path: "/api/v1beta/events/websocket", status: 426, invalid: true})
	call(request{method: "GET", path: "/api/v1beta/events/websocket", header: http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"},
		"Sec-Websocket-Key": {websocketKey(t)}, "Sec-Websocket-Version": {"8"}}, status: 400})

	// Dead letters: the rejected lease's event is one; list, replay,
	// discard, and the errors.
	var page struct {
		DeadLetters []struct{ ID string } `json:"dead_letters"`
	}
	call(request{method: "GET", path: "/api/v1beta/dead-letters?limit=10", status: 200}).decode(t, &page)
	require.Len(t, page.DeadLetters, 1)
	r = call(request{method: "POST", path: "/api/v1beta/dead-letters/actions", body: map[string]any{"actions": []any{
		map[string]any{"id": page.DeadLetters[0].ID, "action": "REPLAY"},
		map[string]any{"id": "no-such-dead-letter", "action": "DISCARD"},
		map[string]any{"id": "no-such-dead-letter", "action": "LEAVE"},
	}}, status: 200})
	require.Contains(t, string(r.Body), `"outcome":"REPLAYED"`)
	call(request{method: "GET", path: "/api/v1beta/dead-letters?limit=x", status: 400})
	call(request{method: "GET", path: "/api/v1beta/dead-letters?limit=101", status: 422})
	call(request{method: "POST", path: "/api/v1beta/dead-letters/actions", body: map[string]any{"actions": []any{}}, status: 422})
	call(request{method: "GET", path: "/api/v1beta/dead-letters", token: reader, status: 403})

	// Jobs.
	call(request{method: "POST", path: "/v1/jobs/lease-expiry", status: 200})
	call(request{method: "POST", path: "/v1/jobs/reap-idle-queues", status: 200})
	call(request{method: "POST", path: "/v1/jobs/no-such-job", status: 404, invalid: true})
	call(request{method: "POST", path: "/v1/jobs/lease-expiry", token: reader, status: 403})

	// Delete what is left.
	call(request{method: "DELETE", path: destPath, status: 204})
	call(request{method: "DELETE", path: "/v1/event-destinations/" + window.ID, status: 204})

	// Overload: while one publish holds the only publish slot, the next
	// is shed with 503 and Retry-After. The held publish sends the start
	// of its body and waits; a probe that comes in while the server
	// handles it is shed, which shows that it holds the slot. (A probe
	// the server is still handling when the held publish arrives sheds
	// that one instead: it is sent again.)
	hold := func() (*io.PipeWriter, <-chan string) {
		body, w := io.Pipe()
		done := make(chan string, 1)
		go func() {
			req, _ := http.NewRequest("POST", c.base+"/api/v1beta/events", body)
			req.Header.Set("Authorization", "Bearer "+c.token)
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			res, err := tr.RoundTrip(req)
			if err != nil {
				done <- err.Error()
				return
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			done <- fmt.Sprintf("%d %s", res.StatusCode, b)
		}()
		_, _ = w.Write([]byte(`{"event":`)) // fails only when the publish ended already
		return w, done
	}
	held, heldDone := hold()
	for deadline, shed := time.Now().Add(frameWait), false; !shed; {
		require.True(t, time.Now().Before(deadline), "no probe was shed")
		select {
		case outcome := <-heldDone:
			require.True(t, strings.HasPrefix(outcome, "503 "), "the held publish ended: %s", outcome)
			_ = held.Close()
			held, heldDone = hold()
			continue
		default:
		}
		req, err := http.NewRequest("POST", c.base+"/api/v1beta/events", strings.NewReader(`{"event":{"event_type":"oa.shed"}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+c.token)
		res, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		shed = res.StatusCode == http.StatusServiceUnavailable
	}
	r = call(request{method: "POST", path: "/api/v1beta/events", body: map[string]any{"event": event("oa.shed", 9)}, status: 503})
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	require.NoError(t, held.CloseWithError(errors.New("the test is done with it")))
	<-heldDone

	s.requireCovered(t, 400, 401, 403, 404, 409, 422, 429, 503)
}

// TestOpenAPILiveReadiness validates the readiness answer of a process
// whose broker does not answer (503, naming it), which the in-memory
// backends of TestOpenAPILive never give.
func TestOpenAPILiveReadiness(t *testing.T) {
	t.Parallel()
	down := health.NewChecker([]health.Dependency{
		{Name: "broker", Check: func(context.Context) error { return errors.New("connection refused") }},
		{Name: "store", Check: func(context.Context) error { return nil }},
	}, health.Options{})
	srv := httptest.NewServer(router.Build(inmem.New(t, inmem.Options{}).Service, auth.DevToken("tok"), config.All, router.Options{Ready: down}))
	t.Cleanup(srv.Close)
	s := newLiveSpec(t, srv.URL)
	r := s.do(t, srv.URL, request{method: "GET", path: "/health/ready", status: http.StatusServiceUnavailable})
	require.JSONEq(t, `{"status":"unavailable","failed":["broker"],"checks":{"broker":"unavailable","store":"ok"}}`, string(r.Body))
	require.Equal(t, "1", r.Header.Get("Retry-After"))
}

// TestOpenAPILiveCatchesBreaks: the harness above fails on the breaks it
// exists to catch — a status the document does not list, a member it does
// not define, a required member or header missing, an error of the wrong
// shape for its API, a frame it does not define, a request out of the
// document's limits — so its passes mean something.
func TestOpenAPILiveCatchesBreaks(t *testing.T) {
	t.Parallel()
	s := newLiveSpec(t, "http://127.0.0.1:1")
	check := func(method, path string, status int, header http.Header, body string) error {
		req, err := http.NewRequest(method, "http://127.0.0.1:1"+path, nil)
		require.NoError(t, err)
		route, params := s.route(t, req)
		if header == nil {
			header = http.Header{}
		}
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "application/json")
		}
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 status, Header: header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		out.SetBodyBytes([]byte(body))
		return openapi3filter.ValidateResponse(context.Background(), out)
	}
	noStore := http.Header{"Cache-Control": {"no-store"}}
	ack := `{"status":"committed","committed":"001.00000000000000000001"}`
	require.NoError(t, check("POST", "/v1/event-destinations/x/acknowledge", 200, noStore, ack))
	require.Error(t, check("POST", "/v1/event-destinations/x/acknowledge", 200, noStore, `{"status":"committed","committed":"001.00000000000000000001","extra":1}`), "an undocumented member")
	require.Error(t, check("POST", "/v1/event-destinations/x/acknowledge", 200, noStore, `{"status":"done","committed":"001.00000000000000000001"}`), "an undocumented status value")
	require.Error(t, check("POST", "/v1/event-destinations/x/acknowledge", 200, noStore, `{"status":"committed","committed":"3"}`), "the sequence pattern")
	require.Error(t, check("POST", "/v1/event-destinations/x/acknowledge", 200, nil, ack), "Cache-Control: no-store is required")
	require.Error(t, check("POST", "/v1/event-destinations/x/acknowledge", 201, noStore, ack), "201 is not listed")
	require.Error(t, check("POST", "/v1/event-destinations", 201, noStore, `{}`), "Location and the destination's members are required")
	require.Error(t, check("POST", "/v1/event-destinations/x/pull", 429, nil, `{"code":"resource_exhausted","message":"m","detail":"m","in_flight":1000,"committed":"001.00000000000000000000","dispatched":"001.00000000000000001000"}`), "Retry-After is required")
	require.NoError(t, check("POST", "/v1/event-destinations/x/pull", 429, http.Header{"Retry-After": {"60"}}, `{"code":"resource_exhausted","message":"m","detail":"m","in_flight":1000,"committed":"001.00000000000000000000","dispatched":"001.00000000000000001000"}`))
	require.Error(t, check("GET", "/v1/event-destinations", 401, http.Header{"Www-Authenticate": {`Bearer realm="herald"`}}, `{"code":"nope","message":"m","detail":"m"}`), "an unknown error code")
	require.Error(t, check("POST", "/v1/event-destinations", 422, nil, `{"code":"invalid_argument","message":"m","detail":[{"loc":["body"],"msg":"m","type":"value_error"}]}`), "a 422 outside /api/ has a string detail")
	require.Error(t, check("POST", "/api/v1beta/queues/durable", 422, nil, `{"code":"invalid_argument","message":"m","detail":"m"}`), "a 422 under /api/ has a list")
	require.Error(t, check("GET", "/health", 200, nil, `{"status":"healthy","version":"v1"}`), "status is ok")

	// Requests: what a client generated from the document may not send.
	checkReq := func(method, path string, header http.Header, body string) error {
		req, err := http.NewRequest(method, "http://127.0.0.1:1"+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header = header
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		route, params := s.route(t, req)
		return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		})
	}
	require.NoError(t, checkReq("GET", streamPath("filter_groups", `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"/r"}]}]`), http.Header{}, ""))
	require.Error(t, checkReq("GET", streamPath("filter_groups", `[{"event_type":"a b","filters":[]}]`), http.Header{}, ""), "filter_groups is JSON of FilterGroups")
	require.Error(t, checkReq("GET", streamPath(), http.Header{"Last-Event-Id": {"a token"}}, ""), "a reconnect token is printable ASCII")
	require.Error(t, checkReq("GET", durablePath("bad id"), http.Header{}, ""), "the queue_id pattern")
	require.Error(t, checkReq("POST", "/v1/event-destinations/x/pull?limit=101", http.Header{}, ""), "limit is 1-100")
	require.Error(t, checkReq("POST", "/v1/event-destinations/x/acknowledge", http.Header{}, `{"leaseId":"l","generation":0,"status":"ok","delay":1}`), "an unknown member")
	require.NoError(t, checkReq("POST", "/api/v1beta/events", http.Header{}, `{"event":{"event_type":"a","kind":"k"},"request_id":"r"}`), "the publish bodies take unknown members")
	require.Error(t, checkReq("POST", "/api/v1beta/events/batch", http.Header{}, `{"events":[]}`), "1-1,000 events")

	sseHeader := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-store"}, "X-Accel-Buffering": {"no"}}
	connected := "event: connected\nid: q\ndata: {\"message\":\"Connection established\",\"reconnect_token\":\"q\"}\n\n"
	require.NoError(t, check("GET", durablePath("q"), 200, sseHeader, connected+": keep-alive\n\n"))
	require.Error(t, check("GET", durablePath("q"), 200, sseHeader, "event: connected\ndata: {}\n\n"), "connected carries an id")
	require.Error(t, check("GET", durablePath("q"), 200, sseHeader, connected+"event: hello\ndata: {}\n\n"), "an undocumented frame")
}

// TestOpenAPIStrictHarnessKeepsOpenSchemasOpen: closeObjects leaves open
// what the document leaves open on purpose: the publish bodies (extra
// members ignored), a message (any object), the readiness checks (a
// map).
func TestOpenAPIStrictHarnessKeepsOpenSchemasOpen(t *testing.T) {
	t.Parallel()
	s := newLiveSpec(t, "http://127.0.0.1:1")
	schemas := s.doc.Components.Schemas
	ok := func(name, v string) error {
		var x any
		require.NoError(t, json.Unmarshal([]byte(v), &x))
		return schemas[name].Value.VisitJSON(x, openapi3.EnableJSONSchema2020())
	}
	require.NoError(t, ok("PublishEventRequest", `{"event":{"event_type":"a","id":"x","resource":{"resource_id":"r","kind":"k"}},"request_id":"r"}`))
	require.NoError(t, ok("Message", `{"anything":{"nested":[1,2]}}`))
	require.NoError(t, ok("Readiness", `{"status":"ok","checks":{"broker":"ok"}}`))
	require.Error(t, ok("Readiness", `{"status":"ok","checks":{"kafka":"ok"}}`))
	require.Error(t, ok("Event", `{"event_type":"a","message":{},"occurred_at":"2024-10-16T14:30:00Z","id":"x"}`), "an echo has no id")
	require.Error(t, ok("CreateDestinationRequest", `{"type":"DURABLE_CONSUMER","ack_timeout":5}`))
	require.True(t, slices.Contains(schemas["ErrorCode"].Value.Enum, any("unavailable")))
}
