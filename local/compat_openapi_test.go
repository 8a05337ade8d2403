package local_test

// This file validates Herald's answers on the notifications API against
// the contract of NVIDIA's published OpenAPI documents (ovstorage,
// ovstorage-services/apis/notifications-api, commit 766a1c55), with
// github.com/getkin/kin-openapi. The published documents are proprietary,
// so they are not copied here: notificationsContract restates, in Herald's
// own words, only the fragments a generated client depends on (paths,
// statuses, parameters and the schemas of bodies, with their limits).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"
)

// notificationsContract is the part of the published publisher and
// consumer OpenAPI documents that Herald's notifications API answers.
// Limits are the published ones; the ids and tokens Herald issues are
// shorter (see docs/compatibility.md).
const notificationsContract = `
openapi: 3.0.3
info:
  title: Notifications API contract fragments (publisher and consumer)
  version: v1beta
paths:
  /api/v1beta/events:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/PublishEventRequest'}
      responses:
        '200':
          description: published, or success false with a reason
          content:
            application/json:
              schema: {$ref: '#/components/schemas/PublishEventResponse'}
        '400': {description: not JSON of the documented shape}
        '401': {description: no or a bad token}
        '403': {description: not allowed}
        '422': {description: a rule broken}
        '500': {description: server error}
        '503': {description: try again}
  /api/v1beta/events/batch:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/BatchPublishEventsRequest'}
      responses:
        '200':
          description: one result per event
          content:
            application/json:
              schema: {$ref: '#/components/schemas/BatchPublishEventsResponse'}
        '400': {description: no events}
        '401': {description: no or a bad token}
        '403': {description: not allowed}
        '422': {description: a rule broken}
        '429': {description: rate limited}
        '500': {description: server error}
        '503': {description: try again}
  /api/v1beta/health:
    get:
      responses:
        '200':
          description: serving
          content:
            application/json:
              schema: {$ref: '#/components/schemas/HealthResponse'}
  /api/v1beta/events/stream:
    get:
      parameters:
        - {name: reconnect_token, in: query, schema: {type: string, maxLength: 1024}}
        - {name: filter_groups, in: query, schema: {type: string, maxLength: 65536}}
        - {name: previous_filter_groups, in: query, schema: {type: string, maxLength: 65536}}
      responses:
        '200':
          description: Server-Sent Events
          content:
            text/event-stream:
              schema: {type: object}
        '400': {description: bad filter_groups}
        '401': {$ref: '#/components/responses/Error'}
        '403': {$ref: '#/components/responses/Error'}
        '422': {$ref: '#/components/responses/Validation'}
        '429': {$ref: '#/components/responses/Error'}
        '500': {$ref: '#/components/responses/Error'}
        '503': {description: try again}
  /api/v1beta/events/stream-durable:
    get:
      parameters:
        - {name: queue_id, in: query, required: true, schema: {type: string, maxLength: 256}}
      responses:
        '200':
          description: Server-Sent Events
          content:
            text/event-stream:
              schema: {type: object}
        '400': {description: bad queue_id}
        '401': {$ref: '#/components/responses/Error'}
        '403': {$ref: '#/components/responses/Error'}
        '404': {description: no such queue}
        '422': {$ref: '#/components/responses/Validation'}
        '429': {$ref: '#/components/responses/Error'}
        '500': {$ref: '#/components/responses/Error'}
        '503': {description: try again}
  /api/v1beta/queues/durable:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/CreateDurableQueueRequest'}
      responses:
        '200':
          description: created
          content:
            application/json:
              schema: {$ref: '#/components/schemas/CreateDurableQueueResponse'}
        '400': {description: bad request}
        '401': {$ref: '#/components/responses/Error'}
        '403': {$ref: '#/components/responses/Error'}
        '422': {$ref: '#/components/responses/Validation'}
        '429': {$ref: '#/components/responses/Error'}
        '500': {$ref: '#/components/responses/Error'}
        '503': {description: try again}
    patch:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/UpdateDurableQueueRequest'}
      responses:
        '200':
          description: updated
          content:
            application/json:
              schema: {$ref: '#/components/schemas/SuccessResponse'}
        '400': {description: bad request}
        '401': {$ref: '#/components/responses/Error'}
        '403': {$ref: '#/components/responses/Error'}
        '404': {description: no such queue}
        '422': {$ref: '#/components/responses/Validation'}
        '429': {$ref: '#/components/responses/Error'}
        '500': {$ref: '#/components/responses/Error'}
        '503': {description: try again}
    delete:
      parameters:
        - {name: queue_id, in: query, required: true, schema: {type: string, maxLength: 256}}
      responses:
        '200':
          description: deleted
          content:
            application/json:
              schema: {$ref: '#/components/schemas/SuccessResponse'}
        '400': {description: bad request}
        '401': {$ref: '#/components/responses/Error'}
        '403': {$ref: '#/components/responses/Error'}
        '404': {description: no such queue}
        '422': {$ref: '#/components/responses/Validation'}
        '429': {$ref: '#/components/responses/Error'}
        '500': {$ref: '#/components/responses/Error'}
        '503': {description: try again}
components:
  responses:
    Error:
      description: an error
      content:
        application/json:
          schema: {$ref: '#/components/schemas/ErrorResponse'}
    Validation:
      description: a validation error
      content:
        application/json:
          schema: {$ref: '#/components/schemas/HTTPValidationError'}
  schemas:
    Event:
      type: object
      required: [event_type, message, occurred_at]
      properties:
        event_type: {type: string, maxLength: 256, pattern: '^[a-zA-Z0-9._-]+$'}
        message: {type: object, additionalProperties: true}
        occurred_at:
          type: string
          maxLength: 64
          pattern: '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$'
        resource:
          nullable: true
          allOf: [{$ref: '#/components/schemas/EventResource'}]
    EventResource:
      type: object
      required: [resource_id]
      properties:
        resource_id: {type: string, maxLength: 2048}
    PublishEventRequest:
      type: object
      required: [event]
      properties:
        event: {$ref: '#/components/schemas/Event'}
    PublishEventResponse:
      type: object
      required: [result]
      properties:
        result: {$ref: '#/components/schemas/PublishingResult'}
    BatchPublishEventsRequest:
      type: object
      required: [events]
      properties:
        events:
          type: array
          maxItems: 1000
          items: {$ref: '#/components/schemas/Event'}
    BatchPublishEventsResponse:
      type: object
      required: [results]
      properties:
        results:
          type: array
          maxItems: 1000
          items: {$ref: '#/components/schemas/PublishingResult'}
    PublishingResult:
      type: object
      required: [event, success]
      properties:
        event: {$ref: '#/components/schemas/Event'}
        success: {type: boolean}
        failure_reason: {type: string, maxLength: 1024, nullable: true}
    HealthResponse:
      type: object
      properties:
        status: {type: string, maxLength: 10}
    ErrorResponse:
      type: object
      required: [detail]
      properties:
        detail: {type: string, maxLength: 1024}
    ValidationError:
      type: object
      required: [loc, msg, type]
      properties:
        loc:
          type: array
          maxItems: 100
          items:
            anyOf:
              - {type: string, maxLength: 256}
              - {type: integer, format: int32, minimum: 0}
        msg: {type: string, maxLength: 1024}
        type: {type: string, maxLength: 256}
    HTTPValidationError:
      type: object
      properties:
        detail:
          type: array
          maxItems: 100
          items: {$ref: '#/components/schemas/ValidationError'}
    FilterType:
      type: string
      enum: [unspecified, eq, starts_with_lazy, starts_with_greedy]
    ResourceFilter:
      type: object
      required: [filter_type, resource_id]
      properties:
        filter_type: {$ref: '#/components/schemas/FilterType'}
        resource_id: {type: string, maxLength: 4096}
    FilterGroup:
      type: object
      required: [event_type, filters]
      properties:
        event_type: {type: string, minLength: 1, maxLength: 1024}
        filters:
          type: array
          maxItems: 100
          items: {$ref: '#/components/schemas/ResourceFilter'}
    CreateDurableQueueRequest:
      type: object
      properties:
        filter_groups:
          type: array
          maxItems: 100
          items: {$ref: '#/components/schemas/FilterGroup'}
    CreateDurableQueueResponse:
      type: object
      required: [queue_id]
      properties:
        queue_id: {type: string, maxLength: 256}
    UpdateDurableQueueRequest:
      type: object
      required: [queue_id, current_filter_groups, new_filter_groups]
      properties:
        queue_id: {type: string, maxLength: 256}
        current_filter_groups:
          type: array
          maxItems: 100
          items: {$ref: '#/components/schemas/FilterGroup'}
        new_filter_groups:
          type: array
          maxItems: 100
          items: {$ref: '#/components/schemas/FilterGroup'}
    SuccessResponse:
      type: object
      properties:
        success: {type: boolean}
    EventData:
      type: object
      required: [event_type, occurred_at, published_at, message]
      properties:
        event_type: {type: string, maxLength: 1024}
        principal_identity: {type: string, maxLength: 1024}
        occurred_at: {type: string, format: date-time, maxLength: 64}
        published_at: {type: string, format: date-time, maxLength: 64}
        message: {type: object, additionalProperties: true}
`

