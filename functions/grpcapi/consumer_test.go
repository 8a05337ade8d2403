package grpcapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
	"github.com/heraldevents/herald/pubsubx"
)

// The consumer tests drive EventConsumerService with plain grpc-go, as
// e2e_test.go does for the publisher.

const (
	createQueueMethod = "/" + consumerName + "/CreateDurableQueue"
	updateQueueMethod = "/" + consumerName + "/UpdateDurableQueue"
	deleteQueueMethod = "/" + consumerName + "/DeleteDurableQueue"
	withAcksMethod    = "/" + consumerName + "/ConsumeDurableEventsWithAcks"
	autoAckMethod     = "/" + consumerName + "/ConsumeDurableEvents"
	nonDurableMethod  = "/" + consumerName + "/ConsumeNonDurableEvents"
	readerToken       = "reader-token-0123456789" // receive:* only, principal "reader"
	idleToken         = "idle-token-0123456789"   // no permission, principal "idle"
)

// startConsumerGRPC is startGRPC with two more tokens: readerToken may
// receive events but not manage or consume durable queues; idleToken may
// do nothing.
func startConsumerGRPC(t *testing.T, opts ...local.Option) *grpcHerald {
	t.Helper()
	h := local.Start(t, append([]local.Option{func(c *local.Config) {
		c.Tokens = auth.StaticTokens{
			readerToken: {ID: "reader", Permissions: []string{auth.PermReceivePrefix + "*"}},
			idleToken:   {ID: "idle"},
		}
	}}, opts...)...)
	conn, err := grpc.NewClient(strings.TrimPrefix(h.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close()) })
	return &grpcHerald{Instance: h, conn: conn}
}

// createQueue creates durable queue id receiving event type typ.
func (h *grpcHerald) createQueue(t *testing.T, id, typ string) *cpb.CreateDurableQueueResponse {
	t.Helper()
	res := &cpb.CreateDurableQueueResponse{}
	err := h.conn.Invoke(h.ctx(t, h.Token), createQueueMethod, &cpb.CreateDurableQueueRequest{
		QueueId: id, FilterGroups: []*cpb.FilterGroup{{EventType: typ}},
	}, res)
	require.NoError(t, err)
	return res
}

// publish publishes one event of type typ whose message is {"n": n}.
func (h *grpcHerald) publish(t *testing.T, typ string, n int) {
	t.Helper()
	res := &pb.PublishEventResponse{}
	err := h.conn.Invoke(h.ctx(t, h.Token), publishMethod, &pb.PublishEventRequest{Event: &pb.Event{
		EventType: typ, Message: mustStruct(t, map[string]any{"n": n}),
	}}, res)
	require.NoError(t, err)
	require.True(t, res.GetResult().GetSuccess(), res.GetResult().GetFailureReason())
}

// acksStream opens ConsumeDurableEventsWithAcks on queue with token.
func (h *grpcHerald) acksStream(t *testing.T, ctx context.Context, queue string) grpc.ClientStream {
	t.Helper()
	s, err := h.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, withAcksMethod)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{QueueId: queue}))
	return s
}

// recvAck receives one response and returns its tag and the event's n.
func recvAck(t *testing.T, s grpc.ClientStream) (int64, float64) {
	t.Helper()
	res := &cpb.ConsumeDurableEventsWithAcksResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Len(t, res.GetEvents(), 1)
	ev := res.GetEvents()[0]
	require.NotNil(t, ev.GetPublishedAt())
	require.NotNil(t, ev.GetOccurredAt())
	return res.GetDeliveryTag(), ev.GetMessage().GetFields()["n"].GetNumberValue()
}

// finish half-closes s and requires that the server ends it OK, with no
// further event.
func finish(t *testing.T, s grpc.ClientStream) {
	t.Helper()
	require.NoError(t, s.CloseSend())
	err := s.RecvMsg(&cpb.ConsumeDurableEventsWithAcksResponse{})
	require.ErrorIs(t, err, io.EOF)
}

// sendFirst sends a stream's first message to a server that may already
// have refused the call (e.g. UNAUTHENTICATED before reading it): grpc-go
// then answers io.EOF and the status comes from RecvMsg.
func sendFirst(t *testing.T, s grpc.ClientStream, msg any) {
	t.Helper()
	if err := s.SendMsg(msg); err != nil {
		require.ErrorIs(t, err, io.EOF)
	}
}

// requireStatus asserts a gRPC status code and a message fragment.
func requireStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	require.Equal(t, code, status.Code(err), "error: %v", err)
	require.Contains(t, status.Convert(err).Message(), msg)
}

