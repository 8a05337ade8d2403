package publish_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// keyed is one answer to a request with idempotency headers.
type keyed struct {
	code   int
	header http.Header
	body   map[string]any
}

func (f *fixture) doKeyed(target, token, body string, keys ...string) keyed {
	f.t.Helper()
	req := httptest.NewRequest("POST", target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for _, k := range keys {
		req.Header.Add(publish.HeaderIdempotencyKey, k)
	}
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	var out map[string]any
	require.NoError(f.t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	return keyed{code: rec.Code, header: rec.Header(), body: out}
}

// TestKeyedSingle: a repeat of a key answers the first result, marked as
// a replay, and publishes nothing; another event under the key is 422;
// another principal's key of the same text is its own.
func TestKeyedSingle(t *testing.T) {
	t.Parallel()
	f := serve(t)
	body := `{"event":{"event_type":"orders.created","message":{"n":1}}}`
	first := f.doKeyed(singlePath, "admin", body, "order-1")
	require.Equal(t, http.StatusOK, first.code, first.body)
	require.Empty(t, first.header.Get(publish.HeaderReplayed))
	require.NotContains(t, first.body["result"], "replayed")

	again := f.doKeyed(singlePath, "admin", body, "order-1")
	require.Equal(t, http.StatusOK, again.code, again.body)
	require.Equal(t, "true", again.header.Get(publish.HeaderReplayed))
	res := again.body["result"].(map[string]any)
	require.Equal(t, true, res["replayed"])
	delete(res, "replayed")
	require.Equal(t, first.body, again.body, "the first answer, its publish time included")
	got := f.received()
	require.Len(t, got, 1, "one event however often the key is sent")

	other := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"orders.created","message":{"n":2}}}`, "order-1")
	require.Equal(t, http.StatusUnprocessableEntity, other.code, other.body)
	require.Contains(t, other.body["message"], "different request")

	// The orders principal's "order-1" is not admin's.
	mine := f.doKeyed(singlePath, "orders", body, "order-1")
	require.Equal(t, http.StatusOK, mine.code, mine.body)
	require.Empty(t, mine.header.Get(publish.HeaderReplayed))
	require.Len(t, f.received(), 1)

	// No key: published every time.
	for range 2 {
		a := f.do(singlePath, "admin", body)
		require.Equal(t, http.StatusOK, a.Code)
	}
	require.Len(t, f.received(), 2)
}

// TestKeyedBrokerFailureIsNotRecorded: an event the broker refused was
// not published, so its key is released and the retry publishes.
func TestKeyedBrokerFailureIsNotRecorded(t *testing.T) {
	t.Parallel()
	f := serve(t)
	a := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"broken.x"}}`, "k")
	require.Equal(t, http.StatusOK, a.code)
	require.Equal(t, false, a.body["result"].(map[string]any)["success"])
	b := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"broken.x"}}`, "k")
	require.Empty(t, b.header.Get(publish.HeaderReplayed), "a failure is not replayed")
	// Now another request under the same key is a fresh publish.
	c := f.doKeyed(singlePath, "admin", `{"event":{"event_type":"orders.x"}}`, "k")
	require.Equal(t, http.StatusOK, c.code, c.body)
	require.Equal(t, true, c.body["result"].(map[string]any)["success"])
	require.Len(t, f.received(), 1)
}

// TestKeyedBatch: a header key covers the whole batch: the repeat
// answers every result as first answered, failures included.
func TestKeyedBatch(t *testing.T) {
	t.Parallel()
	f := serve(t)
	body := `{"events":[{"event_type":"orders.a"},{"event_type":"broken.b"},{"event_type":"orders.c","message":{"x":1}}]}`
	first := f.doKeyed(batchPath, "admin", body, "batch-1")
	require.Equal(t, http.StatusOK, first.code, first.body)
	again := f.doKeyed(batchPath, "admin", body, "batch-1")
	require.Equal(t, http.StatusOK, again.code, again.body)
	require.Equal(t, "true", again.header.Get(publish.HeaderReplayed))
	for _, r := range again.body["results"].([]any) {
		m := r.(map[string]any)
		require.Equal(t, true, m["replayed"])
		delete(m, "replayed")
	}
	require.Equal(t, first.body, again.body)
	require.Len(t, f.received(), 2, "the two good events, once")

	changed := f.doKeyed(batchPath, "admin", `{"events":[{"event_type":"orders.a"}]}`, "batch-1")
	require.Equal(t, http.StatusUnprocessableEntity, changed.code, changed.body)
}

// TestKeyedBadKeys: a key outside the rules is 422, and nothing is
// published.
func TestKeyedBadKeys(t *testing.T) {
	t.Parallel()
	f := serve(t)
	body := `{"event":{"event_type":"orders.created"}}`
	for _, keys := range [][]string{{""}, {strings.Repeat("k", 201)}, {"a", "b"}, {"tab\tkey"}} {
		for _, path := range []string{singlePath, batchPath} {
			b := body
			if path == batchPath {
				b = `{"events":[{"event_type":"orders.created"}]}`
			}
			a := f.doKeyed(path, "admin", b, keys...)
			require.Equal(t, http.StatusUnprocessableEntity, a.code, "%q on %s: %v", keys, path, a.body)
		}
	}
	ok := f.doKeyed(singlePath, "admin", body, strings.Repeat("k", 200))
	require.Equal(t, http.StatusOK, ok.code, ok.body)
	require.Len(t, f.received(), 1)
}

// TestKeyedInProgress: a repeat while the first publish of its key is
// still with the broker is 409 with Retry-After, and publishes nothing.
func TestKeyedInProgress(t *testing.T) {
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
	mux.HandleFunc("POST "+singlePath, h.Single)
	f := &fixture{t: t, svc: svc, consumer: c.ID, srv: httpx.Authenticate(auth.StaticTokens{
		"admin": {ID: "admin", Permissions: []string{auth.PermAll}},
	}, mux)}
	body := `{"event":{"event_type":"orders.slow"}}`
	done := make(chan keyed)
	go func() { done <- f.doKeyed(singlePath, "admin", body, "slow-1") }()
	<-entered
	busy := f.doKeyed(singlePath, "admin", body, "slow-1")
	require.Equal(t, http.StatusConflict, busy.code, busy.body)
	require.NotEmpty(t, busy.header.Get("Retry-After"))
	close(release)
	first := <-done
	require.Equal(t, http.StatusOK, first.code, first.body)
	again := f.doKeyed(singlePath, "admin", body, "slow-1")
	require.Equal(t, "true", again.header.Get(publish.HeaderReplayed))
	require.Len(t, f.received(), 1)
}
