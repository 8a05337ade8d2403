package delivery_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/logredact"
	"github.com/heraldevents/herald/leasestore"
)

// TestNonDurableQueueOwner is the case: bob holds alice's
// reconnect token. He may resume her queue (clients share a token to split
// its events) but not re-filter it, neither on reconnect (a stream, a
// stateless session) nor on an open stream: 403, nothing changed, and
// alice then receives every one of her ten events. alice and an
// administrator (manage:destinations) may re-filter it.
func TestNonDurableQueueOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	alice := &auth.Principal{ID: "alice", Permissions: []string{"receive:alice.*"}}
	bob := &auth.Principal{ID: "bob", Permissions: []string{"receive:*"}}
	admin := &auth.Principal{ID: "ops", Permissions: []string{auth.PermManageDestinations, "receive:*"}}
	mine, theirs := filter.Groups{{EventType: "alice.x"}}, filter.Groups{{EventType: "bob.x"}}

	st, err := b.svc.OpenStream(ctx, alice, delivery.StreamRequest{Kind: delivery.NonDurable, FilterGroups: mine})
	require.NoError(t, err)
	token := st.QueueID()
	require.True(t, logredact.IsToken(token), "the loggers recognize the reconnect tokens issued")
	c, err := b.store.GetConsumer(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "alice", c.Owner, "the creating principal is recorded")

	refilter := delivery.StreamRequest{
		Kind: delivery.NonDurable, ReconnectToken: token, FilterUpdate: true,
		PreviousFilterGroups: mine, FilterGroups: theirs,
	}
	denied := func(err error) {
		t.Helper()
		require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), "%v", err)
		require.NotContains(t, err.Error(), token, "the message quotes no token")
		require.NotContains(t, herr.MessageOf(err), "alice", "nor the owner")
		c, err := b.store.GetConsumer(ctx, token)
		require.NoError(t, err)
		require.True(t, delivery.SameGroups(mine, c.Filters), "filters unchanged: %v", c.Filters)
	}
	_, err = b.svc.OpenStream(ctx, bob, refilter)
	denied(err)
	_, err = b.svc.OpenSession(ctx, bob, refilter, 0)
	denied(err)
	// A no-op update (the queue has those filters) is refused too: only
	// the owner updates.
	noop := refilter
	noop.PreviousFilterGroups, noop.FilterGroups = theirs, mine
	_, err = b.svc.OpenStream(ctx, bob, noop)
	denied(err)

	// The token alone resumes, and an update on the resumed stream is
	// refused as well.
	bobs, err := b.svc.OpenStream(ctx, bob, delivery.StreamRequest{Kind: delivery.NonDurable, ReconnectToken: token})
	require.NoError(t, err)
	denied(bobs.UpdateFilters(ctx, mine, theirs))
	require.NoError(t, bobs.Close(ctx))

	// Nothing was lost: alice gets all ten of her events.
	b.publish(t, "alice.x", 0, 10)
	b.publish(t, "bob.x", 100, 3)
	var got []int
	for len(got) < 10 {
		for _, d := range next(t, st) {
			require.Equal(t, "alice.x", d.Event.EventType)
			got = append(got, nOf(t, d))
			_, err := st.Ack(ctx, d.Tag)
			require.NoError(t, err)
		}
	}
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
	require.NoError(t, st.Close(ctx))

	// The owner and an administrator may re-filter it.
	st, err = b.svc.OpenStream(ctx, alice, refilter)
	require.NoError(t, err)
	require.NoError(t, st.UpdateFilters(ctx, theirs, mine))
	require.NoError(t, st.Close(ctx))
	st, err = b.svc.OpenStream(ctx, admin, refilter)
	require.NoError(t, err)
	require.NoError(t, st.Close(ctx))
	c, err = b.store.GetConsumer(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "alice", c.Owner, "re-filtering does not change the owner")
	require.True(t, delivery.SameGroups(theirs, c.Filters))
}

// TestNonDurableQueueWithoutOwner: a queue from before owners were
// recorded has none; only an administrator may re-filter it.
func TestNonDurableQueueWithoutOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	groups := filter.Groups{{EventType: "a.b"}}
	require.NoError(t, b.broker.CreateSubscription(ctx, "herald-nd-legacy", groups))
	_, err := b.store.CreateConsumer(ctx, leasestore.Consumer{ID: "nd-legacy", Type: leasestore.TypeNonDurableQueue, Subscription: "herald-nd-legacy", Filters: groups})
	require.NoError(t, err)
	req := delivery.StreamRequest{
		Kind: delivery.NonDurable, ReconnectToken: "nd-legacy", FilterUpdate: true,
		PreviousFilterGroups: groups, FilterGroups: filter.Groups{{EventType: "c.d"}},
	}
	_, err = b.svc.OpenStream(ctx, &auth.Principal{ID: "", Permissions: []string{"receive:*"}}, req)
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), "an empty principal id owns nothing: %v", err)
	st, err := b.svc.OpenStream(ctx, root, req)
	require.NoError(t, err)
	require.NoError(t, st.Close(ctx))
}

// TestDurableQueuesHaveNoOwner: the notifications API makes durable-queue
// permissions deployment-wide, so another principal with
// create-durable-queues updates a queue it did not create, and one with
// delete-durable-queues deletes it.
func TestDurableQueuesHaveNoOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	alice := &auth.Principal{ID: "alice", Permissions: []string{auth.PermCreateDurableQueues}}
	bob := &auth.Principal{ID: "bob", Permissions: []string{auth.PermCreateDurableQueues, auth.PermDeleteDurableQueues}}
	groups := filter.Groups{{EventType: "a.b"}}
	_, err := b.svc.CreateQueue(ctx, alice, delivery.CreateQueueParams{ID: "shared-q", FilterGroups: groups})
	require.NoError(t, err)
	c, err := b.store.GetConsumer(ctx, "shared-q")
	require.NoError(t, err)
	require.Empty(t, c.Owner, "a durable queue records no owner")
	require.NoError(t, b.svc.UpdateQueueFilters(ctx, bob, "shared-q", groups, filter.Groups{{EventType: "c.d"}}))
	require.NoError(t, b.svc.DeleteQueue(ctx, bob, "shared-q"))
}
