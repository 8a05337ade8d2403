package grpcapi_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/heraldevents/herald/delivery"
	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storeurl"
	"github.com/heraldevents/herald/local"
)

// The tests in this file drive the remaining rules of the notifications API's consumer
// API with plain grpc-go against local.Start: filter updates on an open
// ConsumeNonDurableEvents stream, the errors of an open stream (consumer
// cancelled, queue deleted, too many sessions), REPLAY_FAILED, and the
// server's HTTP/2 keep-alive PINGs.

var storeCount atomic.Int64

// startWithStore is startConsumerGRPC on a named in-memory store, with a
// second handle on that store for what no API does: evicting sessions
// (as a broker cancelling a consumer would) and attaching many.
func startWithStore(t *testing.T, opts ...local.Option) (*grpcHerald, *leasestore.Store) {
	t.Helper()
	n := storeCount.Add(1)
	url := fmt.Sprintf("mem://grpcapi-gaps-%d/key", n)
	h := startConsumerGRPC(t, append(opts, func(c *local.Config) {
		c.StoreURL = url
		c.TopicURL = fmt.Sprintf("mem://grpcapi-gaps-%d", n)
	})...)
	// The mem URL opener hands out the server's own collection; the
	// server closes it.
	coll, err := storeurl.Open(t.Context(), url)
	require.NoError(t, err)
	return h, leasestore.New(coll, leasestore.Options{})
}

// openND opens ConsumeNonDurableEvents with first, keeps the sending side
// open, and returns the stream and the token of its first response.
func (h *grpcHerald) openND(t *testing.T, first *cpb.ConsumeNonDurableEventsRequest) (grpc.ClientStream, string) {
	t.Helper()
	s, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, nonDurableMethod)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(first))
	res := &cpb.ConsumeNonDurableEventsResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Empty(t, res.GetEvents())
	require.NotEmpty(t, res.GetReconnectToken())
	return s, res.GetReconnectToken()
}

// update sends a filter update on s and waits for its confirmation: a
// response with the token and no event.
func update(t *testing.T, s grpc.ClientStream, token string, prev, next []*cpb.FilterGroup) {
	t.Helper()
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{PreviousFilterGroups: prev, FilterGroups: next}))
	res := &cpb.ConsumeNonDurableEventsResponse{}
	require.NoError(t, s.RecvMsg(res))
	require.Empty(t, res.GetEvents(), "the confirmation carries no event")
	require.Equal(t, token, res.GetReconnectToken())
}

// recvErr receives until s ends and returns the status it ended with.
func recvErr(t *testing.T, s grpc.ClientStream, res any) error {
	t.Helper()
	for {
		if err := s.RecvMsg(res); err != nil {
			require.NotErrorIs(t, err, io.EOF, "the stream must end with an error")
			return err
		}
	}
}

func groupsOf(types ...string) []*cpb.FilterGroup {
	out := make([]*cpb.FilterGroup, len(types))
	for i, typ := range types {
		out[i] = &cpb.FilterGroup{EventType: typ}
	}
	return out
}

// TestGRPCNonDurableFilterUpdate: a later message with filter_groups and
// previous_filter_groups moves the open stream's filters, confirmed by an
// event-less response, after which the stream delivers what the new
// filters select; a message with neither list changes nothing; a stale
// previous_filter_groups ends the stream INVALID_ARGUMENT with the
// filters unchanged; absent previous_filter_groups is "no groups".
func TestGRPCNonDurableFilterUpdate(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const placed, shipped = "shop.order.placed", "shop.order.shipped"
	s, token := h.openND(t, &cpb.ConsumeNonDurableEventsRequest{FilterGroups: groupsOf(placed)})
	h.publish(t, placed, 1)
	_, n := recvND(t, s)
	require.Equal(t, 1.0, n)

	update(t, s, token, groupsOf(placed), groupsOf(shipped))
	h.publish(t, placed, 2) // no longer selected
	h.publish(t, shipped, 3)
	got, n := recvND(t, s)
	require.Equal(t, token, got)
	require.Equal(t, 3.0, n)
	// A retry of the same update succeeds: the queue has those filters.
	update(t, s, token, groupsOf(placed), groupsOf(shipped))

	// Neither list (the token alone): nothing changes and nothing is
	// answered, so the next response is the next event.
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token}))
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{}))
	h.publish(t, shipped, 4)
	_, n = recvND(t, s)
	require.Equal(t, 4.0, n)

	// A stale previous_filter_groups (and an absent one, which means no
	// groups) ends the stream, and the queue keeps its filters.
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{PreviousFilterGroups: groupsOf(placed), FilterGroups: groupsOf("other.type")}))
	requireStatus(t, recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{}), codes.InvalidArgument, "previous_filter_groups")
	s, got = h.openND(t, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
	require.Equal(t, token, got)
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{FilterGroups: groupsOf(placed)}))
	requireStatus(t, recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{}), codes.InvalidArgument, "previous_filter_groups")
	s, _ = h.openND(t, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
	h.publish(t, placed, 5)
	h.publish(t, shipped, 6)
	_, n = recvND(t, s)
	require.Equal(t, 6.0, n, "still on the shipped filter")

	// Invalid new filters name filter_groups; another token is refused
	// without being quoted.
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{PreviousFilterGroups: groupsOf(shipped), FilterGroups: groupsOf("bad type!")}))
	requireStatus(t, recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{}), codes.InvalidArgument, "filter_groups")
	s, _ = h.openND(t, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
	other := "nd-someone-elses-token"
	require.NoError(t, s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &other, PreviousFilterGroups: groupsOf(shipped), FilterGroups: groupsOf(placed)}))
	err := recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{})
	requireStatus(t, err, codes.InvalidArgument, "reconnect_token")
	require.NotContains(t, status.Convert(err).Message(), other)

	// A queue without groups (every event) moves with previous absent.
	s, token = h.openND(t, &cpb.ConsumeNonDurableEventsRequest{})
	update(t, s, token, nil, groupsOf(shipped))
	h.publish(t, placed, 7)
	h.publish(t, shipped, 8)
	_, n = recvND(t, s)
	require.Equal(t, 8.0, n)
}