// TestGRPCDurableQueueLifecycle: create (new, existing, generated id),
// update (compare-and-set), delete, and their documented errors.
func TestGRPCDurableQueueLifecycle(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)

	res := h.createQueue(t, "orders-q", "shop.order.placed")
	require.Equal(t, "orders-q", res.GetQueueId())
	require.True(t, res.GetCreated())
	res = h.createQueue(t, "orders-q", "other.type")
	require.Equal(t, "orders-q", res.GetQueueId())
	require.False(t, res.GetCreated(), "an existing queue is returned as it is")
	res = h.createQueue(t, "", "shop.order.placed")
	require.NotEmpty(t, res.GetQueueId())
	require.True(t, res.GetCreated())

	update := &cpb.UpdateDurableQueueRequest{
		QueueId:             "orders-q",
		CurrentFilterGroups: []*cpb.FilterGroup{{EventType: "shop.order.placed"}},
		NewFilterGroups: []*cpb.FilterGroup{{EventType: "shop.order.shipped", Filters: []*cpb.ResourceFilter{
			{FilterType: cpb.ResourceFilter_FILTER_TYPE_STARTS_WITH_GREEDY, ResourceId: "/shops/1"},
		}}},
	}
	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), updateQueueMethod, update, &cpb.UpdateDurableQueueResponse{}))
	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), updateQueueMethod, update, &cpb.UpdateDurableQueueResponse{}),
		"a retried update succeeds")
	stale := &cpb.UpdateDurableQueueRequest{
		QueueId:             "orders-q",
		CurrentFilterGroups: []*cpb.FilterGroup{{EventType: "shop.order.placed"}},
		NewFilterGroups:     []*cpb.FilterGroup{{EventType: "shop.order.cancelled"}},
	}
	err := h.conn.Invoke(h.ctx(t, h.Token), updateQueueMethod, stale, &cpb.UpdateDurableQueueResponse{})
	requireStatus(t, err, codes.InvalidArgument, "current_filter_groups")

	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), deleteQueueMethod,
		&cpb.DeleteDurableQueueRequest{QueueId: "orders-q"}, &cpb.DeleteDurableQueueResponse{}))
	err = h.conn.Invoke(h.ctx(t, h.Token), deleteQueueMethod,
		&cpb.DeleteDurableQueueRequest{QueueId: "orders-q"}, &cpb.DeleteDurableQueueResponse{})
	requireStatus(t, err, codes.NotFound, "does not exist")
	update.QueueId = "orders-q"
	err = h.conn.Invoke(h.ctx(t, h.Token), updateQueueMethod, update, &cpb.UpdateDurableQueueResponse{})
	requireStatus(t, err, codes.NotFound, "does not exist")

	// A bad queue_id is INVALID_ARGUMENT naming the field and the rule,
	// without quoting the id.
	bad := "bad id/with spaces"
	err = h.conn.Invoke(h.ctx(t, h.Token), createQueueMethod, &cpb.CreateDurableQueueRequest{QueueId: bad}, &cpb.CreateDurableQueueResponse{})
	requireStatus(t, err, codes.InvalidArgument, "queue_id must match ^[A-Za-z0-9._-]{1,200}$")
	require.NotContains(t, status.Convert(err).Message(), bad)
	err = h.conn.Invoke(h.ctx(t, h.Token), updateQueueMethod, &cpb.UpdateDurableQueueRequest{QueueId: bad}, &cpb.UpdateDurableQueueResponse{})
	requireStatus(t, err, codes.InvalidArgument, "queue_id must match")
	err = h.conn.Invoke(h.ctx(t, h.Token), deleteQueueMethod, &cpb.DeleteDurableQueueRequest{QueueId: strings.Repeat("a", 201)}, &cpb.DeleteDurableQueueResponse{})
	requireStatus(t, err, codes.InvalidArgument, "queue_id must match")
	err = h.conn.Invoke(h.ctx(t, h.Token), createQueueMethod, &cpb.CreateDurableQueueRequest{
		QueueId: "q2", FilterGroups: []*cpb.FilterGroup{{EventType: "bad type!"}},
	}, &cpb.CreateDurableQueueResponse{})
	requireStatus(t, err, codes.InvalidArgument, "filter_groups")

	// Permissions and authentication.
	err = h.conn.Invoke(h.ctx(t, readerToken), createQueueMethod, &cpb.CreateDurableQueueRequest{QueueId: "q3"}, &cpb.CreateDurableQueueResponse{})
	requireStatus(t, err, codes.PermissionDenied, "")
	err = h.conn.Invoke(h.ctx(t, readerToken), updateQueueMethod, update, &cpb.UpdateDurableQueueResponse{})
	requireStatus(t, err, codes.PermissionDenied, "")
	err = h.conn.Invoke(h.ctx(t, readerToken), deleteQueueMethod, &cpb.DeleteDurableQueueRequest{QueueId: "q3"}, &cpb.DeleteDurableQueueResponse{})
	requireStatus(t, err, codes.PermissionDenied, "")
	err = h.conn.Invoke(h.ctx(t, ""), createQueueMethod, &cpb.CreateDurableQueueRequest{QueueId: "q3"}, &cpb.CreateDurableQueueResponse{})
	requireStatus(t, err, codes.Unauthenticated, "")
}

