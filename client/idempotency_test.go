package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
)

// cutGateway forwards every request to Herald, except that the first
// publish's connection is cut once Herald has answered it: Herald
// received and handled the publish, and the client never hears back.
type cutGateway struct {
	mu   sync.Mutex
	keys []string // the Idempotency-Key of every publish that reached it
}

func (g *cutGateway) start(t *testing.T, target string) string {
	u, err := url.Parse(target)
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/v1beta/events") {
			forward.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		g.keys = append(g.keys, r.Header.Get("Idempotency-Key"))
		first := len(g.keys) == 1
		g.mu.Unlock()
		if !first {
			forward.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		require.Equal(t, http.StatusOK, rec.Code, "Herald handled the first attempt")
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // the answer is lost with the connection
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (g *cutGateway) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.keys...)
}

// TestPublishRetryThroughCutConnection: a publish whose connection is
// cut after Herald received it is retried by the client under the same
// idempotency key, the retry answers the first attempt's result, and
// exactly one event is delivered. Without a key the same cut delivers
// the event twice, which is what the key prevents.
func TestPublishRetryThroughCutConnection(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{true, false} {
		name := map[bool]string{true: "keyed", false: "without key"}[keyed]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var g cutGateway
			opts := []client.Option{client.WithToken(b.h.Token)}
			if !keyed {
				opts = append(opts, client.WithoutIdempotencyKeys())
			}
			c, err := client.New(g.start(t, b.h.URL), opts...)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			ctx := testContext(t)
			d, err := b.c.CreateConsumer(ctx, []client.FilterGroup{{EventType: "shop.order.placed"}})
			require.NoError(t, err)

			e, err := client.NewEvent("shop.order.placed", "/orders/7", map[string]int{"id": 7})
			require.NoError(t, err)
			res, err := c.Publish(ctx, e)
			require.NoError(t, err)
			require.True(t, res.Success)
			keys := g.seen()
			require.Len(t, keys, 2, "the cut attempt and its retry")
			require.Equal(t, keys[0], keys[1], "the retry keeps the key")

			var delivered int
			for {
				l, err := b.c.Pull(ctx, d.ID, client.PullOptions{Limit: 10, Visibility: 30 * time.Second, WorkerID: "w"})
				require.NoError(t, err)
				if l == nil {
					break
				}
				delivered += len(l.Events)
				_, err = b.c.Acknowledge(ctx, d.ID, l, client.AckOK)
				require.NoError(t, err)
			}
			if keyed {
				require.NotEmpty(t, keys[0])
				require.True(t, res.Replayed, "the retry answered the first attempt's result")
				require.Equal(t, 1, delivered, "exactly one event delivered")
			} else {
				require.Empty(t, keys[0])
				require.False(t, res.Replayed)
				require.Equal(t, 2, delivered, "without a key the retry publishes again")
			}
		})
	}
}

// TestPublishWithIdempotencyKey: a key chosen by the caller makes a
// second call (a new process, say) answer the first result.
func TestPublishWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := client.WithIdempotencyKey(testContext(t), "order-7-placed")
	e, err := client.NewEvent("shop.order.placed", "/orders/7", map[string]int{"id": 7})
	require.NoError(t, err)
	first, err := b.c.Publish(ctx, e)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	again, err := b.c.Publish(ctx, e)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Event.Time(), again.Event.Time())

	other, err := client.NewEvent("shop.order.placed", "/orders/8", nil)
	require.NoError(t, err)
	_, err = b.c.Publish(ctx, other)
	var he *client.Error
	require.ErrorAs(t, err, &he)
	require.Equal(t, http.StatusUnprocessableEntity, he.StatusCode)
}

// TestPublishBatchKeyedRetryThroughCutConnection: a batch of events with
// keys of their own, whose connection is cut after Herald published it,
// is retried by the client; the retry answers each event's first result
// as a replay, and each event is delivered exactly once. A later call
// with one of the keys replays that event and publishes the new one.
func TestPublishBatchKeyedRetryThroughCutConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var g cutGateway
	c, err := client.New(g.start(t, b.h.URL), client.WithToken(b.h.Token))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, []client.FilterGroup{{EventType: "shop.order.placed"}})
	require.NoError(t, err)
	event := func(id int) client.KeyedEvent {
		e, err := client.NewEvent("shop.order.placed", fmt.Sprintf("/orders/%d", id), map[string]int{"id": id})
		require.NoError(t, err)
		return client.KeyedEvent{Event: e, Key: fmt.Sprintf("order-%d-placed", id)}
	}
	unkeyed := event(3)
	unkeyed.Key = "" // the client makes one, kept across the retry
	res, err := c.PublishBatchKeyed(ctx, []client.KeyedEvent{event(1), event(2), unkeyed})
	require.NoError(t, err)
	require.Len(t, res, 3)
	for i, r := range res {
		require.True(t, r.Success, "event %d: %s", i, r.FailureReason)
		require.True(t, r.Replayed, "event %d: the retry answered the first attempt's result", i)
	}
	require.Len(t, g.seen(), 2, "the cut attempt and its retry")

	delivered := func() []string {
		var subjects []string
		for {
			l, err := b.c.Pull(ctx, d.ID, client.PullOptions{Limit: 10, Visibility: 30 * time.Second, WorkerID: "w"})
			require.NoError(t, err)
			if l == nil {
				return subjects
			}
			for _, e := range l.Events {
				subjects = append(subjects, e.Subject())
			}
			_, err = b.c.Acknowledge(ctx, d.ID, l, client.AckOK)
			require.NoError(t, err)
		}
	}
	require.ElementsMatch(t, []string{"/orders/1", "/orders/2", "/orders/3"}, delivered(), "each event exactly once")

	again, err := c.PublishBatchKeyed(ctx, []client.KeyedEvent{event(2), event(4)})
	require.NoError(t, err)
	require.True(t, again[0].Replayed)
	require.False(t, again[1].Replayed)
	require.True(t, again[1].Success)
	require.Equal(t, []string{"/orders/4"}, delivered())

	// A key twice in one call fails before anything is sent.
	n := len(g.seen())
	_, err = c.PublishBatchKeyed(ctx, []client.KeyedEvent{event(5), event(5)})
	require.ErrorContains(t, err, "same idempotency key")
	bad := event(6)
	bad.Key = "tab\tkey"
	_, err = c.PublishBatchKeyed(ctx, []client.KeyedEvent{bad})
	require.ErrorContains(t, err, "printable ASCII")
	require.Len(t, g.seen(), n)
	require.Empty(t, delivered())
}