// contract checks requests and answers against notificationsContract.
type contract struct {
	c      *client
	doc    *openapi3.T
	router routers.Router
}

func newContract(t *testing.T, c *client) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(notificationsContract))
	require.NoError(t, err)
	doc.Servers = openapi3.Servers{{URL: c.base}}
	require.NoError(t, doc.Validate(context.Background()))
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &contract{c: c, doc: doc, router: router}
}

// call sends a request a generated client could send (it is validated
// first), requires status, and validates the answer: status declared,
// body of the declared schema, and every error body of the shape a
// generated client reads (HTTPValidationError for a 422, ErrorResponse
// otherwise). token "" sends none.
func (k *contract) call(t *testing.T, method, path, token string, body any, status int) *response {
	t.Helper()
	return k.callAs(t, method, path, token, body, status, status)
}

// callAs is call for a documented difference: Herald answers status where
// the published document says declared (see docs/compatibility.md); the
// body is validated as the declared status's.
func (k *contract) callAs(t *testing.T, method, path, token string, body any, status, declared int) *response {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	req, err := http.NewRequest(method, k.c.base+path, bytes.NewReader(raw))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	route, params, err := k.router.FindRoute(req)
	require.NoError(t, err, "%s %s is not in the published contract", method, path)
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if status < 400 {
		require.NoError(t, openapi3filter.ValidateRequest(context.Background(), in), "the request is not one a generated client sends")
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}

	r, err := k.c.raw(method, path, token, raw)
	require.NoError(t, err)
	require.Equal(t, status, r.Status, "%s %s: %s", method, path, r.Body)
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 declared,
		Header:                 r.Header,
		Body:                   io.NopCloser(bytes.NewReader(r.Body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out), "%s %s answered %d %s", method, path, r.Status, r.Body)
	if status >= 400 {
		k.requireErrorShape(t, r)
	}
	return r
}

