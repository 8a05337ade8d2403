package local_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/local"
)

// TestQueueMessageTTLE2E: with HERALD_QUEUE_MESSAGE_TTL set, an event a
// durable queue held past the TTL is dead-lettered with reason EXPIRED
// instead of delivered.
func TestQueueMessageTTLE2E(t *testing.T) {
	t.Parallel()
	c := start(t, streamOpts(func(c *local.Config) {
		c.QueueMessageTTL = time.Millisecond
	}))
	status, _ := c.createQueue(t, "ttl-q", nil)
	require.Equal(t, http.StatusCreated, status)
	c.publish(t, ev("orders.created", "/orders/1", map[string]any{"n": 1}))
	time.Sleep(20 * time.Millisecond) // let the event age past the 1 ms TTL

	s := c.mustStream(t, durablePath("ttl-q"), nil)
	s.connected(t)
	defer s.close()
	deadline := time.Now().Add(frameWait)
	for {
		p := c.listDeadLetters(t, url.Values{"limit": {"10"}})
		if len(p.DeadLetters) > 0 {
			require.Len(t, p.DeadLetters, 1)
			require.Equal(t, "EXPIRED", p.DeadLetters[0].Reason)
			require.Equal(t, "ttl-q", p.DeadLetters[0].OriginQueue)
			require.JSONEq(t, `{"n":1}`, string(p.DeadLetters[0].Event.Message))
			return
		}
		require.True(t, time.Now().Before(deadline), "the expired event was not dead-lettered")
		time.Sleep(10 * time.Millisecond)
	}
}
