package delivery_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// TestStreamUpdateFilters: an open non-durable stream moves its queue's
// filters compare-and-set; its source judges what it takes from the
// broker by the new filters at once; an event leased under the old
// filters is still delivered (and redelivered after a nack).
func TestStreamUpdateFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{streams: delivery.StreamConfig{Batch: 1}})
	ctx := t.Context()
	oldGroups := filter.Groups{{EventType: "a.b"}}
	newGroups := filter.Groups{{EventType: "c.d"}}
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.NonDurable, FilterGroups: oldGroups})
	require.NoError(t, err)
	defer st.Close(ctx)
	b.publish(t, "a.b", 0, 2) // both at the broker; Batch 1 leases only 0
	d0 := next(t, st)[0]
	require.Equal(t, 0, nOf(t, d0))

	// A previous_filter_groups that is not the queue's changes nothing.
	err = st.UpdateFilters(ctx, filter.Groups{{EventType: "x.y"}}, newGroups)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%v", err)
	require.Contains(t, herr.MessageOf(err), "previous_filter_groups")
	c, err := b.store.GetConsumer(ctx, st.QueueID())
	require.NoError(t, err)
	require.True(t, delivery.SameGroups(oldGroups, c.Filters), "unchanged: %v", c.Filters)
	// Invalid groups name their field.
	err = st.UpdateFilters(ctx, oldGroups, filter.Groups{{EventType: "bad type!"}})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), "filter_groups")

	require.NoError(t, st.UpdateFilters(ctx, oldGroups, newGroups))
	require.NoError(t, st.UpdateFilters(ctx, oldGroups, newGroups), "the queue has them already: a retry succeeds")
	c, err = b.store.GetConsumer(ctx, st.QueueID())
	require.NoError(t, err)
	require.True(t, delivery.SameGroups(newGroups, c.Filters), "moved: %v", c.Filters)

	// Event 0 was leased under the old filters: a nack hands it back and
	// it is delivered again, not re-judged.
	_, err = st.Nack(ctx, d0.Tag)
	require.NoError(t, err)
	again := next(t, st)[0]
	require.Equal(t, 0, nOf(t, again))
	require.EqualValues(t, 2, again.DeliveryCount)
	rep, err := st.Ack(ctx, again.Tag)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Acked)

	// Event 1 waits at the broker under the old filters: the stream's
	// source now drops it, and delivers the new filters' event 2.
	b.publish(t, "c.d", 2, 1)
	ds := next(t, st)
	require.Len(t, ds, 1)
	require.Equal(t, 2, nOf(t, ds[0]))
	require.Equal(t, "c.d", ds[0].Event.EventType)

	// Back to every event (no groups) with the right previous.
	require.NoError(t, st.UpdateFilters(ctx, newGroups, nil))
	b.publish(t, "e.f", 3, 1)
	require.Equal(t, 3, nOf(t, next(t, st)[0]))
}

// TestStreamUpdateFiltersErrors: a durable stream, a closed stream and a
// queue that is gone refuse the update.
func TestStreamUpdateFiltersErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	durable, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer durable.Close(ctx)
	err = durable.UpdateFilters(ctx, nil, filter.Groups{{EventType: "a.b"}})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), "UpdateDurableQueue")

	nd, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.NonDurable})
	require.NoError(t, err)
	_, err = b.store.DeleteConsumer(ctx, nd.QueueID())
	require.NoError(t, err)
	err = nd.UpdateFilters(ctx, nil, filter.Groups{{EventType: "a.b"}})
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	require.NoError(t, nd.Close(ctx))
	err = nd.UpdateFilters(ctx, nil, filter.Groups{{EventType: "a.b"}})
	require.Equal(t, herr.Canceled, herr.CodeOf(err), "%v", err)
}