// TestGRPCConsumerCancelled: when a stream's session is taken away while
// its queue is intact (here evicted in the store, as a broker cancelling
// the consumer would), each consume RPC ends INTERNAL with the notifications API's
// exact message, and a reconnect finds the queue with what the lost
// session had not settled.
func TestGRPCConsumerCancelled(t *testing.T) {
	t.Parallel()
	h, store := startWithStore(t)
	const typ = "shop.order.placed"
	requireCancelled := func(err error) {
		t.Helper()
		require.Equal(t, codes.Internal, status.Code(err), "error: %v", err)
		require.Equal(t, delivery.ConsumerCancelledMessage, status.Convert(err).Message())
		require.Equal(t, "Internal Server Error: The broker cancelled this stream's consumer. Reconnect to resume consuming.", status.Convert(err).Message())
	}
	evict := func(queue string) {
		t.Helper()
		n, err := store.EvictSessions(t.Context(), queue)
		require.NoError(t, err)
		c, err := store.GetConsumer(t.Context(), queue)
		require.NoError(t, err)
		if c.Home != "" {
			// A non-durable queue served by the process's hub: the store
			// tells its home, which ends the stream at its next heartbeat.
			require.Zero(t, n, "the store holds no session of a hub queue")
			return
		}
		require.Equal(t, 1, n, "the stream's one session")
	}

	t.Run("ConsumeDurableEventsWithAcks", func(t *testing.T) {
		h.createQueue(t, "cancel-acks", typ)
		s := h.acksStream(t, h.ctx(t, h.Token), "cancel-acks")
		h.publish(t, typ, 1)
		_, n := recvAck(t, s) // not acknowledged
		require.Equal(t, 1.0, n)
		evict("cancel-acks")
		requireCancelled(recvErr(t, s, &cpb.ConsumeDurableEventsWithAcksResponse{}))

		h.publish(t, typ, 2)
		s = h.acksStream(t, h.ctx(t, h.Token), "cancel-acks")
		tag1, n1 := recvAck(t, s)
		tag2, n2 := recvAck(t, s)
		require.ElementsMatch(t, []float64{1, 2}, []float64{n1, n2}, "the unsettled event is delivered again")
		require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag1, tag2}}))
		finish(t, s)
	})
	t.Run("ConsumeNonDurableEvents", func(t *testing.T) {
		s, token := h.openND(t, &cpb.ConsumeNonDurableEventsRequest{FilterGroups: groupsOf(typ)})
		h.publish(t, typ, 1)
		_, n := recvND(t, s)
		require.Equal(t, 1.0, n)
		evict(token)
		requireCancelled(recvErr(t, s, &cpb.ConsumeNonDurableEventsResponse{}))

		h.publish(t, typ, 2) // the queue is intact: buffered for the reconnect
		s, got := h.openND(t, &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &token})
		require.Equal(t, token, got)
		_, n = recvND(t, s)
		require.Equal(t, 2.0, n)
	})
	t.Run("ConsumeDurableEvents", func(t *testing.T) {
		h.createQueue(t, "cancel-auto", typ)
		s, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ServerStreams: true}, autoAckMethod)
		require.NoError(t, err)
		require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsRequest{QueueId: "cancel-auto"}))
		require.NoError(t, s.CloseSend())
		h.publish(t, typ, 1)
		require.NoError(t, s.RecvMsg(&cpb.ConsumeDurableEventsResponse{}))
		evict("cancel-auto")
		requireCancelled(recvErr(t, s, &cpb.ConsumeDurableEventsResponse{}))
	})
}

