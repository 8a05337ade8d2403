package publish_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/publish"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/internal/testkit/faultbroker"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

const (
	singlePath = "/api/v1beta/events"
	batchPath  = "/api/v1beta/events/batch"
)

// admin reads what was published, directly on the service.
var admin = &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}

// refuseBroken refuses every message whose event type starts with
// "broken.", as an unreachable broker would, and passes the others on.
func refuseBroken(_ context.Context, m *pubsubx.Message) error {
	if strings.HasPrefix(m.EventType(), "broken.") {
		return herr.New(herr.Unavailable, "connection refused")
	}
	return nil
}

// fixture is both endpoints over a fresh in-memory service whose broker
// refuses "broken.*" events, behind bearer tokens: "admin" may publish
// everything, "orders" only orders.* and broken.* events; and a durable
// consumer that receives every published event.
type fixture struct {
	t        *testing.T
	svc      *inmem.Service
	srv      http.Handler
	consumer string
}

func serve(t *testing.T) *fixture {
	t.Helper()
	svc := inmem.New(t, inmem.Options{
		Wrap:   faultbroker.Wrap(refuseBroken),
		Config: delivery.Config{Logger: slog.New(slog.DiscardHandler)}, // the broken broker's warnings
	})
	c, err := svc.CreateDestination(t.Context(), admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	h := &publish.Handler{Service: svc.Service}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+singlePath, h.Single)
	mux.HandleFunc("POST "+batchPath, h.Batch)
	srv := httpx.Authenticate(auth.StaticTokens{
		"admin":  {ID: "admin", Permissions: []string{auth.PermAll}},
		"orders": {ID: "orders", Permissions: []string{auth.PermPublishPrefix + "orders.*", auth.PermPublishPrefix + "broken.*"}},
	}, mux)
	return &fixture{t: t, svc: svc, srv: srv, consumer: c.ID}
}

func (f *fixture) do(target, token, body string) testkit.Answer {
	f.t.Helper()
	return testkit.Do(f.t, f.srv, "POST", target, token, body)
}

