package grpcapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/grpcapi"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
)

// TestBatchPerEventIdempotencyKeys: Event.idempotency_key keys each event
// of a BatchPublishEvents on its own: a repeated key answers its event's
// first result with replayed true and publishes nothing for it, a key
// reused with another event fails that event alone, and the metadata key
// beside event keys, or one key twice, is INVALID_ARGUMENT.
func TestBatchPerEventIdempotencyKeys(t *testing.T) {
	t.Parallel()
	dev := &auth.Principal{ID: "dev", Permissions: []string{auth.PermAll}}
	svc := inmem.New(t, inmem.Options{})
	dest, err := svc.CreateDestination(t.Context(), dev, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for _, m := range grpcapi.Mounts(svc.Service, auth.StaticTokens{allToken: {ID: "dev", Permissions: []string{auth.PermAll}}}, grpcapi.Services{Publisher: true}) {
		mux.Handle(m.Path, m.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newClient(srv.Client(), srv.URL)
	received := func() []string {
		t.Helper()
		var out []string
		for {
			l, err := svc.Pull(t.Context(), dev, delivery.PullRequest{Destination: dest.ID, Worker: "w", Limit: 100, Visibility: 30e9})
			require.NoError(t, err)
			if l == nil {
				return out
			}
			for _, b := range l.Events {
				ev, err := delivery.DecodeConsumerEvent(b)
				require.NoError(t, err)
				out = append(out, ev.EventType)
			}
			_, err = svc.Acknowledge(t.Context(), dev, leasestore.AckParams{Consumer: dest.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
			require.NoError(t, err)
		}
	}
	batch := func(metaKey string, events ...*pb.Event) (*connect.Response[pb.BatchPublishEventsResponse], error) {
		req := request(&pb.BatchPublishEventsRequest{Events: events}, allToken)
		if metaKey != "" {
			req.Header().Set("idempotency-key", metaKey)
		}
		return c.BatchPublishEvents(context.Background(), req)
	}
	msg := func(n float64) *structpb.Struct {
		s, err := structpb.NewStruct(map[string]any{"n": n})
		require.NoError(t, err)
		return s
	}
	events := []*pb.Event{
		{EventType: "shop.a", IdempotencyKey: "k-a"},
		{EventType: "shop.plain"},
		{EventType: "shop.c", Message: msg(3), IdempotencyKey: "k-c"},
	}
	first, err := batch("", events...)
	require.NoError(t, err)
	for _, r := range first.Msg.GetResults() {
		require.True(t, r.GetSuccess(), r.GetFailureReason())
		require.False(t, r.GetReplayed())
		require.Empty(t, r.GetEvent().GetIdempotencyKey(), "the key is not echoed")
	}
	require.Equal(t, []string{"shop.a", "shop.plain", "shop.c"}, received())

	again, err := batch("", events...)
	require.NoError(t, err)
	require.Empty(t, again.Header().Get("idempotent-replayed"), "the unkeyed event published again")
	rs := again.Msg.GetResults()
	require.True(t, rs[0].GetReplayed())
	require.False(t, rs[1].GetReplayed())
	require.True(t, rs[2].GetReplayed())
	require.Equal(t, first.Msg.GetResults()[0].GetEvent().GetOccurredAt().AsTime(), rs[0].GetEvent().GetOccurredAt().AsTime(), "the first publish time")
	require.Equal(t, []string{"shop.plain"}, received())

	whole, err := batch("", events[0], events[2])
	require.NoError(t, err)
	require.Equal(t, "true", whole.Header().Get("idempotent-replayed"), "every event a replay")

	reused, err := batch("", &pb.Event{EventType: "shop.c", Message: msg(4), IdempotencyKey: "k-c"}, &pb.Event{EventType: "shop.d", IdempotencyKey: "k-d"})
	require.NoError(t, err)
	rr := reused.Msg.GetResults()
	require.False(t, rr[0].GetSuccess())
	require.Contains(t, rr[0].GetFailureReason(), "idempotency key was used with a different request")
	require.True(t, rr[1].GetSuccess())
	require.Equal(t, []string{"shop.d"}, received())

	bad, err := batch("", &pb.Event{EventType: "shop.long", IdempotencyKey: strings.Repeat("k", 201)}, &pb.Event{EventType: "shop.e", IdempotencyKey: "k-e"})
	require.NoError(t, err)
	require.False(t, bad.Msg.GetResults()[0].GetSuccess())
	require.Contains(t, bad.Msg.GetResults()[0].GetFailureReason(), "1 to 200 characters")
	require.Equal(t, []string{"shop.e"}, received())

	_, err = batch("batch-key", &pb.Event{EventType: "shop.f", IdempotencyKey: "k-f"})
	requireCode(t, err, connect.CodeInvalidArgument, "events[0] has an idempotency key of its own")
	_, err = batch("", &pb.Event{EventType: "shop.g", IdempotencyKey: "same"}, &pb.Event{EventType: "shop.h", IdempotencyKey: "same"})
	requireCode(t, err, connect.CodeInvalidArgument, "the same idempotency key")

	// On PublishEvent the event's key is the publish's key, shared with
	// the batches': k-a is a replay.
	single, err := c.PublishEvent(context.Background(), request(&pb.PublishEventRequest{Event: &pb.Event{EventType: "shop.a", IdempotencyKey: "k-a"}}, allToken))
	require.NoError(t, err)
	require.True(t, single.Msg.GetResult().GetReplayed())
	require.Equal(t, "true", single.Header().Get("idempotent-replayed"))
	req := request(&pb.PublishEventRequest{Event: &pb.Event{EventType: "shop.a", IdempotencyKey: "k-a"}}, allToken)
	req.Header().Set("idempotency-key", "k-a")
	_, err = c.PublishEvent(context.Background(), req)
	requireCode(t, err, connect.CodeInvalidArgument, "send one of them")
	require.Empty(t, received())
}
