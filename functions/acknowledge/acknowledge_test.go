package acknowledge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
)

// TestAppendResponseMatchesMarshal: the hand-written answer is what
// json.Marshal writes for every outcome.
func TestAppendResponseMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, o := range []leasestore.Outcome{leasestore.OutcomeCommitted, leasestore.OutcomeRequeued, leasestore.OutcomeStale} {
		for _, pos := range []int64{0, 1, 42, 1<<62 + 7} {
			want, err := json.Marshal(Response{Status: o, Committed: cloudevent.FormatSequence(pos)})
			require.NoError(t, err)
			require.Equal(t, string(want), string(appendResponse(nil, o, pos)))
		}
	}
}

// admin makes destinations and pulls, directly on the service.
var admin = &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}

// fixture is both endpoints over a fresh in-memory service on a clock the
// test moves, behind bearer tokens: "worker" may read events, "publisher"
// may not; and a durable consumer holding three events.
type fixture struct {
	t        *testing.T
	svc      *inmem.Service
	clock    *testkit.Clock
	srv      http.Handler
	consumer string
}

func serve(t *testing.T) *fixture {
	t.Helper()
	clock := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	svc := inmem.New(t, inmem.Options{Config: delivery.Config{Now: clock.Now}})
	ctx := t.Context()
	c, err := svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	for i := range 3 {
		_, err := svc.Publish(ctx, admin, delivery.Event{EventType: "orders.created", Message: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		require.NoError(t, err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/event-destinations/{id}/acknowledge", &Handler{Service: svc.Service})
	mux.Handle("POST /v1/event-destinations/{id}/extend", &Extend{Service: svc.Service})
	srv := httpx.Authenticate(auth.StaticTokens{
		"worker":    {ID: "worker", Permissions: []string{auth.PermReadEvents, auth.PermReceivePrefix + "*"}},
		"publisher": {ID: "publisher", Permissions: []string{auth.PermPublishPrefix + "*"}},
	}, mux)
	return &fixture{t: t, svc: svc, clock: clock, srv: srv, consumer: c.ID}
}

// do posts body to the endpoint ("acknowledge" or "extend") of
// destination id.
func (f *fixture) do(id, endpoint, token, body string) testkit.Answer {
	f.t.Helper()
	return testkit.Do(f.t, f.srv, "POST", "/v1/event-destinations/"+id+"/"+endpoint, token, body)
}

// ack acknowledges lease l of the fixture's consumer with status (and
// extra members, each `"name":value`) and requires a 200.
func (f *fixture) ack(l *leasestore.Lease, status string, extra ...string) map[string]any {
	f.t.Helper()
	a := f.do(f.consumer, "acknowledge", "worker", ackBody(l.ID, l.Generation, status, extra...))
	require.Equal(f.t, http.StatusOK, a.Code, a.Body)
	return a.Body
}

func ackBody(leaseID string, generation int64, status string, extra ...string) string {
	return fmt.Sprintf(`{"leaseId":%q,"generation":%d,"status":%q%s}`, leaseID, generation, status, strings.Join(append([]string{""}, extra...), ","))
}

// pull leases up to limit events to worker; nil when none is ready.
func (f *fixture) pull(worker string, limit int) *leasestore.Lease {
	f.t.Helper()
	l, err := f.svc.Pull(f.t.Context(), admin, delivery.PullRequest{Destination: f.consumer, Worker: worker, Limit: limit, Visibility: time.Minute})
	require.NoError(f.t, err)
	return l
}

// requireError checks an error answer of the durable-consumer API: status,
// code, and the message, which detail repeats.
func requireError(t *testing.T, a testkit.Answer, status int, code, message string) {
	t.Helper()
	require.Equal(t, status, a.Code, a.Body)
	require.Equal(t, map[string]any{"code": code, "message": message, "detail": message}, a.Body)
}

// TestAcknowledgeOutcomes: ok commits and moves the cursor over the
// contiguous run of acknowledged leases; failed requeues (again on a
// repeat) and the next hand-out has the next generation; rejected dead-letters the lease's events at once (reason
// REJECTED) and the cursor passes them; anything for an older generation,
// a settled lease or an unknown lease id is stale and changes nothing.
// committed is the zero position before the first commit.
func TestAcknowledgeOutcomes(t *testing.T) {
	t.Parallel()
	f := serve(t)
	zero := cloudevent.FormatSequence(0)
	require.Equal(t, "001.00000000000000000000", zero)

	first := f.pull("w1", 1)
	second := f.pull("w2", 1)
	require.NotEqual(t, first.ID, second.ID)
	require.Equal(t, map[string]any{"status": "committed", "committed": zero}, f.ack(second, "ok"), "the first lease is still out")
	require.Equal(t, map[string]any{"status": "requeued", "committed": zero}, f.ack(first, "failed"))
	require.Equal(t, map[string]any{"status": "requeued", "committed": zero}, f.ack(first, "failed"), "a repeated failed reads requeued")

	again := f.pull("w", 1)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.Generation+1, again.Generation)
	require.Equal(t, map[string]any{"status": "stale", "committed": zero}, f.ack(first, "ok"), "handed out again: the old generation is stale")
	require.Equal(t, map[string]any{"status": "committed", "committed": cloudevent.FormatSequence(2)}, f.ack(again, "ok"), "the run of two")
	require.Equal(t, map[string]any{"status": "committed", "committed": cloudevent.FormatSequence(2)}, f.ack(again, "ok"), "a repeat answers as the first did")
	require.Equal(t, map[string]any{"status": "stale", "committed": cloudevent.FormatSequence(2)}, f.ack(again, "failed"), "already committed")
	require.Equal(t, map[string]any{"status": "stale", "committed": cloudevent.FormatSequence(2)}, f.ack(&leasestore.Lease{ID: "no-such-lease"}, "ok"))

	third := f.pull("w", 1)
	require.Equal(t, map[string]any{"status": "dead_lettered", "committed": cloudevent.FormatSequence(3)}, f.ack(third, "rejected"))
	require.Equal(t, map[string]any{"status": "stale", "committed": cloudevent.FormatSequence(3)}, f.ack(third, "failed"))
	require.Equal(t, map[string]any{"status": "dead_lettered", "committed": cloudevent.FormatSequence(3)}, f.ack(third, "rejected"), "a repeat answers as the first did")
	dls, _, err := f.svc.ListDeadLetters(t.Context(), admin, 10, "")
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Equal(t, leasestore.ReasonRejected, dls[0].Reason)
	require.Equal(t, f.consumer, dls[0].OriginQueue)
	require.Nil(t, f.pull("w", 10), "caught up")
}

// TestAcknowledgeRetryAfter: retryAfter with failed keeps the lease from
// being handed out before it passes; 0 is at once.
func TestAcknowledgeRetryAfter(t *testing.T) {
	t.Parallel()
	f := serve(t)
	l := f.pull("w", 3)
	require.Equal(t, "requeued", f.ack(l, "failed", `"retryAfter":30`)["status"])
	require.Nil(t, f.pull("w", 3), "not before 30 s")
	f.clock.Advance(29 * time.Second)
	require.Nil(t, f.pull("w", 3), "not before 30 s")
	f.clock.Advance(time.Second)
	l = f.pull("w", 3)
	require.NotNil(t, l, "due after 30 s")
	require.EqualValues(t, 2, l.Attempt)

	require.Equal(t, "requeued", f.ack(l, "failed", `"retryAfter":0`)["status"])
	l = f.pull("w", 3)
	require.NotNil(t, l, "at once")
	require.Equal(t, "requeued", f.ack(l, "failed", fmt.Sprintf(`"retryAfter":%d`, int64(leasestore.MaxRetryAfter/time.Second)))["status"], "the longest wait")
}

// TestAcknowledgeWhilePaused: a paused consumer's leases can be settled.
func TestAcknowledgeWhilePaused(t *testing.T) {
	t.Parallel()
	f := serve(t)
	l := f.pull("w", 3)
	_, err := f.svc.SetPaused(t.Context(), admin, f.consumer, true)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"status": "committed", "committed": cloudevent.FormatSequence(3)}, f.ack(l, "ok"))
}

// TestAcknowledgeRefused: the body's rules are 400 (malformed, or
// out_of_range for retryAfter) and change nothing; a body over 4 KiB is
// 422; a destination that is not a durable consumer is 400 and an unknown
// one 404; without read:events it is 403, without a token 401.
func TestAcknowledgeRefused(t *testing.T) {
	t.Parallel()
	f := serve(t)
	l := f.pull("w", 3)
	const statusRule = `status must be "ok", "failed" or "rejected"`
	for _, c := range []struct{ body, code, message string }{
		{`{"generation":0,"status":"ok"}`, "malformed", "leaseId is required"},
		{ackBody("", l.Generation, "ok"), "malformed", "leaseId is required"},
		{ackBody("a\tb", l.Generation, "ok"), "malformed", "leaseId must be valid UTF-8 without control characters (U+0000–U+001F, U+007F–U+009F)"},
		{fmt.Sprintf(`{"leaseId":%q,"status":"ok"}`, l.ID), "malformed", "generation is required and must not be negative"},
		{fmt.Sprintf(`{"leaseId":%q,"generation":null,"status":"ok"}`, l.ID), "malformed", "generation is required and must not be negative"},
		{ackBody(l.ID, -1, "ok"), "malformed", "generation is required and must not be negative"},
		{fmt.Sprintf(`{"leaseId":%q,"generation":0}`, l.ID), "malformed", statusRule},
		{ackBody(l.ID, l.Generation, "OK"), "malformed", statusRule},
		{ackBody(l.ID, l.Generation, "nack"), "malformed", statusRule},
		{ackBody(l.ID, l.Generation, "ok", `"retryAfter":5`), "malformed", `retryAfter is only allowed with status "failed"`},
		{ackBody(l.ID, l.Generation, "rejected", `"retryAfter":0`), "malformed", `retryAfter is only allowed with status "failed"`},
		{ackBody(l.ID, l.Generation, "failed", `"retryAfter":-1`), "out_of_range", "retryAfter must be between 0 and 43200 seconds"},
		{ackBody(l.ID, l.Generation, "failed", `"retryAfter":43201`), "out_of_range", "retryAfter must be between 0 and 43200 seconds"},
		{ackBody(l.ID, l.Generation, "ok", `"note":"x"`), "malformed", `unknown field "note"`},
		{ackBody(l.ID, l.Generation, "ok", `"leaseid":"x"`), "malformed", `unknown field "leaseid"`},
		{ackBody(l.ID, l.Generation, "ok", `"status":"ok"`), "malformed", `duplicate field "status"`},
		{`{"leaseId":`, "malformed", "request body is not valid JSON: it is empty or cut short"},
		{``, "malformed", "request body is not valid JSON: it is empty or cut short"},
		{fmt.Sprintf(`{"leaseId":%q,"generation":"0","status":"ok"}`, l.ID), "malformed", "request body is not JSON of the expected shape: /generation must be a JSON integer"},
		{ackBody(l.ID, l.Generation, "failed", `"retryAfter":1.5`), "malformed", "request body is not JSON of the expected shape: /retryAfter must be a JSON integer"},
	} {
		a := f.do(f.consumer, "acknowledge", "worker", c.body)
		requireError(t, a, http.StatusBadRequest, c.code, c.message)
	}
	a := f.do(f.consumer, "acknowledge", "worker", ackBody(l.ID, l.Generation, "ok", `"x":"`+strings.Repeat("x", 4<<10)+`"`))
	requireError(t, a, http.StatusUnprocessableEntity, "invalid_argument", "request body is larger than 4096 bytes")

	a = f.do("a%07b", "acknowledge", "worker", ackBody(l.ID, l.Generation, "ok"))
	requireError(t, a, http.StatusBadRequest, "malformed", "the event destination id must be valid UTF-8 without control characters (U+0000–U+001F, U+007F–U+009F)")
	_, err := f.svc.CreateQueue(t.Context(), admin, delivery.CreateQueueParams{ID: "dq"})
	require.NoError(t, err)
	a = f.do("dq", "acknowledge", "worker", ackBody(l.ID, l.Generation, "ok"))
	requireError(t, a, http.StatusBadRequest, "malformed", "the event destination is of type DURABLE_QUEUE; pull and acknowledge are only supported for durable consumer destinations (type DURABLE_CONSUMER)")
	a = f.do("no-such-destination", "acknowledge", "worker", ackBody(l.ID, l.Generation, "ok"))
	require.Equal(t, http.StatusNotFound, a.Code, a.Body)
	require.Equal(t, "not_found", a.Body["code"])

	a = f.do(f.consumer, "acknowledge", "publisher", ackBody(l.ID, l.Generation, "ok"))
	requireError(t, a, http.StatusForbidden, "permission_denied", `permission "read:events" is required`)
	a = f.do(f.consumer, "acknowledge", "nobody", ackBody(l.ID, l.Generation, "ok"))
	require.Equal(t, http.StatusUnauthorized, a.Code, a.Body)

	// Nothing was settled: the lease still commits.
	require.Equal(t, map[string]any{"status": "committed", "committed": cloudevent.FormatSequence(3)}, f.ack(l, "ok"))
}

// TestExtend: extend moves a held lease's expiry to visibility seconds
// from now (1–600, else 400 out_of_range), up to 12 hours after the hand-out
// (400 past that); a settled lease is stale, without expiresAt; the
// lease rules are acknowledge's.
func TestExtend(t *testing.T) {
	t.Parallel()
	f := serve(t)
	l := f.pull("w", 3)
	extend := func(leaseID string, generation, visibility int64) testkit.Answer {
		t.Helper()
		return f.do(f.consumer, "extend", "worker", fmt.Sprintf(`{"leaseId":%q,"generation":%d,"visibility":%d}`, leaseID, generation, visibility))
	}
	a := extend(l.ID, l.Generation, 600)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	require.Equal(t, map[string]any{"status": "extended", "expiresAt": f.clock.Now().Add(600 * time.Second).Format(time.RFC3339)}, a.Body)

	f.clock.Advance(leasestore.MaxLeaseLife - 600*time.Second)
	a = extend(l.ID, l.Generation, 600)
	require.Equal(t, http.StatusOK, a.Code, "to the cap exactly: %v", a.Body)
	f.clock.Advance(time.Second)
	a = extend(l.ID, l.Generation, 600)
	require.Equal(t, http.StatusBadRequest, a.Code, a.Body)
	require.Equal(t, "out_of_range", a.Body["code"])

	for _, v := range []string{`"visibility":0`, `"visibility":601`, `"visibility":-1`, `"visibility":null`, ``} {
		body := fmt.Sprintf(`{"leaseId":%q,"generation":%d`, l.ID, l.Generation)
		if v != "" {
			body += "," + v
		}
		a = f.do(f.consumer, "extend", "worker", body+"}")
		requireError(t, a, http.StatusBadRequest, "out_of_range", "visibility is required and must be between 1 and 600 seconds")
	}
	a = f.do(f.consumer, "extend", "worker", `{"generation":0,"visibility":5}`)
	requireError(t, a, http.StatusBadRequest, "malformed", "leaseId is required")
	a = f.do(f.consumer, "extend", "worker", fmt.Sprintf(`{"leaseId":%q,"generation":0,"visibility":5,"status":"ok"}`, l.ID))
	requireError(t, a, http.StatusBadRequest, "malformed", `unknown field "status"`)
	a = f.do(f.consumer, "extend", "publisher", fmt.Sprintf(`{"leaseId":%q,"generation":0,"visibility":5}`, l.ID))
	requireError(t, a, http.StatusForbidden, "permission_denied", `permission "read:events" is required`)

	require.Equal(t, "committed", f.ack(l, "ok")["status"])
	a = extend(l.ID, l.Generation, 60)
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	require.Equal(t, map[string]any{"status": "stale"}, a.Body, "no expiresAt")
}