// received pulls and acknowledges everything the consumer has been sent
// and returns the events in order.
func (f *fixture) received() []*delivery.ConsumerEvent {
	f.t.Helper()
	ctx := f.t.Context()
	var out []*delivery.ConsumerEvent
	for {
		l, err := f.svc.Pull(ctx, admin, delivery.PullRequest{Destination: f.consumer, Worker: "w", Limit: 100, Visibility: time.Minute})
		require.NoError(f.t, err)
		if l == nil {
			return out
		}
		for _, b := range l.Events {
			ev, err := delivery.DecodeConsumerEvent(b)
			require.NoError(f.t, err)
			out = append(out, ev)
		}
		_, err = f.svc.Acknowledge(ctx, admin, leasestore.AckParams{Consumer: f.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
		require.NoError(f.t, err)
	}
}

// requireError checks an error answer: its status, code and message, and
// for a 422 the one field problem naming loc (detail repeats the message
// otherwise).
func requireError(t *testing.T, a testkit.Answer, status int, code, message string, loc ...any) {
	t.Helper()
	require.Equal(t, status, a.Code, a.Body)
	require.Equal(t, code, a.Body["code"], a.Body)
	require.Equal(t, message, a.Body["message"], a.Body)
	if status != http.StatusUnprocessableEntity {
		require.Equal(t, message, a.Body["detail"])
		return
	}
	kind := "value_error"
	if strings.HasSuffix(message, " is required") {
		kind = "missing"
	}
	require.Equal(t, []any{map[string]any{"loc": loc, "msg": message, "type": kind}}, a.Body["detail"])
}

// TestSingle: a good event is 200 with the event echoed (normalized:
// occurred_at in UTC, or the publish time when absent; message {} when
// absent or null) and success true, and reaches a consumer.
func TestSingle(t *testing.T) {
	t.Parallel()
	f := serve(t)
	before := time.Now().UTC().Add(-time.Second)
	a := f.do(singlePath, "admin", `{"event":{"event_type":"orders.created","message":{"n": 1},"occurred_at":"2024-10-16T14:30:00+02:00","resource":{"resource_id":"/orders/1"}}}`)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	require.Equal(t, map[string]any{"result": map[string]any{
		"event": map[string]any{
			"event_type": "orders.created", "message": map[string]any{"n": 1.0},
			"occurred_at": "2024-10-16T12:30:00Z", "resource": map[string]any{"resource_id": "/orders/1"},
		},
		"success": true,
	}}, a.Body)

	for _, body := range []string{
		`{"event":{"event_type":"orders.updated"}}`,
		`{"event":{"event_type":"orders.updated","message":null}}`,
	} {
		a = f.do(singlePath, "admin", body)
		require.Equal(t, http.StatusOK, a.Code, a.Body)
		res := a.Body["result"].(map[string]any)
		require.Equal(t, true, res["success"])
		ev := res["event"].(map[string]any)
		require.Equal(t, map[string]any{}, ev["message"], body)
		require.NotContains(t, ev, "resource")
		at, err := time.Parse(time.RFC3339Nano, ev["occurred_at"].(string))
		require.NoError(t, err)
		require.False(t, at.Before(before), "the publish time: %v", at)
		require.Equal(t, time.UTC, at.Location())
	}

	got := f.received()
	require.Len(t, got, 3)
	require.Equal(t, "orders.created", got[0].EventType)
	require.Equal(t, "admin", got[0].PrincipalIdentity)
	require.JSONEq(t, `{"n":1}`, string(got[0].Message))
	require.Equal(t, time.Date(2024, 10, 16, 12, 30, 0, 0, time.UTC), got[0].OccurredAt.UTC())
	require.Equal(t, "/orders/1", got[0].Resource.ResourceID)
	require.Equal(t, "orders.updated", got[1].EventType)
	require.JSONEq(t, `{}`, string(got[1].Message))
}

// TestSingleRefused: a body that is not JSON of the documented shape is
// 400; a missing event or one that breaks a rule is 422 naming the field
// under body.event; a body over the limit is 422; a type the caller may
// not publish is 403; no token is 401. None of them publishes.
func TestSingleRefused(t *testing.T) {
	t.Parallel()
	f := serve(t)
	for _, c := range []struct{ body, message string }{
		{`{"event":`, "request body is not valid JSON: it is empty or cut short"},
		{``, "request body is not valid JSON: it is empty or cut short"},
		{`not json`, "request body is not valid JSON: syntax error at byte 1"},
		{`{"event":{"event_type":"orders.a"},"priority":{"a":1,"a":2}}`, `duplicate field "a" in /priority`},
		{`{"event":{"event_type":"orders.a"},"event":{"event_type":"orders.b"}}`, `duplicate field "event"`},
		{`{"event":{"event_type":"orders.a","message":{"a":1,"a":2}}}`, `duplicate field "a" in /event/message`},
		{`{"event":[]}`, "request body is not JSON of the expected shape: /event must be a JSON object"},
		{`{"event":{"event_type":7}}`, "request body is not JSON of the expected shape: /event/event_type must be a JSON string"},
	} {
		a := f.do(singlePath, "admin", c.body)
		requireError(t, a, http.StatusBadRequest, "malformed", c.message)
	}

	typeRule := "event_type must be 1-256 characters of letters, digits, '.', '_' or '-'"
	timeRule := "occurred_at must be an RFC 3339 timestamp from 0001-01-01 to 9999-12-31, such as 2024-10-16T14:30:00Z"
	big := strings.Repeat("x", delivery.MaxMessageBytes)
	for _, c := range []struct {
		body, message string
		loc           []any
	}{
		{`{}`, "event is required", []any{"body", "event"}},
		{`{"Event":{"event_type":"orders.a"}}`, "event is required", []any{"body", "event"}},
		{`{"event":null}`, "event is required", []any{"body", "event"}},
		{`{"event":{}}`, "event_type is required", []any{"body", "event", "event_type"}},
		{`{"event":{"event_type":"orders created"}}`, typeRule, []any{"body", "event", "event_type"}},
		{`{"event":{"event_type":"orders.a","message":[1]}}`, "message must be a JSON object", []any{"body", "event", "message"}},
		{`{"event":{"event_type":"orders.a","message":{"s":"` + big + `"}}}`, fmt.Sprintf("message is %d bytes; the limit is %d bytes (256 KiB)", len(big)+8, delivery.MaxMessageBytes), []any{"body", "event", "message"}},
		{`{"event":{"event_type":"orders.a","occurred_at":"yesterday"}}`, timeRule, []any{"body", "event", "occurred_at"}},
		{`{"event":{"event_type":"orders.a","occurred_at":"2024-10-16"}}`, timeRule, []any{"body", "event", "occurred_at"}},
		{`{"event":{"event_type":"orders.a","occurred_at":"0000-12-31T00:00:00Z"}}`, timeRule, []any{"body", "event", "occurred_at"}},
		{`{"event":{"event_type":"orders.a","occurred_at":"9999-12-31T23:00:00-05:00"}}`, timeRule, []any{"body", "event", "occurred_at"}},
		{`{"event":{"event_type":"orders.a","resource":{"resource_id":"a\u0007b"}}}`, "resource.resource_id must not contain control characters (U+0000–U+001F, U+007F–U+009F)", []any{"body", "event", "resource", "resource_id"}},
	} {
		a := f.do(singlePath, "admin", c.body)
		requireError(t, a, http.StatusUnprocessableEntity, "invalid_argument", c.message, c.loc...)
	}

	// The body limit: the largest message and room around it.
	a := f.do(singlePath, "admin", `{"event":{"event_type":"orders.a","message":{"s":"`+big+strings.Repeat("x", 64<<10)+`"}}}`)
	requireError(t, a, http.StatusUnprocessableEntity, "invalid_argument", fmt.Sprintf("request body is larger than %d bytes", delivery.MaxMessageBytes+64<<10), "body")

	a = f.do(singlePath, "orders", `{"event":{"event_type":"users.created"}}`)
	requireError(t, a, http.StatusForbidden, "permission_denied", `not authorized to publish events of type "users.created"`)
	require.Contains(t, a.Challenge, `error="insufficient_scope"`)

	a = f.do(singlePath, "nobody", `{"event":{"event_type":"orders.a"}}`)
	require.Equal(t, http.StatusUnauthorized, a.Code, a.Body)
	require.Equal(t, "unauthenticated", a.Body["code"])

	require.Empty(t, f.received(), "nothing was published")

	// The limits themselves pass.
	a = f.do(singlePath, "orders", `{"event":{"event_type":"orders.a","message":{"s":"`+big[:delivery.MaxMessageBytes-8]+`"}}}`)
	require.Equal(t, http.StatusOK, a.Code, "%.200v", a.Body)
	require.Len(t, f.received(), 1)
}

// TestSingleBrokerFailure: an event the broker does not accept is a 200
// with success false and a failure_reason.
func TestSingleBrokerFailure(t *testing.T) {
	t.Parallel()
	f := serve(t)
	a := f.do(singlePath, "admin", `{"event":{"event_type":"broken.a","message":{"n":1}}}`)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	res := a.Body["result"].(map[string]any)
	require.Equal(t, false, res["success"])
	require.Equal(t, "Unable to publish to the message broker", res["failure_reason"])
	require.Equal(t, "broken.a", res["event"].(map[string]any)["event_type"])
	require.Empty(t, f.received())
}

// TestBatch: every event gets its own result, index for index; an event
// that is invalid, not of the documented shape, not valid UTF-8, repeats a
// member name, is not the caller's to publish or refused by the broker
// fails alone, with success false and a failure_reason, and the others are
// published in batch order. The answer is 200 whatever failed.
func TestBatch(t *testing.T) {
	t.Parallel()
	f := serve(t)

	// The one-pass path: every event of the documented shape.
	a := f.do(batchPath, "orders", `{"events":[{"event_type":"orders.a","message":{"n":1},"occurred_at":"2024-10-16T14:30:00Z"},{"event_type":"orders.b","resource":{"resource_id":"/o/2"}}]}`)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	results := a.Body["results"].([]any)
	require.Len(t, results, 2)
	require.Equal(t, map[string]any{
		"event":   map[string]any{"event_type": "orders.a", "message": map[string]any{"n": 1.0}, "occurred_at": "2024-10-16T14:30:00Z"},
		"success": true,
	}, results[0])
	r1 := results[1].(map[string]any)
	require.Equal(t, true, r1["success"])
	require.NotContains(t, r1, "failure_reason")
	ev := r1["event"].(map[string]any)
	require.Equal(t, map[string]any{}, ev["message"])
	require.Equal(t, map[string]any{"resource_id": "/o/2"}, ev["resource"])
	_, err := time.Parse(time.RFC3339Nano, ev["occurred_at"].(string))
	require.NoError(t, err, "the publish time fills a missing occurred_at")
	got := f.received()
	require.Len(t, got, 2)
	require.Equal(t, "orders.a", got[0].EventType)
	require.Equal(t, "orders.b", got[1].EventType)

	// Each failure alone.
	events := []string{
		`{"event_type":"orders.ok1","message":{"n":1}}`,
		`{"event_type":"orders bad"}`,
		`{"event_type":"orders.x","message":7,"occurred_at":"2024-10-16T14:30:00Z","resource":{"resource_id":"/r"}}`,
		`42`,
		`{"event_type":"orders.x","message":{"s":"` + "\xff" + `"}}`,
		`{"event_type":"users.created"}`,
		`{"event_type":"broken.a"}`,
		`{"event_type":"orders.x","occurred_at":"soon"}`,
		`{"event_type":"orders.x","event_type":"orders.y"}`,
		`{"event_type":"orders.x","message":{"k":1,"k":2}}`,
		`{"event_type":"orders.ok2","message":{"n":2}}`,
	}
	a = f.do(batchPath, "orders", `{"events":[`+strings.Join(events, ",")+`]}`)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	results = a.Body["results"].([]any)
	require.Len(t, results, len(events))
	type want struct {
		success   bool
		eventType string
		reason    string // a prefix of the failure_reason
	}
	for i, w := range []want{
		{true, "orders.ok1", ""},
		{false, "-", "event_type must be 1-256 characters of letters, digits, '.', '_' or '-' (event_type sent: \"orders bad\")"},
		{false, "orders.x", "message must be a JSON object"},
		{false, "-", "event is not a JSON object of the documented shape: request body is not JSON of the expected shape"},
		{false, "-", "event is not a JSON object of the documented shape: JSON text must be valid UTF-8"},
		{false, "users.created", `not authorized to publish events of type "users.created"`},
		{false, "broken.a", "Unable to publish to the message broker"},
		{false, "orders.x", "occurred_at must be an RFC 3339 timestamp"},
		{false, "-", `event is not a JSON object of the documented shape: duplicate field "event_type"`},
		{false, "-", `event is not a JSON object of the documented shape: duplicate field "k"`},
		{true, "orders.ok2", ""},
	} {
		r := results[i].(map[string]any)
		require.Equal(t, w.success, r["success"], "event %d: %v", i, r)
		require.Equal(t, w.eventType, r["event"].(map[string]any)["event_type"], "event %d: %v", i, r)
		if w.success {
			require.NotContains(t, r, "failure_reason", "event %d", i)
			continue
		}
		require.True(t, strings.HasPrefix(r["failure_reason"].(string), w.reason), "event %d: %v", i, r["failure_reason"])
	}
	// A failed event's result is still a valid published Event: what was
	// sent and is valid is echoed, the rest replaced.
	r2 := results[2].(map[string]any)["event"].(map[string]any)
	require.Equal(t, map[string]any{"event_type": "orders.x", "message": map[string]any{}, "occurred_at": "2024-10-16T14:30:00Z",
		"resource": map[string]any{"resource_id": "/r"}}, r2)
	for i := range results {
		ev := results[i].(map[string]any)["event"].(map[string]any)
		require.NotEmpty(t, ev["occurred_at"], "event %d", i)
		require.IsType(t, map[string]any{}, ev["message"], "event %d", i)
	}
	got = f.received()
	require.Len(t, got, 2, "only the good events were published")
	require.JSONEq(t, `{"n":1}`, string(got[0].Message))
	require.JSONEq(t, `{"n":2}`, string(got[1].Message))

	// A caller that may publish none of the events still gets a 200.
	a = f.do(batchPath, "orders", `{"events":[{"event_type":"users.a"}]}`)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	require.Equal(t, false, a.Body["results"].([]any)[0].(map[string]any)["success"])
}

// TestBatchRefused: an envelope that is not JSON of the documented shape
// is 400; an empty or missing event list, more than 1,000 events or a
// body over 5 MiB is 422 naming the field; nothing is published.
func TestBatchRefused(t *testing.T) {
	t.Parallel()
	f := serve(t)
	for _, c := range []struct{ body, message string }{
		{`{"events":[`, "request body is not valid JSON: it is empty or cut short"},
		{`{"events":{}}`, "request body is not JSON of the expected shape: /events must be a JSON array"},
		{`{"events":[{"event_type":"orders.a"}],"atomic":{"a":1,"a":2}}`, "request body is not valid JSON: a member beside events repeats a member name within one object or is not valid UTF-8 (RFC 7493)"},
	} {
		a := f.do(batchPath, "admin", c.body)
		requireError(t, a, http.StatusBadRequest, "malformed", c.message)
	}
	for _, c := range []struct {
		body, message string
		loc           []any
	}{
		{`{"events":[]}`, "events must hold at least one event", []any{"body", "events"}},
		{`{}`, "events must hold at least one event", []any{"body", "events"}},
		{`{"event":{"event_type":"orders.a"}}`, "events must hold at least one event", []any{"body", "events"}},
		{`{"events":null}`, "events must hold at least one event", []any{"body", "events"}},
		{`{"events":[` + strings.Repeat(`{"event_type":"orders.a"},`, 1000) + `{"event_type":"orders.a"}]}`, "events holds 1001 events; a batch holds at most 1000", []any{"body", "events"}},
		{`{"events":[` + strings.Repeat(`7,`, 1000) + `7]}`, "events holds 1001 events; a batch holds at most 1000", []any{"body", "events"}},
		{`{"events":[{"event_type":"orders.a","message":{"s":"` + strings.Repeat("x", publish.MaxBatchBody) + `"}}]}`, fmt.Sprintf("request body is larger than %d bytes", publish.MaxBatchBody), []any{"body"}},
	} {
		a := f.do(batchPath, "admin", c.body)
		requireError(t, a, http.StatusUnprocessableEntity, "invalid_argument", c.message, c.loc...)
	}
	a := f.do(batchPath, "nobody", `{"events":[{"event_type":"orders.a"}]}`)
	require.Equal(t, http.StatusUnauthorized, a.Code, a.Body)
	require.Empty(t, f.received(), "nothing was published")

	// 1,000 events are a batch.
	a = f.do(batchPath, "admin", `{"events":[`+strings.Repeat(`{"event_type":"orders.a"},`, 999)+`{"event_type":"orders.a"}]}`)
	require.Equal(t, http.StatusOK, a.Code, "%.200v", a.Body)
	require.Len(t, a.Body["results"], 1000)
	require.Len(t, f.received(), 1000)
}