// TestGRPCWithAcksAckAndNack: every event comes with a tag; a nacked
// event is delivered again at once with a new tag; a tag in both lists is
// acknowledged; an unknown tag is skipped without ending the stream; after
// a reconnect only what was not acknowledged comes back.
func TestGRPCWithAcksAckAndNack(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const typ = "shop.order.placed"
	h.createQueue(t, "acks-q", typ)
	h.publish(t, typ, 1)

	s := h.acksStream(t, h.ctx(t, h.Token), "acks-q")
	tag1, n := recvAck(t, s)
	require.Equal(t, 1.0, n)
	require.Positive(t, tag1)

	// Nack: the same event again, with a new tag.
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{NackDeliveryTags: []int64{tag1}}))
	tag2, n := recvAck(t, s)
	require.Equal(t, 1.0, n)
	require.NotEqual(t, tag1, tag2)

	// Ack and nack the same tag (acks first: acknowledged), plus unknown
	// tags, which are skipped.
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{
		AckDeliveryTags: []int64{tag2, 999}, NackDeliveryTags: []int64{tag2, tag1},
	}))
	// The stream is still open: a new event arrives on it.
	h.publish(t, typ, 2)
	tag3, n := recvAck(t, s)
	require.Equal(t, 2.0, n, "event 1 was acknowledged, not nacked")
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag3}}))
	finish(t, s)

	// Nothing was left unsettled: after a reconnect the next event is a
	// new one.
	h.publish(t, typ, 3)
	s = h.acksStream(t, h.ctx(t, h.Token), "acks-q")
	_, n = recvAck(t, s)
	require.Equal(t, 3.0, n)
	finish(t, s)
}

// TestGRPCWithAcksReconnectRedelivers: an event not settled when the
// stream ends (client gone, or client half-closed) is delivered again on
// the next stream; a tag that is not the live session's settles nothing.
func TestGRPCWithAcksReconnectRedelivers(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const typ = "shop.order.placed"
	h.createQueue(t, "redeliver-q", typ)
	h.publish(t, typ, 7)

	// Client disconnect (context cancelled) with the event unsettled.
	ctx, cancel := context.WithCancel(h.ctx(t, h.Token))
	s := h.acksStream(t, ctx, "redeliver-q")
	old, n := recvAck(t, s)
	require.Equal(t, 7.0, n)
	cancel()

	// The next stream gets it again; the old tag, sent with the opening
	// message, is not this session's and settles nothing.
	s, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, withAcksMethod)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{QueueId: "redeliver-q", AckDeliveryTags: []int64{old + 100}}))
	_, n = recvAck(t, s)
	require.Equal(t, 7.0, n)
	// Half-close without settling: delivered once more.
	finish(t, s)
	s = h.acksStream(t, h.ctx(t, h.Token), "redeliver-q")
	tag, n := recvAck(t, s)
	require.Equal(t, 7.0, n)
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag}}))
	finish(t, s)
}

// TestGRPCWithAcksErrors: the documented error codes of the stream.
func TestGRPCWithAcksErrors(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	h.createQueue(t, "err-q", "shop.order.placed")

	recvErr := func(token string, first *cpb.ConsumeDurableEventsWithAcksRequest) error {
		s, err := h.conn.NewStream(h.ctx(t, token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, withAcksMethod)
		require.NoError(t, err)
		if first != nil {
			sendFirst(t, s, first)
		}
		require.NoError(t, s.CloseSend())
		err = s.RecvMsg(&cpb.ConsumeDurableEventsWithAcksResponse{})
		require.Error(t, err)
		require.False(t, errors.Is(err, io.EOF), "the stream must end with an error")
		return err
	}
	bad := "no spaces allowed"
	err := recvErr(h.Token, &cpb.ConsumeDurableEventsWithAcksRequest{QueueId: bad})
	requireStatus(t, err, codes.InvalidArgument, "queue_id must match")
	require.NotContains(t, status.Convert(err).Message(), bad)
	requireStatus(t, recvErr(h.Token, nil), codes.InvalidArgument, "queue_id")
	requireStatus(t, recvErr(h.Token, &cpb.ConsumeDurableEventsWithAcksRequest{QueueId: "no-such-q"}), codes.NotFound, "does not exist")
	requireStatus(t, recvErr(readerToken, &cpb.ConsumeDurableEventsWithAcksRequest{QueueId: "err-q"}), codes.PermissionDenied, "")
	requireStatus(t, recvErr("", &cpb.ConsumeDurableEventsWithAcksRequest{QueueId: "err-q"}), codes.Unauthenticated, "")

	// Deleting the queue under a running stream ends it NOT_FOUND.
	s := h.acksStream(t, h.ctx(t, h.Token), "err-q")
	h.publish(t, "shop.order.placed", 1)
	_, _ = recvAck(t, s)
	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), deleteQueueMethod,
		&cpb.DeleteDurableQueueRequest{QueueId: "err-q"}, &cpb.DeleteDurableQueueResponse{}))
	var err2 error
	for err2 == nil {
		err2 = s.RecvMsg(&cpb.ConsumeDurableEventsWithAcksResponse{})
	}
	requireStatus(t, err2, codes.NotFound, "")
}

