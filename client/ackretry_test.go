package client_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
)

// TestAcknowledgeRetryAfterLostAnswer: an acknowledgement whose answer is
// lost after Herald applied it (here a gateway answering 502) is retried
// by the client, and the retry answers committed, as the first attempt
// did, with the cursor: the durable-consumer API's "stale" would say that
// nothing was committed.
func TestAcknowledgeRetryAfterLostAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.h.URL)
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(target)
	var acks atomic.Int32
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/acknowledge") || acks.Add(1) > 1 {
			forward.ServeHTTP(w, r)
			return
		}
		// The first acknowledgement reaches Herald; its answer does not
		// reach the client.
		forward.ServeHTTP(httptest.NewRecorder(), r)
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(gw.Close)
	c, err := client.New(gw.URL, client.WithToken(b.h.Token))
	require.NoError(t, err)
	t.Cleanup(c.Close)

	ctx := testContext(t)
	d, err := c.CreateConsumer(ctx, []client.FilterGroup{{EventType: "shop.order.placed"}})
	require.NoError(t, err)
	b.publish(t, "shop.order.placed", "/orders/1", map[string]int{"id": 1})
	l, err := c.Pull(ctx, d.ID, client.PullOptions{Limit: 10, Visibility: 30 * time.Second, WorkerID: "w1"})
	require.NoError(t, err)
	require.NotNil(t, l)

	ack, err := c.Acknowledge(ctx, d.ID, l, client.AckOK)
	require.NoError(t, err)
	require.EqualValues(t, 2, acks.Load(), "the client retried the acknowledgement")
	require.Equal(t, client.OutcomeCommitted, ack.Outcome, "the retry answers as the applied first attempt")
	require.NotNil(t, ack.Committed)
	got, err := c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, ack.Committed, got.Committed)
	require.Zero(t, got.InFlight)
}