// TestGRPCDeprecatedConsumeQueueDeleted: deleting the queue under an open
// ConsumeDurableEvents stream ends it NOT_FOUND (WithAcks and the
// non-durable stream are covered in consumer_test.go).
func TestGRPCDeprecatedConsumeQueueDeleted(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t)
	const typ = "shop.order.placed"
	h.createQueue(t, "gone-q", typ)
	s, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ServerStreams: true}, autoAckMethod)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsRequest{QueueId: "gone-q"}))
	require.NoError(t, s.CloseSend())
	h.publish(t, typ, 1)
	require.NoError(t, s.RecvMsg(&cpb.ConsumeDurableEventsResponse{}), "the stream is open")
	require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), deleteQueueMethod,
		&cpb.DeleteDurableQueueRequest{QueueId: "gone-q"}, &cpb.DeleteDurableQueueResponse{}))
	requireStatus(t, recvErr(t, s, &cpb.ConsumeDurableEventsResponse{}), codes.NotFound, "gone-q")
}

// TestGRPCTooManySessions: a queue with leasestore.MaxSessions attached
// sessions refuses one more stream RESOURCE_EXHAUSTED (the notifications API: "Service
// overloaded", retry with backoff); once one leaves, a stream opens.
func TestGRPCTooManySessions(t *testing.T) {
	t.Parallel()
	h, store := startWithStore(t)
	const typ = "shop.order.placed"
	h.createQueue(t, "busy-q", typ)
	for i := range leasestore.MaxSessions {
		require.NoError(t, store.Attach(t.Context(), "busy-q", fmt.Sprintf("other-%d", i), time.Hour))
	}
	s := h.acksStream(t, h.ctx(t, h.Token), "busy-q")
	err := recvErr(t, s, &cpb.ConsumeDurableEventsWithAcksResponse{})
	requireStatus(t, err, codes.ResourceExhausted, fmt.Sprintf("%d sessions", leasestore.MaxSessions))

	n, err := store.EvictSessions(t.Context(), "busy-q", "other-0")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	s = h.acksStream(t, h.ctx(t, h.Token), "busy-q")
	h.publish(t, typ, 1)
	tag, got := recvAck(t, s)
	require.Equal(t, 1.0, got)
	require.NoError(t, s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{tag}}))
	finish(t, s)
}

