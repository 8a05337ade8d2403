package drivertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// requireCode requires err to carry code.
func requireCode(t testing.TB, want herr.Code, err error, call string) {
	t.Helper()
	require.Error(t, err, "%s: want a %s error, got nil", call, want)
	require.Equal(t, want.String(), herr.CodeOf(err).String(), "%s: wrong code for error %v", call, err)
}

// testCreateAtHead: a subscription delivers only what is sent after
// CreateSubscription returned (*pubsubx.Broker.CreateSubscription).
func testCreateAtHead(t *testing.T, f *fixture) {
	b := f.broker()
	before := f.messages(3, "herald.test", "/before")
	f.send(b, before...)
	sub := f.subscribe(b, "head", nil)
	after := f.messages(2, "herald.test", "/after")
	f.send(b, after...)
	f.receiveExactly(b, sub, after...)
	f.expectEmpty(b, sub)
}

// testCreateExisting: creating a name that exists is AlreadyExists, and
// the failed call leaves the existing subscription and its messages alone.
func testCreateExisting(t *testing.T, f *fixture) {
	b := f.broker()
	groups := filter.Groups{{EventType: "herald.test"}}
	sub := f.subscribe(b, "exists", groups)
	held := f.message("herald.test", "/held")
	f.send(b, held)

	requireCode(t, herr.AlreadyExists, b.CreateSubscription(f.ctx, sub, groups), "CreateSubscription (same filter)")
	requireCode(t, herr.AlreadyExists, b.CreateSubscription(f.ctx, sub, nil), "CreateSubscription (other filter)")

	// The original filter still applies and the held message survived.
	other := f.message("herald.other", "/held")
	later := f.message("herald.test", "/later")
	f.send(b, other, later)
	want := []*pubsubx.Message{held, later}
	got := f.receiveAll(b, sub, want)
	requireMatched(t, groups, got, want)
}

// testUnknownSubscription: every call naming a subscription that does not
// exist is NotFound.
func testUnknownSubscription(t *testing.T, f *fixture) {
	b := f.broker()
	// A real message with a real handle, so that Ack and Nack reach the
	// broker instead of being short-circuited as empty.
	real := f.subscribe(b, "real", nil)
	m := f.message("herald.test", "/x")
	f.send(b, m)
	held := f.receiveUntil(b, real, 1, hasCount(1))

	missing := subName("missing")
	_, err := b.Receive(f.ctx, missing, pubsubx.ReceiveParams{Max: 10, Wait: quietWait})
	requireCode(t, herr.NotFound, err, "Receive")
	requireCode(t, herr.NotFound, b.Ack(f.ctx, missing, held), "Ack")
	requireCode(t, herr.NotFound, b.Nack(f.ctx, missing, held), "Nack")
	requireCode(t, herr.NotFound, b.UpdateSubscription(f.ctx, missing, nil), "UpdateSubscription")
	requireCode(t, herr.NotFound, b.DeleteSubscription(f.ctx, missing), "DeleteSubscription")

	// The failed calls did not touch the real subscription.
	f.ack(b, real, held)
	f.expectEmpty(b, real)
}

// testDelete: a deleted subscription is gone with its messages: calls on
// it are NotFound, and re-creating the name starts empty at the head.
func testDelete(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "delete", nil)
	f.send(b, f.messages(3, "herald.test", "/gone")...)
	held := f.receiveUntil(b, sub, 1, hasCount(1))

	require.NoError(t, b.DeleteSubscription(f.ctx, sub), "DeleteSubscription")
	_, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: quietWait})
	requireCode(t, herr.NotFound, err, "Receive after delete")
	requireCode(t, herr.NotFound, b.Ack(f.ctx, sub, held), "Ack after delete")
	requireCode(t, herr.NotFound, b.Nack(f.ctx, sub, held), "Nack after delete")
	requireCode(t, herr.NotFound, b.UpdateSubscription(f.ctx, sub, nil), "UpdateSubscription after delete")
	requireCode(t, herr.NotFound, b.DeleteSubscription(f.ctx, sub), "DeleteSubscription twice")

	// Sent while the name did not exist: must not reach the new one either.
	f.send(b, f.message("herald.test", "/between"))
	require.NoError(t, b.CreateSubscription(f.ctx, sub, nil), "re-creating a deleted name")
	f.expectEmpty(b, sub)
	fresh := f.message("herald.test", "/fresh")
	f.send(b, fresh)
	f.receiveExactly(b, sub, fresh)
	f.expectEmpty(b, sub)
}

// testUpdateKeepsHeldMessages: UpdateSubscription changes the filter for
// what is sent afterwards without losing what the subscription already
// holds: messages that passed the old filter, waiting or in flight, are
// still delivered.
func testUpdateKeepsHeldMessages(t *testing.T, f *fixture) {
	b := f.broker()
	oldGroups := filter.Groups{group("herald.a")}
	newGroups := filter.Groups{group("herald.b")}
	sub := f.subscribe(b, "update", oldGroups)
	heldA := f.messages(2, "herald.a", "/old")
	droppedB := f.message("herald.b", "/old") // failed the old filter
	f.send(b, append(heldA, droppedB)...)
	inFlight := f.receiveUntil(b, sub, 1, hasCount(1))

	require.NoError(t, b.UpdateSubscription(f.ctx, sub, newGroups), "UpdateSubscription")
	require.NoError(t, b.Nack(f.ctx, sub, inFlight), "Nack of a message received before the update")
	laterA := f.message("herald.a", "/new") // fails the new filter
	laterB := f.message("herald.b", "/new")
	f.send(b, laterA, laterB)

	want := append(append([]*pubsubx.Message{}, heldA...), laterB)
	got := f.receiveAll(b, sub, want)
	sent := distinct([]*pubsubx.Message{heldA[0], heldA[1], droppedB, laterA, laterB})
	for id := range got {
		require.Contains(t, sent, id, "delivered a message that was never sent")
	}
	t.Logf("delivered %d: %d held under the old filter, 1 under the new one, %d more the broker did not filter", len(got), len(heldA), len(got)-len(want))
}
