package delivery_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// TestPullWithholdsUnreadableEvents checks seed 000 pulls against the
// caller's receive rights: an event it may not read is withheld (nil in
// the lease, its position kept) and settled with the lease; a lease of
// nothing readable is acknowledged and the next one pulled.
func TestPullWithholdsUnreadableEvents(t *testing.T) {
	t.Parallel()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	broker := mem.New(time.Hour)
	t.Cleanup(func() {
		require.NoError(t, broker.Close())
		require.NoError(t, coll.Close())
	})
	store := leasestore.New(coll, leasestore.Options{})
	svc := delivery.New(delivery.Config{Broker: broker, Store: store})
	ctx := t.Context()
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	orders := &auth.Principal{ID: "orders", Permissions: []string{auth.PermReadEvents, "receive:orders.*"}}
	c, err := svc.CreateDestination(ctx, admin, leasestore.TypeDurableConsumer, nil)
	require.NoError(t, err)
	for _, typ := range []string{"users.a", "orders.a", "users.b", "users.c", "users.d", "orders.b"} {
		_, err := svc.Publish(ctx, admin, delivery.Event{EventType: typ, Message: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	pull := func(limit int) *leasestore.Lease {
		l, err := svc.Pull(ctx, orders, delivery.PullRequest{Destination: c.ID, Worker: "w", Limit: limit, Visibility: time.Minute})
		require.NoError(t, err)
		return l
	}
	l := pull(3)
	require.Len(t, l.Events, 3)
	require.Nil(t, l.Events[0])
	require.NotNil(t, l.Events[1])
	require.Nil(t, l.Events[2])
	require.Contains(t, string(l.Events[1]), `"type":"orders.a"`)
	res, err := svc.Acknowledge(ctx, orders, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Committed, "the withheld events were settled with the lease")

	// users.c and users.d make a lease of nothing readable: it is
	// acknowledged, and the pull answers with the next one.
	l = pull(2)
	require.Len(t, l.Events, 1)
	require.Contains(t, string(l.Events[0]), `"type":"orders.b"`)
	require.EqualValues(t, 6, l.Start)
	d, err := store.GetConsumer(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, d.Committed)

	// Caught up: nothing.
	_, err = svc.Acknowledge(ctx, orders, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Nil(t, pull(5))
}