// TestGRPCReplayFailedWindowFull: replaying a dead letter into a queue
// whose in-flight window (leasestore.MaxInFlight events) is full cannot be
// confirmed: the outcome is REPLAY_FAILED and the dead letter stays (no
// loss); once the queue has room the same tag replays.
func TestGRPCReplayFailedWindowFull(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t, func(c *local.Config) { c.DeliveryLimit = 1 })
	const typ = "shop.order.placed"
	h.createQueue(t, "full-q", typ)
	h.publish(t, typ, -1)
	stop := h.deadLetter(t, "full-q", 1)

	triage, err := h.conn.NewStream(h.ctx(t, h.Token), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+consumerName+"/ManageDeadLetteredEvents")
	require.NoError(t, err)
	require.NoError(t, triage.SendMsg(&cpb.ManageDeadLetteredEventsRequest{}))
	item := &cpb.ManageDeadLetteredEventsResponse{}
	require.NoError(t, triage.RecvMsg(item))
	require.Equal(t, "full-q", item.GetDeadLetteredEvent().GetOriginQueue())
	tag := item.GetDeadLetteredEvent().GetDeliveryTag()
	stop()

	// Fill the window: MaxInFlight events, each held unsettled by one of
	// ten streams (a session holds at most delivery.DefaultMaxUnsettled).
	const streams = leasestore.MaxInFlight / delivery.DefaultMaxUnsettled
	for b := range leasestore.MaxInFlight / 100 {
		events := make([]*pb.Event, 100)
		for i := range events {
			events[i] = &pb.Event{EventType: typ, Message: mustStruct(t, map[string]any{"n": b*100 + i})}
		}
		res := &pb.BatchPublishEventsResponse{}
		require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), batchMethod, &pb.BatchPublishEventsRequest{Events: events}, res))
		for _, r := range res.GetResults() {
			require.True(t, r.GetSuccess(), r.GetFailureReason())
		}
	}
	holders := make([]grpc.ClientStream, streams)
	var firstTag int64
	for i := range holders {
		holders[i] = h.acksStream(t, h.ctx(t, h.Token), "full-q")
		for k := range delivery.DefaultMaxUnsettled {
			res := &cpb.ConsumeDurableEventsWithAcksResponse{}
			require.NoError(t, holders[i].RecvMsg(res), "holder %d of %d, after %d of its %d events", i, streams, k, delivery.DefaultMaxUnsettled)
			require.Len(t, res.GetEvents(), 1)
			if i == 0 && firstTag == 0 {
				firstTag = res.GetDeliveryTag()
			}
		}
	}

	type entry = cpb.ManageDeadLetteredEventsRequest_ActionEntry
	replay := &entry{DeliveryTag: tag, Action: cpb.ManageDeadLetteredEventsRequest_ACTION_REPLAY}
	require.NoError(t, triage.SendMsg(&cpb.ManageDeadLetteredEventsRequest{Actions: []*entry{replay}}))
	out := recvOutcomes(t, triage, 1)[0]
	require.Equal(t, tag, out.GetDeliveryTag())
	require.Equal(t, cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_REPLAY_FAILED, out.GetOutcome(), out.GetDetail())
	require.Contains(t, out.GetDetail(), "left in place")
	require.Contains(t, out.GetDetail(), "in-flight window")

	// Room for one: the first holder acknowledges one event and leaves
	// (a half-close ends the stream once its tags are settled; its other
	// events go back to the queue, still held). The same tag now replays.
	require.NoError(t, holders[0].SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{firstTag}}))
	finish(t, holders[0])
	require.NoError(t, triage.SendMsg(&cpb.ManageDeadLetteredEventsRequest{Actions: []*entry{replay}}))
	out = recvOutcomes(t, triage, 1)[0]
	require.Equal(t, cpb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_REPLAYED, out.GetOutcome(), out.GetDetail())

	// End the triage stream by half-closing and wait for its end (the
	// server ends it OK).
	require.NoError(t, triage.CloseSend())
	for {
		err := triage.RecvMsg(&cpb.ManageDeadLetteredEventsResponse{})
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
}

// TestGRPCServerPings: with a short HERALD_HTTP2_PING_INTERVAL the server
// PINGs the HTTP/2 connection of an idle, open gRPC stream (seen by a TCP
// proxy that reads the frames the server sends), grpc-go acknowledges
// them, and the stream still delivers afterwards.
func TestGRPCServerPings(t *testing.T) {
	t.Parallel()
	h := startConsumerGRPC(t, func(c *local.Config) { c.HTTP2PingInterval = 200 * time.Millisecond })
	pings := make(chan struct{}, 100)
	proxy := framePeeker(t, strings.TrimPrefix(h.URL, "http://"), func(typ, flags byte) {
		if typ == 0x6 && flags&0x1 == 0 { // PING, not an ACK
			select {
			case pings <- struct{}{}:
			default:
			}
		}
	})
	conn, err := grpc.NewClient(proxy, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close()) })
	via := &grpcHerald{Instance: h.Instance, conn: conn}

	const typ = "shop.order.placed"
	s, _ := via.ndStream(t, h.ctx(t, h.Token), &cpb.ConsumeNonDurableEventsRequest{FilterGroups: groupsOf(typ)})
	ctx := h.ctx(t, "")
	for i := range 3 {
		select {
		case <-pings:
		case <-ctx.Done():
			t.Fatalf("the server sent %d PINGs on the idle connection, want 3", i)
		}
	}
	h.publish(t, typ, 1) // over the direct connection
	_, n := recvND(t, s)
	require.Equal(t, 1.0, n, "the pinged stream is alive")
}

// framePeeker is a TCP proxy to target that reports the type and flags of
// every HTTP/2 frame the server sends (an HTTP/2 server's byte stream is
// frames from the first byte: it sends no preface string). It returns its
// address.
func framePeeker(t *testing.T, target string, seen func(typ, flags byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
			go func() { _, _ = io.Copy(server, client) }()
			go func() {
				hdr := make([]byte, 9)
				for {
					if _, err := io.ReadFull(server, hdr); err != nil {
						_ = client.Close()
						return
					}
					payload := make([]byte, binary.BigEndian.Uint32(append([]byte{0}, hdr[:3]...)))
					if _, err := io.ReadFull(server, payload); err != nil {
						_ = client.Close()
						return
					}
					seen(hdr[3], hdr[4])
					if _, err := client.Write(append(hdr, payload...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