// TestGRPCConsumeDurableEventsAutoAck: the deprecated RPC streams the
// queue's events as consumer Events, and answers a bad or unknown
// queue_id with its documented code.
func TestGRPCConsumeDurableEventsAutoAck(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const typ = "shop.order.placed"
	h.createQueue(t, "auto-q", typ)
	h.publish(t, typ, 1)

	ctx, cancel := context.WithCancel(h.ctx(t, h.Token))
	s, err := h.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, autoAckMethod)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsRequest{QueueId: "auto-q"}))
	require.NoError(t, s.CloseSend())
	res := &cpb.ConsumeDurableEventsResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Len(t, res.GetEvents(), 1)
	require.Equal(t, 1.0, res.GetEvents()[0].GetMessage().GetFields()["n"].GetNumberValue())
	require.Equal(t, typ, res.GetEvents()[0].GetEventType())
	require.Equal(t, "herald:dev", res.GetEvents()[0].GetPrincipalIdentity())

	// Errors: a bad id, an unknown queue.
	for id, code := range map[string]codes.Code{"bad id": codes.InvalidArgument, "no-such-q": codes.NotFound} {
		s, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ServerStreams: true}, autoAckMethod)
		require.NoError(t, err)
		require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsRequest{QueueId: id}))
		require.NoError(t, s.CloseSend())
		requireStatus(t, s.RecvMsg(&cpb.ConsumeDurableEventsResponse{}), code, "")
	}
	cancel()
}

// ndStream opens ConsumeNonDurableEvents with first and returns the
// stream and the token of its first response, which carries no event.
func (h *grpcHerald) ndStream(t *testing.T, ctx context.Context, first *cpb.ConsumeNonDurableEventsRequest) (grpc.ClientStream, string) {
	t.Helper()
	s, err := h.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, nonDurableMethod)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(first))
	require.NoError(t, s.CloseSend(), "a consumer may half-close after its first message")
	res := &cpb.ConsumeNonDurableEventsResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Empty(t, res.GetEvents())
	require.NotEmpty(t, res.GetReconnectToken())
	return s, res.GetReconnectToken()
}

// waitDetached waits until no stream session is attached to the queue
// (GET /v1/event-destinations/{id}, live_sessions).
func (h *grpcHerald) waitDetached(t *testing.T, queue string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var d struct {
			LiveSessions *int `json:"live_sessions"`
		}
		h.rest(t, "GET", "/v1/event-destinations/"+queue, nil, http.StatusOK, &d)
		require.NotNil(t, d.LiveSessions)
		return *d.LiveSessions == 0
	}, timeout, 5*time.Millisecond)
}

// recvND receives one event response and returns its token and n.
func recvND(t *testing.T, s grpc.ClientStream) (string, float64) {
	t.Helper()
	res := &cpb.ConsumeNonDurableEventsResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Len(t, res.GetEvents(), 1)
	return res.GetReconnectToken(), res.GetEvents()[0].GetMessage().GetFields()["n"].GetNumberValue()
}

