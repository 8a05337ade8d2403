package delivery_test

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
	"github.com/heraldevents/herald/pubsubx/mem"
)

// TestPublishBatchKeepsOrder: the events of one batch reach a broker that
// keeps publish order (the in-memory broker) in batch order, so a single
// worker pulls them in that order; an invalid event in the middle fails
// alone, with its own result, and the events around it are published.
func TestPublishBatchKeepsOrder(t *testing.T) {
	t.Parallel()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	broker := mem.New(time.Hour)
	t.Cleanup(func() {
		require.NoError(t, broker.Close())
		require.NoError(t, coll.Close())
	})
	svc := delivery.New(delivery.Config{Broker: broker, Store: leasestore.New(coll, leasestore.Options{})})
	ctx := t.Context()
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	c, err := svc.CreateDestination(ctx, admin, leasestore.TypeDurableConsumer, nil)
	require.NoError(t, err)

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
