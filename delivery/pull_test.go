package delivery_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
)

// TestPullWithholdsUnreadableEvents checks the durable-consumer API pulls against the
// caller's receive rights: a lease holding an event the caller may not
// read is handed back and the pull is PermissionDenied; the events wait,
// whole, for a worker that may read them, and nothing is committed by the
// one that may not.
func TestPullWithholdsUnreadableEvents(t *testing.T) {
	t.Parallel()
	svc := inmem.New(t, inmem.Options{AckDeadline: time.Hour})
	store := svc.Store
	ctx := t.Context()
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	orders := &auth.Principal{ID: "orders", Permissions: []string{auth.PermReadEvents, "receive:orders.*"}}
	c, err := svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	types := []string{"orders.a", "users.a", "orders.b"}
	for _, typ := range types {
		_, err := svc.Publish(ctx, admin, delivery.Event{EventType: typ, Message: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	pull := func(p *auth.Principal, limit int) (*leasestore.Lease, error) {
		return svc.Pull(ctx, p, delivery.PullRequest{Destination: c.ID, Worker: p.ID, Limit: limit, Visibility: time.Minute})
	}
	// orders.a alone is readable.
	l, err := pull(orders, 1)
	require.NoError(t, err)
	require.Contains(t, string(l.Events[0]), `"type":"orders.a"`)
	_, err = svc.Acknowledge(ctx, orders, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)

	// users.a is next: refused, as often as it is asked for.
	for range 3 {
		_, err = pull(orders, 2)
		require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), err)
		require.Contains(t, herr.MessageOf(err), `"users.a"`)
	}
	d, err := store.GetConsumer(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, d.Committed, "the refused worker committed nothing")

	// The admin gets both, as a redelivery.
	l, err = pull(admin, 5)
	require.NoError(t, err)
	require.Len(t, l.Events, 2)
	require.Contains(t, string(l.Events[0]), `"type":"users.a"`)
	require.Contains(t, string(l.Events[1]), `"type":"orders.b"`)
	require.EqualValues(t, 4, l.Attempt, "each refusal counted as a delivery")
	res, err := svc.Acknowledge(ctx, admin, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Committed)
}