// TestGRPCNonDurable: a fresh stream's first response is its token; every
// event carries the token; after a drop the token reattaches to the same
// queue, with what was published meanwhile; with previous_filter_groups
// the reconnect moves the filters.
func TestGRPCNonDurable(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	ctx, cancel := context.WithCancel(h.ctx(t, h.Token))
	s, token := h.ndStream(t, ctx, &cpb.ConsumeNonDurableEventsRequest{
		FilterGroups: []*cpb.FilterGroup{{EventType: "shop.order.placed"}},
	})
	h.publish(t, "shop.order.shipped", 0) // filtered out
	h.publish(t, "shop.order.placed", 1)
	got, n := recvND(t, s)
	require.Equal(t, token, got)
	require.Equal(t, 1.0, n)
	cancel()
	// Until the server has seen the cancel, the dropped stream still
	// reads the queue, and an event it sends is acknowledged (the
	// notifications API: this RPC acknowledges on send; at-least-once
	// takes ConsumeDurableEventsWithAcks). Publish once it has left.
	h.waitDetached(t, token)

	h.publish(t, "shop.order.placed", 2) // buffered for the reconnect
	s, got = h.ndStream(t, h.ctx(t, h.Token), &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
	require.Equal(t, token, got)
	got, n = recvND(t, s)
	require.Equal(t, token, got)
	require.Equal(t, 2.0, n)

	// A filter update by reconnect: a stale previous_filter_groups is
	// INVALID_ARGUMENT, a matching one moves the queue.
	first := &cpb.ConsumeNonDurableEventsRequest{
		ReconnectToken:       &token,
		FilterGroups:         []*cpb.FilterGroup{{EventType: "shop.order.shipped"}},
		PreviousFilterGroups: []*cpb.FilterGroup{{EventType: "other.type"}},
	}
	requireStatus(t, h.ndErr(t, h.Token, first), codes.InvalidArgument, "previous_filter_groups")
	first.PreviousFilterGroups = []*cpb.FilterGroup{{EventType: "shop.order.placed"}}
	s2, _ := h.ndStream(t, h.ctx(t, h.Token), first)
	h.publish(t, "shop.order.placed", 3) // no longer selected
	h.publish(t, "shop.order.shipped", 4)
	// Both streams share the queue: event 4 reaches one of them.
	type result struct {
		n   float64
		err error
	}
	results := make(chan result, 2)
	for _, st := range []grpc.ClientStream{s, s2} {
		go func() {
			res := &cpb.ConsumeNonDurableEventsResponse{}
			err := st.RecvMsg(res)
			var n float64
			if len(res.GetEvents()) == 1 {
				n = res.GetEvents()[0].GetMessage().GetFields()["n"].GetNumberValue()
			}
			results <- result{n, err}
		}()
	}
	r := <-results
	require.NoError(t, r.err)
	require.Equal(t, 4.0, r.n)
}

// ndErr opens ConsumeNonDurableEvents with first and returns the error
// that ends it before any response.
func (h *grpcHerald) ndErr(t *testing.T, token string, first *cpb.ConsumeNonDurableEventsRequest) error {
	t.Helper()
	s, err := h.conn.NewStream(h.ctx(t, token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, nonDurableMethod)
	require.NoError(t, err)
	if first != nil {
		sendFirst(t, s, first)
	}
	require.NoError(t, s.CloseSend())
	err = s.RecvMsg(&cpb.ConsumeNonDurableEventsResponse{})
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF), "the stream must end with an error")
	return err
}

// TestGRPCNonDurableErrors: the token rule, an unknown token, bad filters,
// permissions, and a second message on an open stream.
func TestGRPCNonDurableErrors(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	groups := []*cpb.FilterGroup{{EventType: "shop.order.placed"}}
	for _, bad := range []string{"", "has space", "caf\u00e9", strings.Repeat("x", 201), "tab\there"} {
		err := h.ndErr(t, h.Token, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &bad, FilterGroups: groups})
		requireStatus(t, err, codes.InvalidArgument, "reconnect_token must be 1 to 200 printable ASCII characters")
		if bad != "" {
			require.NotContains(t, status.Convert(err).Message(), bad)
		}
	}
	unknown := "nd-00000000-0000-0000-0000-000000000000"
	requireStatus(t, h.ndErr(t, h.Token, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &unknown}), codes.NotFound, "reconnect_token")
	requireStatus(t, h.ndErr(t, h.Token, &cpb.ConsumeNonDurableEventsRequest{
		FilterGroups: []*cpb.FilterGroup{{EventType: "bad type!"}},
	}), codes.InvalidArgument, "filter_groups")
	requireStatus(t, h.ndErr(t, h.Token, nil), codes.InvalidArgument, "filter_groups or reconnect_token")
	requireStatus(t, h.ndErr(t, idleToken, &cpb.ConsumeNonDurableEventsRequest{FilterGroups: groups}), codes.PermissionDenied, "")
	requireStatus(t, h.ndErr(t, "", &cpb.ConsumeNonDurableEventsRequest{FilterGroups: groups}), codes.Unauthenticated, "")
	// Later messages (filter updates on the open stream) are tested in
	// consumer_streams_test.go.
}

// deadLetter nacks n events of queue (a queue of a server whose
// delivery limit is 1) and leaves the stream open: its next pull moves
// them to the dead-letter queue. Call the returned func to end the stream.
func (h *grpcHerald) deadLetter(t *testing.T, queue string, n int) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(h.ctx(t, h.Token))
	s := h.acksStream(t, ctx, queue)
	for range n {
		tag, _ := recvAck(t, s)
		require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{NackDeliveryTags: []int64{tag}}))
	}
	return cancel
}

