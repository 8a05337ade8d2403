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

// TestPullWithholdsUnreadableEvents checks the durable-consumer API pulls
// against the caller's receive rights: a batch stops before the first
// event the caller may not read, and when that is the next event the pull
// is PermissionDenied with a Retry-After; the event waits, whole, for a
// worker that may read it, and nothing is committed by the one that may
// not.
func TestPullWithholdsUnreadableEvents(t *testing.T) {
	t.Parallel()
	svc := inmem.New(t, inmem.Options{AckDeadline: time.Hour})
	store := svc.Store
	ctx := t.Context()
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	orders := &auth.Principal{ID: "orders", Permissions: []string{auth.PermReadEvents, "receive:orders.*"}}
	c, err := svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	types := []string{"orders.a", "orders.b", "users.a", "orders.c"}
	for _, typ := range types {
		_, err := svc.Publish(ctx, admin, delivery.Event{EventType: typ, Message: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	pull := func(p *auth.Principal, limit int) (*leasestore.Lease, error) {
		return svc.Pull(ctx, p, delivery.PullRequest{Destination: c.ID, Worker: p.ID, Limit: limit, Visibility: time.Minute})
	}
	// orders.a and orders.b are readable: the batch stops before users.a.
	l, err := pull(orders, 10)
	require.NoError(t, err)
	require.Len(t, l.Events, 2)
	require.Contains(t, string(l.Events[1]), `"type":"orders.b"`)
	_, err = svc.Acknowledge(ctx, orders, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)

	// users.a is next: refused, as often as it is asked for.
	for range 3 {
		_, err = pull(orders, 2)
		require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), err)
		require.Contains(t, herr.MessageOf(err), `"users.a"`)
		after, ok := herr.RetryAfterOf(err)
		require.True(t, ok, "a refused pull says when to ask again")
		require.Equal(t, delivery.WithheldRetryAfter, after)
	}
	d, err := store.GetConsumer(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, d.Committed, "the refused worker committed nothing")
	require.Zero(t, d.InFlight, "nor took anything into the window")

	// The admin gets the rest, as a first delivery.
	l, err = pull(admin, 5)
	require.NoError(t, err)
	require.Len(t, l.Events, 2)
	require.Contains(t, string(l.Events[0]), `"type":"users.a"`)
	require.Contains(t, string(l.Events[1]), `"type":"orders.c"`)
	require.EqualValues(t, 1, l.Attempt, "refusals are not deliveries")
	res, err := svc.Acknowledge(ctx, admin, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.EqualValues(t, 4, res.Committed)
}

// TestWithheldPullsDeadLetterNothing is the case: a principal
// with read:events and receive:bob.* pulls a durable consumer holding
// three alice.x events more often than the delivery limit, on new events
// and on a failed lease. Nothing is dead-lettered, the cursor stays, and
// alice's pulls get her events with the delivery count they had.
func TestWithheldPullsDeadLetterNothing(t *testing.T) {
	t.Parallel()
	svc := inmem.New(t, inmem.Options{AckDeadline: time.Hour})
	ctx := t.Context()
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	alice := &auth.Principal{ID: "alice", Permissions: []string{auth.PermReadEvents, "receive:alice.*"}}
	bob := &auth.Principal{ID: "bob", Permissions: []string{auth.PermReadEvents, "receive:bob.*"}}
	c, err := svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	for range 3 {
		_, err := svc.Publish(ctx, admin, delivery.Event{EventType: "alice.x", Message: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	pull := func(p *auth.Principal) (*leasestore.Lease, error) {
		return svc.Pull(ctx, p, delivery.PullRequest{Destination: c.ID, Worker: p.ID, Limit: 20, Visibility: time.Minute})
	}
	bobPulls := func() {
		t.Helper()
		for range leasestore.DefaultDeliveryLimit + 5 {
			_, err := pull(bob)
			require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), "%v", err)
		}
		dls, _, err := svc.ListDeadLetters(ctx, admin, 10, "")
		require.NoError(t, err)
		require.Empty(t, dls, "nothing dead-lettered for bob's pulls")
		d, err := svc.Store.GetConsumer(ctx, c.ID)
		require.NoError(t, err)
		require.Zero(t, d.Committed, "the cursor did not pass alice's events")
	}

	bobPulls()
	l, err := pull(alice)
	require.NoError(t, err)
	require.Len(t, l.Events, 3)
	require.EqualValues(t, 1, l.Attempt)
	_, err = svc.Acknowledge(ctx, alice, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusFailed})
	require.NoError(t, err)

	bobPulls()
	again, err := pull(alice)
	require.NoError(t, err)
	require.Equal(t, l.ID, again.ID)
	require.EqualValues(t, 2, again.Attempt, "one delivery more: alice's failure, not bob's pulls")
	require.Equal(t, l.Generation+1, again.Generation)
	res, err := svc.Acknowledge(ctx, alice, leasestore.AckParams{Consumer: c.ID, LeaseID: again.ID, Generation: again.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeCommitted, res.Outcome)
	require.EqualValues(t, 3, res.Committed)
}
