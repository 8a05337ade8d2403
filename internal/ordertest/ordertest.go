// Package ordertest holds the end-to-end check that a batch publish keeps
// its order, which every broker that keeps publish order runs (the
// in-memory broker in package delivery, RabbitMQ and NATS JetStream in
// their driver packages, against the real servers).
package ordertest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// PublishBatchKeepsOrder publishes one batch of 300 events through a
// delivery.Service on broker, with an invalid event in the middle, and
// checks that the invalid one fails alone with its own result while the
// others are published, and that a single worker of a durable consumer
// pulls the published ones in batch order. broker must keep publish order
// (pubsubx.Broker.KeepsPublishOrder); the caller closes it.
func PublishBatchKeepsOrder(t *testing.T, broker *pubsubx.Broker) {
	t.Helper()
	require.True(t, broker.KeepsPublishOrder(), "the broker must keep publish order for this check")
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	svc := delivery.New(delivery.Config{Broker: broker, Store: leasestore.New(coll, leasestore.Options{}), ReceiveWait: time.Second})
	ctx := t.Context()
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	c, err := svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.DeleteDestination(t.Context(), admin, c.ID) })

	const n, bad = 300, 137
	events := make([]delivery.Event, n)
	for i := range events {
		events[i] = delivery.Event{EventType: "orders.placed", Message: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))}
	}
	events[bad].EventType = "not a valid type!"
	results := svc.PublishBatch(ctx, admin, events)
	require.Len(t, results, n)
	var want []string
	for i, r := range results {
		if i == bad {
			require.Equal(t, herr.InvalidArgument, herr.CodeOf(r.Err), "the invalid event fails alone: %v", r.Err)
			require.Nil(t, r.Published)
			continue
		}
		require.NoError(t, r.Err, "event %d", i)
		want = append(want, r.Published.ID)
	}

	var got []string
	for len(got) < len(want) {
		l, err := svc.Pull(ctx, admin, delivery.PullRequest{Destination: c.ID, Worker: "w1", Limit: 7, Visibility: time.Minute})
		require.NoError(t, err)
		require.NotNil(t, l, "events stopped arriving after %d of %d", len(got), len(want))
		require.NotEmpty(t, l.Events, "events stopped arriving after %d of %d", len(got), len(want))
		for _, raw := range l.Events {
			var e struct{ ID string }
			require.NoError(t, json.Unmarshal(raw, &e))
			got = append(got, e.ID)
		}
		_, err = svc.Acknowledge(ctx, admin, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
		require.NoError(t, err)
	}
	require.Equal(t, want, got, "a single worker should receive the batch in batch order")
}