// recvOutcomes receives responses until it has n action outcomes; browse
// items met on the way are skipped.
func recvOutcomes(t *testing.T, s grpc.ClientStream, n int) []*cpb.ManageDeadLetteredEventsResponse_ActionOutcome {
	t.Helper()
	var out []*cpb.ManageDeadLetteredEventsResponse_ActionOutcome
	for len(out) < n {
		res := &cpb.ManageDeadLetteredEventsResponse{}
		require.NoError(t, s.RecvMsg(res))
		if o := res.GetActionOutcome(); o != nil {
			out = append(out, o)
		}
	}
	return out
}

// TestGRPCManageDeadLetters: dead letters are streamed with tags and
// triage metadata; every action gets one correlated outcome: LEFT (also
// for an unknown tag or no action), REPLAYED (the event is back on its
// queue), DISCARDED, ORIGIN_QUEUE_DELETED.
func TestGRPCManageDeadLetters(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t, func(c *local.Config) { c.DeliveryLimit = 1 })
	const typ = "shop.order.placed"
	h.createQueue(t, "dl-q", typ)
	h.publish(t, typ, 1)
	h.publish(t, typ, 2)
	stop := h.deadLetter(t, "dl-q", 2)
	h.createQueue(t, "doomed-q", "shop.order.doomed")
	h.publish(t, "shop.order.doomed", 3)
	stopDoomed := h.deadLetter(t, "doomed-q", 1)

	s, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+consumerName+"/ManageDeadLetteredEvents")
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(&cpb.ManageDeadLetteredEventsRequest{}))
	tags := map[float64]int64{} // n → tag
	for len(tags) < 3 {
		res := &cpb.ManageDeadLetteredEventsResponse{}
		require.NoError(t, s.RecvMsg(res))
		d := res.GetDeadLetteredEvent()
		require.NotNil(t, d)
		n := d.GetEvent().GetMessage().GetFields()["n"].GetNumberValue()
		require.NotContains(t, tags, n, "each dead letter is shown once")
		require.Positive(t, d.GetDeliveryTag())
		require.Equal(t, cpb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_DELIVERY_LIMIT, d.GetReason())
		require.EqualValues(t, 1, d.GetDeliveryCount())
		require.NotNil(t, d.GetDeadLetteredAt())
		require.Equal(t, "herald:dev", d.GetEvent().GetPrincipalIdentity())
		if n == 3 {
			require.Equal(t, "doomed-q", d.GetOriginQueue())
		} else {
			require.Equal(t, "dl-q", d.GetOriginQueue())
			require.Equal(t, typ, d.GetEvent().GetEventType())
		}
		tags[n] = d.GetDeliveryTag()
	}
	// All three are dead letters now: the streams that nacked them may
	// go, so that the replayed event has one consumer.
	stop()
	stopDoomed()

	type entry = cpb.ManageDeadLetteredEventsRequest_ActionEntry
	const (
		replay  = cpb.ManageDeadLetteredEventsRequest_ACTION_REPLAY
		discard = cpb.ManageDeadLetteredEventsRequest_ACTION_DISCARD
		leave   = cpb.ManageDeadLetteredEventsRequest_ACTION_LEAVE
		left    = cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_LEFT
	)
	act := func(entries ...*entry) []*cpb.ManageDeadLetteredEventsResponse_ActionOutcome {
		require.NoError(t, s.SendMsg(&cpb.ManageDeadLetteredEventsRequest{Actions: entries}))
		out := recvOutcomes(t, s, len(entries))
		for i, o := range out {
			require.Equal(t, entries[i].GetDeliveryTag(), o.GetDeliveryTag(), "outcome %d", i)
		}
		return out
	}
	out := act(&entry{DeliveryTag: tags[1], Action: leave}, &entry{DeliveryTag: 999, Action: replay}, &entry{DeliveryTag: tags[1]})
	for _, o := range out {
		require.Equal(t, left, o.GetOutcome())
	}
	require.Contains(t, out[1].GetDetail(), "delivery tag")
	require.Contains(t, out[2].GetDetail(), "action must be")

	out = act(&entry{DeliveryTag: tags[1], Action: replay}, &entry{DeliveryTag: tags[2], Action: discard})
	require.Equal(t, cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_REPLAYED, out[0].GetOutcome())
	require.Equal(t, cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_DISCARDED, out[1].GetOutcome())
	out = act(&entry{DeliveryTag: tags[2], Action: discard})
	require.Equal(t, left, out[0].GetOutcome(), "a settled tag is unknown")

	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), deleteQueueMethod,
		&cpb.DeleteDurableQueueRequest{QueueId: "doomed-q"}, &cpb.DeleteDurableQueueResponse{}))
	out = act(&entry{DeliveryTag: tags[3], Action: replay})
	require.Equal(t, cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_ORIGIN_QUEUE_DELETED, out[0].GetOutcome())
	require.NotEmpty(t, out[0].GetDetail())
	require.NoError(t, s.CloseSend())

	// The replayed event is back on its queue.
	a := h.acksStream(t, h.ctx(t, h.Token), "dl-q")
	tag, n := recvAck(t, a)
	require.Equal(t, 1.0, n)
	require.NoError(t, a.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag}}))
	finish(t, a)
}

