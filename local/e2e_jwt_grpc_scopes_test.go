package local_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	consumerpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
	publisherpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
)

// TestJWTScopesOnEveryRPC is TestJWTScopesOnEveryRoute for the gRPC
// services: each RPC admits a token holding exactly its permission and
// refuses one holding every other (PERMISSION_DENIED; a batch publish
// fails the event in its result instead), and a call without a token is
// UNAUTHENTICATED. The RPCs come from the services' descriptors, so an RPC
// added without a case here fails the test. A stream "admits" when its
// first receive yields a message or waits (the stream is open) rather
// than ending with an error.
func TestJWTScopesOnEveryRPC(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	const queue = "jwt-rpc-scopes-q"
	status, _ := h.createQueue(t, queue, []map[string]any{{"event_type": "orders.created"}})
	require.Equal(t, 201, status)
	all := []string{"publish:orders.*", "receive:orders.*", "consume-durable-queues", "create-durable-queues",
		"delete-durable-queues", "inspect-and-replay-all-dlq", "read:events", "manage:destinations", "run:jobs"}
	without := func(perm string) string {
		out := ""
		for _, p := range all {
			if p != perm {
				out += p + " "
			}
		}
		return out
	}
	pub := publisher(t, h)
	cons := consumerv1betaconnect.NewEventConsumerServiceClient(h2cClient(t), h.base, connect.WithGRPC())
	groups := []*consumerpb.FilterGroup{{EventType: "orders.created"}}
	// open reports what the first receive of a stream says: nil for a
	// message or for a stream still open when ctx ended. (A stream cut by
	// the client's own deadline may read as DeadlineExceeded or Canceled;
	// the deadline also travels in grpc-timeout, so the server may end the
	// stream cleanly, io.EOF, before the client's own timer fires on a
	// loaded machine: all mean the server had accepted the call; a refusal
	// comes at once with its code.)
	open := func(ctx context.Context, receive func() error) error {
		err := receive()
		if err == nil || ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded || connect.CodeOf(err) == connect.CodeCanceled {
			return nil
		}
		return err
	}
	streamCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(t.Context(), 1500*time.Millisecond)
	}
	batchRefused := errors.New("the batch publish refused its event")
	cases := []struct {
		procedure string
		perm      string
		call      func(token string) error
	}{
		{consumerv1betaconnect.EventConsumerServiceCreateDurableQueueProcedure, "create-durable-queues", func(token string) error {
			_, err := cons.CreateDurableQueue(t.Context(), rpc(&consumerpb.CreateDurableQueueRequest{QueueId: queue, FilterGroups: groups}, token))
			return err
		}},
		{consumerv1betaconnect.EventConsumerServiceUpdateDurableQueueProcedure, "create-durable-queues", func(token string) error {
			_, err := cons.UpdateDurableQueue(t.Context(), rpc(&consumerpb.UpdateDurableQueueRequest{QueueId: queue, CurrentFilterGroups: groups, NewFilterGroups: groups}, token))
			return err
		}},
		{consumerv1betaconnect.EventConsumerServiceConsumeDurableEventsProcedure, "consume-durable-queues", func(token string) error {
			ctx, cancel := streamCtx()
			defer cancel()
			//lint:ignore SA1019 deprecated, but served: its scope is checked too
			s, err := cons.ConsumeDurableEvents(ctx, rpc(&consumerpb.ConsumeDurableEventsRequest{QueueId: queue}, token))
			if err != nil {
				return open(ctx, func() error { return err })
			}
			defer s.Close()
			return open(ctx, func() error { s.Receive(); return s.Err() })
		}},
		{consumerv1betaconnect.EventConsumerServiceConsumeDurableEventsWithAcksProcedure, "consume-durable-queues", func(token string) error {
			ctx, cancel := streamCtx()
			defer cancel()
			s := cons.ConsumeDurableEventsWithAcks(ctx)
			if token != "" {
				s.RequestHeader().Set("Authorization", "Bearer "+token)
			}
			defer func() { _ = s.CloseRequest(); _ = s.CloseResponse() }()
			_ = s.Send(&consumerpb.ConsumeDurableEventsWithAcksRequest{QueueId: queue})
			return open(ctx, func() error { _, err := s.Receive(); return err })
		}},
		{consumerv1betaconnect.EventConsumerServiceConsumeNonDurableEventsProcedure, "receive:orders.*", func(token string) error {
			ctx, cancel := streamCtx()
			defer cancel()
			s := cons.ConsumeNonDurableEvents(ctx)
			if token != "" {
				s.RequestHeader().Set("Authorization", "Bearer "+token)
			}
			defer func() { _ = s.CloseRequest(); _ = s.CloseResponse() }()
			_ = s.Send(&consumerpb.ConsumeNonDurableEventsRequest{FilterGroups: groups})
			return open(ctx, func() error { _, err := s.Receive(); return err })
		}},
		{consumerv1betaconnect.EventConsumerServiceManageDeadLetteredEventsProcedure, "inspect-and-replay-all-dlq", func(token string) error {
			ctx, cancel := streamCtx()
			defer cancel()
			s := cons.ManageDeadLetteredEvents(ctx)
			if token != "" {
				s.RequestHeader().Set("Authorization", "Bearer "+token)
			}
			defer func() { _ = s.CloseRequest(); _ = s.CloseResponse() }()
			_ = s.Send(&consumerpb.ManageDeadLetteredEventsRequest{})
			return open(ctx, func() error { _, err := s.Receive(); return err })
		}},
		{consumerv1betaconnect.EventConsumerServiceDeleteDurableQueueProcedure, "delete-durable-queues", func(token string) error {
			_, err := cons.DeleteDurableQueue(t.Context(), rpc(&consumerpb.DeleteDurableQueueRequest{QueueId: queue}, token))
			return err
		}},
		{"/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/PublishEvent", "publish:orders.*", func(token string) error {
			_, err := pub.PublishEvent(t.Context(), rpc(&publisherpb.PublishEventRequest{Event: &publisherpb.Event{EventType: "orders.created"}}, token))
			return err
		}},
		{"/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/BatchPublishEvents", "publish:orders.*", func(token string) error {
			res, err := pub.BatchPublishEvents(t.Context(), rpc(&publisherpb.BatchPublishEventsRequest{Events: []*publisherpb.Event{{EventType: "orders.created"}}}, token))
			if err != nil {
				return err
			}
			if r := res.Msg.GetResults(); len(r) != 1 || !r[0].GetSuccess() {
				return batchRefused
			}
			return nil
		}},
	}

	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.procedure] = true
	}
	for _, svcs := range []protoreflect.ServiceDescriptors{
		consumerpb.File_nvidia_omniverse_notifications_consumer_v1beta_event_consumer_proto.Services(),
		publisherpb.File_nvidia_omniverse_notifications_publisher_v1beta_event_publisher_proto.Services(),
	} {
		for i := range svcs.Len() {
			sd := svcs.Get(i)
			for j := range sd.Methods().Len() {
				p := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				require.True(t, covered[p], "RPC %s has no case in this test", p)
			}
		}
	}

	for _, c := range cases {
		err := c.call("")
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%s without a token: %v", c.procedure, err)
		err = c.call(iss.Token(t, "svc", without(c.perm)))
		if errors.Is(err, batchRefused) {
			// a batch publish refuses the event, not the call
		} else {
			require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%s without %s: %v", c.procedure, c.perm, err)
		}
		require.NoError(t, c.call(iss.Token(t, "svc", c.perm)), "%s with %s", c.procedure, c.perm)
	}
}
