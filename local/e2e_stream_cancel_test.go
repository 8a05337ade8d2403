package local_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storeurl"
	"github.com/heraldevents/herald/local"
)

// TestConsumerCancelledE2E: when a stream's session is taken away while its
// queue is intact (here its heartbeat lapsed: the clock jumped past the
// session TTL), the stream ends with the notifications API's documented 500 error
// event, and a reconnect finds the backlog, including what the lost
// session had not acknowledged.
func TestConsumerCancelledE2E(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		name := map[bool]string{false: "non-durable", true: "durable"}[durable]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			c := start(t, local.WithClock(clk.Now), streamOpts(func(c *local.Config) {
				c.SessionTTL = 300 * time.Millisecond // heartbeats every 100 ms of real time
				c.SSEAckDelay = time.Hour             // the durable stream acknowledges nothing
				c.ReapInterval = config.MaxReapInterval
				// Sessions with a TTL in the store: the stream hub keeps
				// non-durable streams in memory, with no TTL to lapse (its
				// "broker cancelled" case: TestHubStreamsEvictedE2E).
				c.ProcessHeartbeat = 0
			}))
			path := streamPath()
			if durable {
				status, _ := c.createQueue(t, "q", nil)
				require.Equal(t, http.StatusCreated, status)
				path = durablePath("q")
			}
			s := c.mustStream(t, path, nil)
			token := s.connected(t)
			c.publishN(t, "a.b", 1, 1)
			require.Equal(t, []int{1}, nValues(t, s.events(t, 1)))

			clk.Advance(time.Second) // the session's TTL lapses before its next heartbeat
			msg, status := s.streamError(t)
			require.Equal(t, http.StatusInternalServerError, status)
			require.Equal(t, delivery.ConsumerCancelledMessage, msg)
			require.Equal(t, "Internal Server Error: The broker cancelled this stream's consumer. Reconnect to resume consuming.", msg)

			c.publishN(t, "a.b", 2, 1)
			var hdr map[string]string
			if !durable {
				hdr = map[string]string{"Last-Event-ID": token}
			}
			s = c.mustStream(t, path, hdr)
			require.Equal(t, token, s.connected(t), "the same queue")
			want := []int{2}
			if durable {
				want = []int{1, 2} // the lost session had not acknowledged 1
			}
			require.ElementsMatch(t, want, nValues(t, s.events(t, len(want))))
		})
	}
}

// TestHubStreamsEvictedE2E: evicting a non-durable queue's sessions (as the
// broker cancelling the stream's consumer would) ends its SSE stream served
// by the stream hub with the notifications API's message at the home's
// next heartbeat, and a reconnect finds the queue with what was published
// meanwhile.
func TestHubStreamsEvictedE2E(t *testing.T) {
	t.Parallel()
	url := "mem://hub-evict-" + uuid.NewString()
	h := local.Start(t, streamOpts(func(c *local.Config) {
		c.ProcessHeartbeat = 100 * time.Millisecond
		c.StoreURL = url + "/key"
	}))
	c := &client{base: h.URL, token: h.Token, hc: &http.Client{Timeout: time.Minute}}
	// The mem URL opener hands out the server's own collection; the
	// server closes it.
	coll, err := storeurl.Open(t.Context(), url+"/key")
	require.NoError(t, err)
	store := leasestore.New(coll, leasestore.Options{})
	s := c.mustStream(t, streamPath(), nil)
	token := s.connected(t)
	c.publishN(t, "a.b", 1, 1)
	require.Equal(t, []int{1}, nValues(t, s.events(t, 1)))

	n, err := store.EvictSessions(t.Context(), token)
	require.NoError(t, err)
	require.Zero(t, n, "the store holds no session of a hub queue: it tells the queue's home")
	msg, status := s.streamError(t)
	require.Equal(t, http.StatusInternalServerError, status)
	require.Equal(t, delivery.ConsumerCancelledMessage, msg)

	c.publishN(t, "a.b", 2, 1)
	s = c.mustStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
	require.Equal(t, token, s.connected(t), "the same queue")
	require.Equal(t, []int{2}, nValues(t, s.events(t, 1)))
}
