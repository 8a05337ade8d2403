package publish_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/publish"
	"github.com/heraldevents/herald/internal/testkit/faultbroker"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// results returns a batch answer's results.
func (k keyed) results() []map[string]any {
	var out []map[string]any
	for _, r := range k.body["results"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// receivedTypes returns the event types of the events received since
// the last call, in order.
func (f *fixture) receivedTypes() []string {
	var out []string
	for _, e := range f.received() {
		out = append(out, e.EventType)
	}
	return out
}

// TestKeyedPerEvent: each event of a batch may carry its own key: a
// repeated key publishes nothing for its event and answers that event's
// first result marked as a replay, while the batch's other events publish
// as they would alone; a key reused with another event fails that event
// alone.
func TestKeyedPerEvent(t *testing.T) {
	t.Parallel()
	f := serve(t)
	body := `{"events":[
		{"event_type":"orders.a","idempotency_key":"k-a"},
		{"event_type":"orders.plain"},
		{"event_type":"broken.c","idempotency_key":"k-c"},
		{"event_type":"orders.d","message":{"n":4},"idempotency_key":"k-d"}]}`
	first := f.doKeyed(batchPath, "admin", body)
	require.Equal(t, http.StatusOK, first.code, first.body)
	require.Empty(t, first.header.Get(publish.HeaderReplayed))
	rs := first.results()
	for i, want := range []bool{true, true, false, true} {
		require.Equal(t, want, rs[i]["success"], "event %d: %v", i, rs[i])
		require.NotContains(t, rs[i], "replayed")
		require.NotContains(t, rs[i]["event"], "idempotency_key", "the key is not echoed")
	}
	require.Equal(t, []string{"orders.a", "orders.plain", "orders.d"}, f.receivedTypes())

	again := f.doKeyed(batchPath, "admin", body)
	require.Equal(t, http.StatusOK, again.code, again.body)
	require.Empty(t, again.header.Get(publish.HeaderReplayed), "not every event is a replay")
	ra := again.results()
	for _, i := range []int{0, 3} {
		require.Equal(t, true, ra[i]["replayed"], "event %d", i)
		delete(ra[i], "replayed")
		require.Equal(t, rs[i], ra[i], "event %d answers its first result, publish time included", i)
	}
	require.NotContains(t, ra[1], "replayed")
	require.NotContains(t, ra[2], "replayed", "a failure is not recorded, so not replayed")
	require.Equal(t, false, ra[2]["success"])
	require.Equal(t, []string{"orders.plain"}, f.receivedTypes(), "only the unkeyed event again")

	// Every event keyed and repeated: the answer is a replay as a whole.
	all := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.d","message":{"n":4},"idempotency_key":"k-d"},{"event_type":"orders.a","idempotency_key":"k-a"}]}`)
	require.Equal(t, http.StatusOK, all.code, all.body)
	require.Equal(t, "true", all.header.Get(publish.HeaderReplayed))
	for _, r := range all.results() {
		require.Equal(t, true, r["replayed"])
		require.Equal(t, true, r["success"])
	}

	// A key with another event fails that event alone; the rest publish.
	reused := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.a","message":{"other":true},"idempotency_key":"k-a"},{"event_type":"orders.e","idempotency_key":"k-e"}]}`)
	require.Equal(t, http.StatusOK, reused.code, reused.body)
	rr := reused.results()
	require.Equal(t, false, rr[0]["success"])
	require.Contains(t, rr[0]["failure_reason"], "idempotency key was used with a different request")
	require.NotContains(t, rr[0], "replayed")
	require.Equal(t, true, rr[1]["success"])
	require.Equal(t, []string{"orders.e"}, f.receivedTypes())

	// Keys are the principal's: orders' "k-a" is its own.
	mine := f.doKeyed(batchPath, "orders", `{"events":[{"event_type":"orders.a","idempotency_key":"k-a"}]}`)
	require.Equal(t, http.StatusOK, mine.code, mine.body)
	require.NotContains(t, mine.results()[0], "replayed")
	require.Equal(t, []string{"orders.a"}, f.receivedTypes())
}

// TestKeyedPerEventSharedWithSingle: an event's key in a batch and a
// single publish's key are one key: either repeats the other.
func TestKeyedPerEventSharedWithSingle(t *testing.T) {
	t.Parallel()
	f := serve(t)
	single := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"orders.one","message":{"n":1}}}`, "shared-1")
	require.Equal(t, http.StatusOK, single.code, single.body)
	batch := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.one","message":{"n":1},"idempotency_key":"shared-1"}]}`)
	require.Equal(t, http.StatusOK, batch.code, batch.body)
	r := batch.results()[0]
	require.Equal(t, true, r["replayed"])
	delete(r, "replayed")
	require.Equal(t, single.body["result"], r)

	// The event's own key on a single publish keys it as the header does.
	body := `{"event":{"event_type":"orders.two","idempotency_key":"shared-2"}}`
	for range 2 {
		a := f.doKeyed(singlePath, "admin", body)
		require.Equal(t, http.StatusOK, a.code, a.body)
	}
	require.Equal(t, []string{"orders.one", "orders.two"}, f.receivedTypes())
	again := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.two","idempotency_key":"shared-2"}]}`)
	require.Equal(t, true, again.results()[0]["replayed"])
	require.Empty(t, f.receivedTypes())
}

