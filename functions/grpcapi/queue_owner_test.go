package grpcapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
)

// TestGRPCNonDurableQueueOwner: another principal holding a stream's
// reconnect token may resume its queue, but a filter update — on
// reconnect or on the resumed stream — ends PERMISSION_DENIED, quoting no
// token, and the queue keeps its filters and events: its owner then
// receives every event it selects.
func TestGRPCNonDurableQueueOwner(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const placed, shipped = "shop.order.placed", "shop.order.shipped"
	owner, token := h.openND(t, &cpb.ConsumeNonDurableEventsRequest{FilterGroups: groupsOf(placed)})

	asReader := func(first *cpb.ConsumeNonDurableEventsRequest) grpc.ClientStream {
		t.Helper()
		s, err := h.conn.NewStream(h.ctx(t, readerToken), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, nonDurableMethod)
		require.NoError(t, err)
		require.NoError(t, s.SendMsg(first))
		return s
	}
	denied := func(err error) {
		t.Helper()
		require.Equal(t, codes.PermissionDenied, status.Code(err), "error: %v", err)
		require.NotContains(t, status.Convert(err).Message(), token)
	}

	// On reconnect.
	s := asReader(&cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token, PreviousFilterGroups: groupsOf(placed), FilterGroups: groupsOf(shipped)})
	denied(recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{}))

	// The token alone resumes; an update on the resumed stream is refused.
	s = asReader(&cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
	res := &cpb.ConsumeNonDurableEventsResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Equal(t, token, res.GetReconnectToken())
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{PreviousFilterGroups: groupsOf(placed), FilterGroups: groupsOf(shipped)}))
	denied(recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{}))

	// Nothing changed: the owner's stream still selects placed, and gets
	// every one of them.
	h.publish(t, shipped, 100)
	for n := 1; n <= 3; n++ {
		h.publish(t, placed, n)
	}
	for n := 1; n <= 3; n++ {
		got, v := recvND(t, owner)
		require.Equal(t, token, got)
		require.Equal(t, float64(n), v)
	}
	// The owner may move them.
	update(t, owner, token, groupsOf(placed), groupsOf(shipped))
}
