package grpcapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/grpcapi"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
)

// TestPublishIdempotencyKeyMetadata: the idempotency-key metadata makes a
// repeated gRPC publish answer the first result, marked
// idempotent-replayed, and publish nothing; another event under the key
// is INVALID_ARGUMENT.
func TestPublishIdempotencyKeyMetadata(t *testing.T) {
	t.Parallel()
	svc := inmem.New(t, inmem.Options{})
	dest, err := svc.CreateDestination(t.Context(), &auth.Principal{ID: "dev", Permissions: []string{auth.PermAll}},
		delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for _, m := range grpcapi.Mounts(svc.Service, auth.StaticTokens{allToken: {ID: "dev", Permissions: []string{auth.PermAll}}}, grpcapi.Services{Publisher: true}) {
		mux.Handle(m.Path, m.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newClient(srv.Client(), srv.URL)

	send := func(typ, key string) (*connect.Response[pb.PublishEventResponse], error) {
		req := request(&pb.PublishEventRequest{Event: &pb.Event{EventType: typ}}, allToken)
		req.Header().Set("idempotency-key", key)
		return c.PublishEvent(context.Background(), req)
	}
	first, err := send("shop.order.placed", "order-1")
	require.NoError(t, err)
	require.True(t, first.Msg.GetResult().GetSuccess())
	require.Empty(t, first.Header().Get("idempotent-replayed"))
	again, err := send("shop.order.placed", "order-1")
	require.NoError(t, err)
	require.Equal(t, "true", again.Header().Get("idempotent-replayed"))
	require.Equal(t, first.Msg.GetResult().GetEvent().GetOccurredAt().AsTime(), again.Msg.GetResult().GetEvent().GetOccurredAt().AsTime())

	_, err = send("shop.order.cancelled", "order-1")
	requireCode(t, err, connect.CodeInvalidArgument, "different request")
	_, err = send("shop.order.placed", "")
	requireCode(t, err, connect.CodeInvalidArgument, "empty")

	l, err := svc.Pull(t.Context(), &auth.Principal{ID: "dev", Permissions: []string{auth.PermAll}}, delivery.PullRequest{Destination: dest.ID, Worker: "w", Limit: 10, Visibility: 30e9})
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Len(t, l.Events, 1, "one event for the repeated key")
}