// TestKeyedPerEventRefused: a key on two events of one batch, or event
// keys beside the batch's header key, is 400 and publishes nothing; an
// event key outside the rules fails its event alone (the others publish).
func TestKeyedPerEventRefused(t *testing.T) {
	t.Parallel()
	f := serve(t)
	twice := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.a","idempotency_key":"same"},{"event_type":"orders.b","idempotency_key":"same"}]}`)
	require.Equal(t, http.StatusBadRequest, twice.code, twice.body)
	require.Contains(t, twice.body["message"], "events[0] and events[1] have the same idempotency key")

	both := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.a"},{"event_type":"orders.b","idempotency_key":"k-b"}]}`, "batch-key")
	require.Equal(t, http.StatusBadRequest, both.code, both.body)
	require.Contains(t, both.body["message"], "events[1] has an idempotency key of its own")
	single := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"orders.a","idempotency_key":"k-a"}}`, "header-key")
	require.Equal(t, http.StatusBadRequest, single.code, single.body)
	empty := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"orders.a","idempotency_key":""}}`)
	require.Equal(t, http.StatusUnprocessableEntity, empty.code, empty.body)
	require.Empty(t, f.receivedTypes())

	bad := f.doKeyed(batchPath, "admin", `{"events":[
		{"event_type":"orders.long","idempotency_key":"`+strings.Repeat("k", 201)+`"},
		{"event_type":"orders.empty","idempotency_key":""},
		{"event_type":"orders.tab","idempotency_key":"tab\tkey"},
		{"event_type":"orders.number","idempotency_key":7},
		{"event_type":"orders.good","idempotency_key":"`+strings.Repeat("k", 200)+`"}]}`)
	require.Equal(t, http.StatusOK, bad.code, bad.body)
	rs := bad.results()
	for i := range 4 {
		require.Equal(t, false, rs[i]["success"], "event %d", i)
		require.NotEmpty(t, rs[i]["failure_reason"])
	}
	require.Contains(t, rs[0]["failure_reason"], "1 to 200 characters")
	require.Contains(t, rs[2]["failure_reason"], "printable ASCII")
	require.Equal(t, true, rs[4]["success"])
	require.Equal(t, []string{"orders.good"}, f.receivedTypes())
}

// TestKeyedPerEventInProgress: an event whose key a publish still in
// progress holds fails alone (the per-event 409), is not published, and
// the batch's other events publish.
func TestKeyedPerEventInProgress(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, m *pubsubx.Message) error {
		if m.EventType() == "orders.slow" {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	svc := inmem.New(t, inmem.Options{
		Wrap:   faultbroker.Wrap(slow),
		Config: delivery.Config{Logger: slog.New(slog.DiscardHandler), IdempotencyWait: -1},
	})
	c, err := svc.CreateDestination(t.Context(), admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	h := &publish.Handler{Service: svc.Service}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+batchPath, h.Batch)
	f := &fixture{t: t, svc: svc, consumer: c.ID, srv: httpx.Authenticate(auth.StaticTokens{
		"admin": {ID: "admin", Permissions: []string{auth.PermAll}},
	}, mux)}
	done := make(chan keyed)
	go func() {
		done <- f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.slow","idempotency_key":"slow-1"}]}`)
	}()
	<-entered
	busy := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.slow","idempotency_key":"slow-1"},{"event_type":"orders.other","idempotency_key":"other-1"}]}`)
	require.Equal(t, http.StatusOK, busy.code, busy.body)
	rs := busy.results()
	require.Equal(t, false, rs[0]["success"])
	require.Contains(t, rs[0]["failure_reason"], "in progress")
	require.Equal(t, true, rs[1]["success"])
	close(release)
	first := <-done
	require.Equal(t, true, first.results()[0]["success"])
	require.ElementsMatch(t, []string{"orders.slow", "orders.other"}, f.receivedTypes(), "the held event once")
}