// TestGRPCManageDeadLettersErrors: PERMISSION_DENIED without
// inspect-and-replay-all-dlq; INVALID_ARGUMENT for actions on the
// opening message.
func TestGRPCManageDeadLettersErrors(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	open := func(token string, first *cpb.ManageDeadLetteredEventsRequest) error {
		s, err := h.conn.NewStream(h.ctx(t, token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+consumerName+"/ManageDeadLetteredEvents")
		require.NoError(t, err)
		sendFirst(t, s, first)
		require.NoError(t, s.CloseSend())
		err = s.RecvMsg(&cpb.ManageDeadLetteredEventsResponse{})
		require.Error(t, err)
		require.False(t, errors.Is(err, io.EOF), "the stream must end with an error")
		return err
	}
	requireStatus(t, open(readerToken, &cpb.ManageDeadLetteredEventsRequest{}), codes.PermissionDenied, "")
	requireStatus(t, open(h.Token, &cpb.ManageDeadLetteredEventsRequest{Actions: []*cpb.ManageDeadLetteredEventsRequest_ActionEntry{
		{DeliveryTag: 1, Action: cpb.ManageDeadLetteredEventsRequest_ACTION_LEAVE},
	}}), codes.InvalidArgument, "actions")
}

// TestGRPCNonDurableReaped: once its queue is reaped (the session lapsed
// and the reconnect-grace window passed), a running stream ends
// NOT_FOUND, and so does a reconnect with its token. Sessions lapse in the
// store-backed path (no hub: HERALD_PROCESS_HEARTBEAT=0, and the Lambda
// functions); a hub queue is reaped when its home dies
// (delivery's TestHubDeadHomeReaped).
func TestGRPCNonDurableReaped(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := startConsumerGRPC(t, local.WithClock(clk.Now), func(c *local.Config) {
		c.ReapInterval = config.MaxReapInterval
		c.SessionTTL = time.Hour // no heartbeat during the test
		c.ProcessHeartbeat = 0
	})
	s, token := h.ndStream(t, h.ctx(t, h.Token), &cpb.ConsumeNonDurableEventsRequest{
		FilterGroups: []*cpb.FilterGroup{{EventType: "shop.order.placed"}},
	})
	clk.Advance(2 * time.Hour) // the session lapsed and the grace window passed
	var job map[string]any
	h.rest(t, "POST", "/v1/jobs/reap-idle-queues", nil, http.StatusOK, &job)
	require.EqualValues(t, 1, job["reaped_queues"])
	// The running stream may notice either first: its session lapsed (the
	// clock jumped past its TTL: INTERNAL with the notifications API's "broker
	// cancelled" message) or its queue is gone (NOT_FOUND). Both end it;
	// which one depends on whether it pulled between the jump and the
	// reap. (A queue deleted under a live session is always NOT_FOUND:
	// TestGRPCDeprecatedConsumeQueueDeleted and the WithAcks tests.)
	err := s.RecvMsg(&cpb.ConsumeNonDurableEventsResponse{})
	switch status.Code(err) {
	case codes.NotFound:
	case codes.Internal:
		require.Equal(t, delivery.ConsumerCancelledMessage, status.Convert(err).Message())
	default:
		t.Fatalf("want NOT_FOUND or INTERNAL, got %v", err)
	}
	// A reconnect with the token finds no queue, whatever the stream saw.
	err = h.ndErr(t, h.Token, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
	requireStatus(t, err, codes.NotFound, "filter_groups and no token")
	require.NotContains(t, status.Convert(err).Message(), token)
}

// TestGRPCTriageShowsAnEventGRPCCannotCarry: publish refuses a number
// beyond a double's range (422), which no google.protobuf.Struct can
// hold; one stored before that rule (here put on the topic directly) is
// poison: the gRPC stream dead-letters it on its first delivery, rather
// than handing it back until the delivery limit, and delivers the event
// behind it; triage over gRPC then shows it, by its type, and can
// discard it, instead of ending the triage stream.
func TestGRPCTriageShowsAnEventGRPCCannotCarry(t *testing.T) {
	t.Parallel()
	var topicURL string
	h := startConsumerGRPC(t, func(c *local.Config) { topicURL = c.TopicURL })
	const typ = "shop.order.huge"
	h.createQueue(t, "huge-q", typ)
	body := strings.NewReader(`{"event":{"event_type":"` + typ + `","message":{"n":1e400}}}`)
	req, err := http.NewRequestWithContext(t.Context(), "POST", h.URL+"/api/v1beta/events", body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, "publish refuses a number no double holds")

	broker, err := pubsubx.Open(t.Context(), topicURL)
	require.NoError(t, err)
	defer func() { _ = broker.Close() }()
	old := `{"specversion":"1.0","id":"old-1","source":"/herald","type":"` + typ + `","datacontenttype":"application/json",` +
		`"time":"2024-10-16T14:30:00Z","publishedat":"2024-10-16T14:30:00Z","principalidentity":"root","data":{"n":1e400}}`
	require.NoError(t, broker.Send(t.Context(), &pubsubx.Message{Body: []byte(old), Metadata: map[string]string{pubsubx.AttrEventType: typ}}))
	h.publish(t, typ, 1) // behind it, and delivered
	ctx, cancel := context.WithCancel(h.ctx(t, h.Token))
	defer cancel()
	s := h.acksStream(t, ctx, "huge-q")
	_, n := recvAck(t, s)
	require.EqualValues(t, 1, n, "the event gRPC can carry arrives; the other is dead-lettered")

	triage, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+consumerName+"/ManageDeadLetteredEvents")
	require.NoError(t, err)
	require.NoError(t, triage.SendMsg(&cpb.ManageDeadLetteredEventsRequest{}))
	item := &cpb.ManageDeadLetteredEventsResponse{}
	require.NoError(t, triage.RecvMsg(item))
	d := item.GetDeadLetteredEvent()
	require.Equal(t, typ, d.GetEvent().GetEventType())
	require.Equal(t, "huge-q", d.GetOriginQueue())
	require.EqualValues(t, 1, d.GetDeliveryCount(), "dead-lettered on its first delivery")
	type entry = cpb.ManageDeadLetteredEventsRequest_ActionEntry
	require.NoError(t, triage.SendMsg(&cpb.ManageDeadLetteredEventsRequest{Actions: []*entry{{DeliveryTag: d.GetDeliveryTag(), Action: cpb.ManageDeadLetteredEventsRequest_ACTION_DISCARD}}}))
	out := recvOutcomes(t, triage, 1)[0]
	require.Equal(t, cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_DISCARDED, out.GetOutcome(), out.GetDetail())
}

// TestGRPCEventsCarryIDAndResource: a streamed Event carries the event's
// id (field 100) and resource (field 101), Herald's additions to the
// published message: the id is the same on a redelivery, so a consumer
// can drop duplicates, and differs between events; an event published
// without a resource has none.
func TestGRPCEventsCarryIDAndResource(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const typ = "shop.order.ids"
	h.createQueue(t, "ids-q", typ)
	for i, resource := range []string{"/orders/1", ""} {
		ev := &pb.Event{EventType: typ, Message: mustStruct(t, map[string]any{"n": i})}
		if resource != "" {
			ev.Resource = &pb.EventResource{ResourceId: resource}
		}
		res := &pb.PublishEventResponse{}
		require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), publishMethod, &pb.PublishEventRequest{Event: ev}, res))
		require.True(t, res.GetResult().GetSuccess())
	}
	s := h.acksStream(t, h.ctx(t, h.Token), "ids-q")
	recv := func() (int64, *cpb.Event) {
		res := &cpb.ConsumeDurableEventsWithAcksResponse{}
		require.NoError(t, s.RecvMsg(res))
		require.Len(t, res.GetEvents(), 1)
		return res.GetDeliveryTag(), res.GetEvents()[0]
	}
	tag, first := recv()
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, first.GetId())
	require.Equal(t, "/orders/1", first.GetResource().GetResourceId())
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{NackDeliveryTags: []int64{tag}}))
	var again, second *cpb.Event
	var tags []int64
	for again == nil || second == nil {
		tag, ev := recv()
		tags = append(tags, tag)
		if ev.GetMessage().GetFields()["n"].GetNumberValue() == 0 {
			again = ev
		} else {
			second = ev
		}
	}
	require.Equal(t, first.GetId(), again.GetId(), "a redelivery carries the same id")
	require.Equal(t, "/orders/1", again.GetResource().GetResourceId())
	require.NotEmpty(t, second.GetId())
	require.NotEqual(t, first.GetId(), second.GetId())
	require.Nil(t, second.GetResource(), "an event published without a resource has none")
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: tags}))
	finish(t, s)
}
