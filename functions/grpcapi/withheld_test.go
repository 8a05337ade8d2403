package grpcapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/heraldevents/herald/auth"
	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/local"
)

// shopReaderToken may consume durable queues and receive shop.* events only.
const shopReaderToken = "shop-reader-token-0123456789"

// TestGRPCWithheldEventsKeepTheirCount (issue: a principal that may not
// receive a queue's events could dead-letter them by pulling): streams of
// both durable RPCs, opened by a principal that may not read the queue's
// audit.* events, pull more often than the delivery limit while shop.*
// events flow to them. The audit events are never dead-lettered, and a
// principal that may read them gets them, in order, as a first delivery.
func TestGRPCWithheldEventsKeepTheirCount(t *testing.T) {
	t.Parallel()
	const limit = 2
	h := startConsumerGRPC(t, func(c *local.Config) {
		c.DeliveryLimit = limit
		c.Tokens[shopReaderToken] = &auth.Principal{ID: "shop-reader", Permissions: []string{auth.PermConsumeDurableQueues, auth.PermReceivePrefix + "shop.*"}}
	})
	const queue = "withheld-q"
	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), createQueueMethod, &cpb.CreateDurableQueueRequest{
		QueueId: queue, FilterGroups: []*cpb.FilterGroup{{EventType: "audit.entry"}, {EventType: "shop.order"}},
	}, &cpb.CreateDurableQueueResponse{}))
	h.publish(t, "audit.entry", 0)
	h.publish(t, "audit.entry", 1)

	// ConsumeDurableEventsWithAcks: one shop event per pull, every pull
	// meeting the audit events first.
	s := h.acksStream(t, h.ctx(t, shopReaderToken), queue)
	for i := range limit + 3 {
		h.publish(t, "shop.order", 100+i)
		tag, n := recvAck(t, s)
		require.EqualValues(t, 100+i, n)
		require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag}}))
	}
	finish(t, s)

	// ConsumeDurableEvents (acknowledged once sent), the same way.
	ctx, cancel := context.WithCancel(h.ctx(t, shopReaderToken))
	auto, err := h.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, autoAckMethod)
	require.NoError(t, err)
	require.NoError(t, auto.SendMsg(&cpb.ConsumeDurableEventsRequest{QueueId: queue}))
	require.NoError(t, auto.CloseSend())
	for i := range limit + 3 {
		h.publish(t, "shop.order", 200+i)
		res := &cpb.ConsumeDurableEventsResponse{}
		require.NoError(t, auto.RecvMsg(res))
		require.Len(t, res.GetEvents(), 1)
		require.EqualValues(t, 200+i, res.GetEvents()[0].GetMessage().GetFields()["n"].GetNumberValue())
	}
	cancel()

	var dls struct {
		DeadLetters []struct {
			DeliveryCount int64 `json:"delivery_count"`
		} `json:"dead_letters"`
	}
	h.rest(t, http.MethodGet, "/api/v1beta/dead-letters", nil, http.StatusOK, &dls)
	require.Empty(t, dls.DeadLetters, "the shop reader's pulls dead-lettered nothing")

	// A principal that may read the audit events gets them, first (they
	// are the oldest waiting), in order. (A shop event whose automatic
	// acknowledgement the cancel cut short may come after them.)
	s = h.acksStream(t, h.ctx(t, h.Token), queue)
	for i := range 2 {
		tag, n := recvAck(t, s)
		require.EqualValues(t, i, n, "in order")
		require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag}}))
	}
	require.NoError(t, s.CloseSend())
}