// requireErrorShape holds an error body to the published shapes.
func (k *contract) requireErrorShape(t *testing.T, r *response) {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(r.Body, &v), "%s", r.Body)
	name := "ErrorResponse"
	if r.Status == http.StatusUnprocessableEntity {
		name = "HTTPValidationError"
		var b struct{ Detail []json.RawMessage }
		require.NoError(t, json.Unmarshal(r.Body, &b), "%s", r.Body)
		require.NotEmpty(t, b.Detail, "a 422 names what is wrong: %s", r.Body)
	}
	require.NoError(t, k.doc.Components.Schemas[name].Value.VisitJSON(v), "%d body %s is not a %s", r.Status, r.Body, name)
}

// requireEventData holds an SSE event frame's data to the published
// EventData schema.
func (k *contract) requireEventData(t *testing.T, data string) {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(data), &v), data)
	require.NoError(t, k.doc.Components.Schemas["EventData"].Value.VisitJSON(v), "event frame %s", data)
}

// documented requires docs/compatibility.md to list a difference.
func documented(t *testing.T, text string) {
	t.Helper()
	b, err := os.ReadFile("../docs/compatibility.md")
	require.NoError(t, err)
	require.Contains(t, string(b), text, "the difference is listed in docs/compatibility.md")
}

// TestNotificationsOpenAPIPublish validates the publisher API's answers.
func TestNotificationsOpenAPIPublish(t *testing.T) {
	t.Parallel()
	c := start(t)
	k := newContract(t, c)

	k.call(t, "GET", "/api/v1beta/health", "", nil, http.StatusOK)

	full := map[string]any{"event_type": "storage.file.created", "message": map[string]any{"filename": "doc1.pdf"},
		"occurred_at": "2024-10-23T12:34:56Z", "resource": map[string]any{"resource_id": "/folder/doc1.pdf"}}
	r := k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": full}, http.StatusOK)
	require.Contains(t, string(r.Body), `"success":true`)

	// Any allowed character first, and the longest type.
	for _, et := range []string{".dotted", "-dashed", strings.Repeat("t", 256)} {
		e := map[string]any{"event_type": et, "message": map[string]any{}, "occurred_at": "2024-10-23T12:34:56.5+02:00"}
		k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": e}, http.StatusOK)
	}

	// The published batch limit.
	events := make([]any, 1000)
	for i := range events {
		events[i] = map[string]any{"event_type": "storage.file.created", "message": map[string]any{"n": i},
			"occurred_at": "2024-10-23T12:34:57Z", "resource": map[string]any{"resource_id": fmt.Sprintf("/folder/doc%d.pdf", i)}}
	}
	r = k.call(t, "POST", "/api/v1beta/events/batch", c.token, map[string]any{"events": events}, http.StatusOK)
	var batch struct{ Results []struct{ Success bool } }
	r.decode(t, &batch)
	require.Len(t, batch.Results, 1000)
	for i, res := range batch.Results {
		require.True(t, res.Success, "event %d", i)
	}

	// Errors a generated client reads: 401 (ErrorResponse) and 422
	// (HTTPValidationError naming the field).
	k.call(t, "POST", "/api/v1beta/events", "", map[string]any{"event": full}, http.StatusUnauthorized)
	bad := map[string]any{"event_type": "no spaces", "message": map[string]any{}, "occurred_at": "2024-10-23T12:34:56Z"}
	r = k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": bad}, http.StatusUnprocessableEntity)
	require.Contains(t, string(r.Body), `"loc":["body","event","event_type"]`)
	r = k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": map[string]any{"event_type": strings.Repeat("t", 257)}}, http.StatusUnprocessableEntity)
	require.Contains(t, string(r.Body), `"loc":["body","event","event_type"]`)
	r = k.call(t, "POST", "/api/v1beta/events/batch", c.token, map[string]any{"events": append(events, events[0])}, http.StatusUnprocessableEntity)
	require.Contains(t, string(r.Body), `"loc":["body","events"]`)
}

