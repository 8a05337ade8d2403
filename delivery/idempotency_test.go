package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// TestUnkeyedPublishTouchesNoStore: a publish without an idempotency key
// reads and writes nothing in the lease store, single or batch; a keyed
// one writes its key twice (claim, result) and reads nothing, and its
// repeat reads once and publishes nothing.
func TestUnkeyedPublishTouchesNoStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	broker := mem.New(time.Hour)
	t.Cleanup(func() { require.NoError(t, broker.Close()) })
	require.NoError(t, broker.CreateSubscription(ctx, "watch", nil))
	inner, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	meter := storetest.NewMeter()
	coll := meter.Wrap(inner)
	t.Cleanup(func() { _ = coll.Close() })
	svc := delivery.New(delivery.Config{Broker: broker, Store: leasestore.New(coll, leasestore.Options{})})
	p := &auth.Principal{ID: "pub", Permissions: []string{auth.PermAll}}
	e := delivery.Event{EventType: "orders.created"}

	o, replayed, err := svc.PublishOutcomeKeyed(ctx, p, "", e)
	require.NoError(t, err)
	require.True(t, o.Success())
	require.False(t, replayed)
	outs, replayed, err := svc.PublishItemsKeyed(ctx, p, "", []delivery.BatchItem{{Event: e}, {Event: e}})
	require.NoError(t, err)
	require.Len(t, outs, 2)
	require.False(t, replayed)
	r := meter.Report()
	require.Zero(t, r.Writes+r.Reads+r.Queries, "no key, no store call")

	first, _, err := svc.PublishOutcomeKeyed(ctx, p, "k1", e)
	require.NoError(t, err)
	r = meter.Report()
	require.Equal(t, int64(2), r.Writes)
	require.Zero(t, r.Reads)
	meter.Reset()
	again, replayed, err := svc.PublishOutcomeKeyed(ctx, p, "k1", e)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Published.ID, again.Published.ID, "the first event id")
	require.True(t, first.Published.PublishedAt.Equal(again.Published.PublishedAt))

	msgs, err := broker.Receive(ctx, "watch", pubsubx.ReceiveParams{Max: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 4, "three unkeyed events and one keyed, once")
}
