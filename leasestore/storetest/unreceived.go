package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var unreceivedCases = []conformanceCase{
	{"DeadLetter/Unreceived", testDLUnreceived},
}

// testDLUnreceived: events a consumer's subscription could not take go
// straight to the dead-letter queue (DeadLetterUnreceived): listed with
// their type, subject and reason, never delivered, the cursor untouched;
// written again they are not doubled; replayed they join the queue at its
// next position; for a consumer that is gone nothing is written.
func testDLUnreceived(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	at := b.clock.Now()
	first, second := cloudEvent("shop.order.placed", "/orders/1", at, 1), cloudEvent("shop.order.placed", "/orders/2", at, 2)
	events := []leasestore.Unreceived{{ID: "e-1", Body: first}, {ID: "e-2", Body: second}}
	require.NoError(t, b.store.DeadLetterUnreceived(b.ctx, q, events, leasestore.ReasonMaxLen))
	require.NoError(t, b.store.DeadLetterUnreceived(b.ctx, q, events[:1], leasestore.ReasonMaxLen), "written again")

	dls := b.deadLettersOf(t, q)
	require.Equal(t, []string{string(first), string(second)}, dlBodies(dls), "one copy each")
	for _, dl := range dls {
		require.Equal(t, leasestore.ReasonMaxLen, dl.Reason)
		require.Equal(t, q, dl.OriginQueue)
		require.Equal(t, "shop.order.placed", dl.EventType)
		require.Zero(t, dl.DeliveryCount, "never delivered")
		require.WithinDuration(t, at, dl.DeadLetteredAt, time.Second)
	}
	require.Equal(t, "/orders/1", dls[0].ResourceID)
	c := b.getC(t, q)
	require.Zero(t, c.Committed, "the events had no position: the cursor does not move")
	require.Zero(t, c.InFlight)

	// Replayed, an event joins the queue at its next position.
	out, err := b.store.ReplayDeadLetter(b.ctx, dls[1].ID)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayReplayed, out)
	b.attach(t, q, "s1")
	src := NewScriptedSource([]byte("new"))
	ls := b.pullEvents(t, q, "s1", 2, src)
	require.Equal(t, []string{string(second), "new"}, eventBodies(ls))
	require.Equal(t, []int64{1, 2}, starts(ls))
	require.Equal(t, []string{string(first)}, dlBodies(b.deadLettersOf(t, q)))
	require.NoError(t, b.store.DiscardDeadLetter(b.ctx, dls[0].ID))
	require.Empty(t, b.deadLettersOf(t, q))

	err = b.store.DeadLetterUnreceived(b.ctx, "storetest-gone-"+uuid.NewString(), events, leasestore.ReasonMaxLen)
	requireCode(t, herr.NotFound, err)
	requireCode(t, herr.InvalidArgument, b.store.DeadLetterUnreceived(b.ctx, q, events, "SOMETHING"))
	requireCode(t, herr.InvalidArgument, b.store.DeadLetterUnreceived(b.ctx, q, []leasestore.Unreceived{{Body: first}}, leasestore.ReasonMaxLen))
	require.Empty(t, b.deadLettersOf(t, q), "a refused call writes nothing")
}