// requireAnswer holds an answer Herald gave (to a request sent by other
// means) to the contract's schema for method path and its status.
func (k *contract) requireAnswer(t *testing.T, method, path string, r *response) {
	t.Helper()
	req, err := http.NewRequest(method, k.c.base+path, nil)
	require.NoError(t, err)
	route, params, err := k.router.FindRoute(req)
	require.NoError(t, err)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.Status,
		Header:                 r.Header,
		Body:                   io.NopCloser(bytes.NewReader(r.Body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}), "%s %s answered %d %s", method, path, r.Status, r.Body)
}

// TestNotificationsOpenAPIExtraMembers: the published schemas allow
// additional properties, so a publish body with members Herald does not
// read — output-only ones the schemas define elsewhere (published_at,
// principal_identity, id) and ones no schema defines (a top-level
// request_id, resource.kind) — is one a generated client may send, and
// is published; nothing of those members is echoed or delivered.
func TestNotificationsOpenAPIExtraMembers(t *testing.T) {
	t.Parallel()
	c := start(t)
	k := newContract(t, c)
	s := c.mustStream(t, streamPath("filter_groups", `[{"event_type":"storage.file.created","filters":[]}]`), nil)
	s.connected(t)
	event := func(i int) map[string]any {
		return map[string]any{"event_type": "storage.file.created", "message": map[string]any{"n": i}, "occurred_at": "2024-10-23T12:34:56Z",
			"published_at": "2024-10-23T12:34:57Z", "principal_identity": "someone-else", "id": "client-id",
			"resource": map[string]any{"resource_id": "/folder/doc.pdf", "kind": "file"}}
	}
	r := k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": event(1), "request_id": "r-1"}, http.StatusOK)
	require.Contains(t, string(r.Body), `"success":true`)
	r = k.call(t, "POST", "/api/v1beta/events/batch", c.token, map[string]any{"events": []any{event(2), event(3)}, "request_id": "r-2"}, http.StatusOK)
	require.Equal(t, 2, strings.Count(string(r.Body), `"success":true`), "%s", r.Body)
	for _, member := range []string{"published_at", "principal_identity", "client-id", "kind", "request_id"} {
		require.NotContains(t, string(r.Body), member, "an ignored member is not echoed")
	}
	for n := 1; n <= 3; {
		f := s.next(t)
		if f.Event != "event" {
			continue
		}
		k.requireEventData(t, f.Data)
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(f.Data), &d))
		require.Equal(t, map[string]any{"n": float64(n)}, d["message"])
		require.NotEqual(t, "someone-else", d["principal_identity"], "the publisher's own identity is delivered, not the one sent")
		require.NotEqual(t, "2024-10-23T12:34:57Z", d["published_at"], "Herald stamps published_at")
		require.NotContains(t, f.Data, "client-id")
		require.NotContains(t, f.Data, "kind")
		n++
	}
}

// TestNotificationsOpenAPIFailedResults: the results of events that fail
// in a batch stay valid published PublishingResults, whatever was sent —
// a bad event_type, no occurred_at, a message that is not an object, an
// event that is not an object, a resource_id with a control character,
// an unparsable occurred_at, a message over the limit, a type the caller
// may not publish — so a client that validates the answer keeps the
// results of the events that were published.
func TestNotificationsOpenAPIFailedResults(t *testing.T) {
	t.Parallel()
	c := start(t)
	k := newContract(t, c)
	events := []string{
		`{"event_type":"storage.file.created","message":{"n":1},"occurred_at":"2024-10-23T12:34:56Z"}`,
		`{"event_type":"bad type!","message":{}}`,
		`{"event_type":"` + strings.Repeat("t", 300) + `"}`,
		`{"message":{}}`,
		`{"event_type":"storage.file.created","message":7,"occurred_at":"2024-10-23T12:34:56Z"}`,
		`42`,
		`{"event_type":"storage.file.created","resource":{"resource_id":"/a\u0007b"}}`,
		`{"event_type":"storage.file.created","occurred_at":"2024-99-99T99:99:99Z"}`,
		`{"event_type":"storage.file.created","message":{"s":"` + strings.Repeat("x", 300<<10) + `"}}`,
		`{"event_type":"storage.file.created","message":{"n":1e400}}`,
		`{"event_type":"storage.file.created","message":{"n":2},"occurred_at":"2024-10-23T12:34:56Z"}`,
	}
	r, err := c.raw("POST", "/api/v1beta/events/batch", c.token, []byte(`{"events":[`+strings.Join(events, ",")+`]}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%.300s", r.Body)
	k.requireAnswer(t, "POST", "/api/v1beta/events/batch", r)
	var answer struct {
		Results []struct {
			Success       bool
			FailureReason string `json:"failure_reason"`
			Event         struct {
				EventType string `json:"event_type"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(r.Body, &answer))
	require.Len(t, answer.Results, len(events))
	for i, res := range answer.Results {
		require.Equal(t, i == 0 || i == len(events)-1, res.Success, "event %d: %s", i, res.FailureReason)
	}
	require.Contains(t, answer.Results[1].FailureReason, `(event_type sent: "bad type!")`, "an event_type not echoed is quoted in the reason")
	require.Equal(t, "-", answer.Results[1].Event.EventType)
	documented(t, "a failed event in a batch")
}

// TestNotificationsOpenAPIQueues validates the consumer API's answers:
// durable queues, both streams, health, and their errors.
func TestNotificationsOpenAPIQueues(t *testing.T) {
	t.Parallel()
	c := start(t)
	k := newContract(t, c)
	groups := []any{map[string]any{"event_type": "storage.file.created",
		"filters": []any{map[string]any{"filter_type": "starts_with_greedy", "resource_id": "folder_1"}}}}

	// The published request (no queue_id): 200 with a generated id.
	r := k.call(t, "POST", "/api/v1beta/queues/durable", c.token, map[string]any{"filter_groups": groups}, http.StatusOK)
	var created struct {
		QueueID string `json:"queue_id"`
	}
	r.decode(t, &created)
	require.NotEmpty(t, created.QueueID)

	// A queue_id the caller chooses (the ensure-exists create) is 201.
	documented(t, "201 Created")
	k.callAs(t, "POST", "/api/v1beta/queues/durable", c.token, map[string]any{"queue_id": "compat-q1", "filter_groups": groups}, http.StatusCreated, http.StatusOK)
	k.call(t, "POST", "/api/v1beta/queues/durable", c.token, map[string]any{"queue_id": "compat-q1", "filter_groups": groups}, http.StatusOK)

	// A durable stream delivers events whose data is EventData; the
	// greedy filter passes folder_1 and what is under it, not folder_10.
	s := c.mustStream(t, durablePath(created.QueueID), nil)
	for _, id := range []string{"folder_10/file.txt", "folder_1/sub/file.txt", "folder_1"} {
		e := map[string]any{"event_type": "storage.file.created", "message": map[string]any{"id": id}, "occurred_at": "2024-10-23T12:34:56Z",
			"resource": map[string]any{"resource_id": id}}
		k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": e}, http.StatusOK)
	}
	var got []string
	for len(got) < 2 {
		f := s.next(t)
		if f.Event != "event" {
			continue
		}
		k.requireEventData(t, f.Data)
		var d struct{ Message struct{ ID string } }
		require.NoError(t, json.Unmarshal([]byte(f.Data), &d))
		got = append(got, d.Message.ID)
	}
	require.ElementsMatch(t, []string{"folder_1/sub/file.txt", "folder_1"}, got)
	s.close()

	// Re-filter, then delete.
	k.call(t, "PATCH", "/api/v1beta/queues/durable", c.token, map[string]any{"queue_id": created.QueueID,
		"current_filter_groups": groups, "new_filter_groups": []any{map[string]any{"event_type": "other", "filters": []any{}}}}, http.StatusOK)
	k.call(t, "DELETE", "/api/v1beta/queues/durable?queue_id="+url.QueryEscape(created.QueueID), c.token, nil, http.StatusOK)

	// Errors.
	k.call(t, "DELETE", "/api/v1beta/queues/durable?queue_id="+url.QueryEscape(created.QueueID), c.token, nil, http.StatusNotFound)
	k.call(t, "PATCH", "/api/v1beta/queues/durable", c.token, map[string]any{"queue_id": "compat-none",
		"current_filter_groups": []any{}, "new_filter_groups": []any{}}, http.StatusNotFound)
	r = k.call(t, "DELETE", "/api/v1beta/queues/durable?queue_id=bad%20id", c.token, nil, http.StatusUnprocessableEntity)
	require.Contains(t, string(r.Body), `"loc":["query","queue_id"]`)
	k.call(t, "POST", "/api/v1beta/queues/durable", "", map[string]any{}, http.StatusUnauthorized)
	r = k.call(t, "POST", "/api/v1beta/queues/durable", c.token, map[string]any{"filter_groups": []any{map[string]any{"event_type": "a b",
		"filters": []any{}}}}, http.StatusUnprocessableEntity)
	require.Contains(t, string(r.Body), `"loc":["body","filter_groups",0,"event_type"]`)
	k.call(t, "GET", durablePath("compat-none"), c.token, nil, http.StatusNotFound)
	k.call(t, "GET", durablePath("bad id"), c.token, nil, http.StatusUnprocessableEntity)
	k.call(t, "GET", durablePath("compat-none"), "", nil, http.StatusUnauthorized)
	k.call(t, "GET", "/api/v1beta/events/stream?filter_groups=not-json", c.token, nil, http.StatusBadRequest)
	k.call(t, "GET", "/api/v1beta/events/stream", "", nil, http.StatusUnauthorized)

	// A reconnect token that names no queue is 404, which the published
	// stream does not list; its body is still an ErrorResponse.
	documented(t, "reconnect token that names no queue")
	r, err := c.raw("GET", "/api/v1beta/events/stream?reconnect_token=compat-none", c.token, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	k.requireErrorShape(t, r)

	// A non-durable stream: the connected frame, then EventData frames.
	ns := c.mustStream(t, streamPath("filter_groups", `[{"event_type":"storage.file.created","filters":[]}]`), nil)
	ns.connected(t)
	k.call(t, "POST", "/api/v1beta/events", c.token, map[string]any{"event": map[string]any{"event_type": "storage.file.created",
		"message": map[string]any{}, "occurred_at": "2024-10-23T12:34:56Z"}}, http.StatusOK)
	for {
		f := ns.next(t)
		if f.Event == "event" {
			k.requireEventData(t, f.Data)
			break
		}
	}
}

// TestNotificationsContractCatchesBreaks: the harness fails on the
// breaks this suite exists to catch, so a pass above means something.
func TestNotificationsContractCatchesBreaks(t *testing.T) {
	t.Parallel()
	k := newContract(t, &client{base: "http://127.0.0.1:1"})
	check := func(method, path string, status int, body string) error {
		req, err := http.NewRequest(method, k.c.base+path, nil)
		require.NoError(t, err)
		route, params, err := k.router.FindRoute(req)
		require.NoError(t, err)
		return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 status,
			Header:                 http.Header{"Content-Type": {"application/json"}},
			Body:                   io.NopCloser(strings.NewReader(body)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true},
		})
	}
	ok := `{"result":{"event":{"event_type":"a","message":{},"occurred_at":"2024-10-23T12:34:56Z"},"success":true}}`
	require.NoError(t, check("POST", "/api/v1beta/events", 200, ok))
	require.Error(t, check("POST", "/api/v1beta/events", 200, `{"result":{"event":{"event_type":"a","message":{}},"success":true}}`), "occurred_at is required")
	require.Error(t, check("POST", "/api/v1beta/events", 200, `{"result":{"event":{"event_type":"a b","message":{},"occurred_at":"2024-10-23T12:34:56Z"},"success":true}}`), "event_type pattern")
	require.Error(t, check("POST", "/api/v1beta/queues/durable", 201, `{"queue_id":"q"}`), "201 is not declared")
	require.Error(t, check("POST", "/api/v1beta/queues/durable", 401, `{"code":"unauthenticated","message":"x"}`), "detail is required")
	require.Error(t, check("POST", "/api/v1beta/queues/durable", 401, `{"detail":[{"loc":["body"],"msg":"x","type":"value_error"}]}`), "detail is a string on a 401")
	require.Error(t, check("POST", "/api/v1beta/queues/durable", 422, `{"detail":"x"}`), "detail is a list on a 422")
	require.Error(t, check("GET", "/api/v1beta/health", 200, `{"status":"far too long a status"}`), "status maxLength")
}
