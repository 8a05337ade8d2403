package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

var deadLetterCases = []conformanceCase{
	{"DeadLetter/DeliveryLimitOnStream", testDLDeliveryLimitStream},
	{"DeadLetter/DeliveryLimitOnBatchPull", testDLDeliveryLimitBatch},
	{"DeadLetter/DeliveryLimitAfterExpiry", testDLDeliveryLimitExpiry},
	{"DeadLetter/WrittenBeforeRemoval", testDLWrittenBeforeRemoval},
	{"DeadLetter/NeverNeither", testDLNeverNeither},
	{"DeadLetter/ActOnWhileFinishing", testDLActWhileFinishing},
	{"DeadLetter/ListStableOrder", testDLList},
	{"DeadLetter/Replay", testDLReplay},
	{"DeadLetter/ReplayOriginDeleted", testDLReplayOriginDeleted},
	{"DeadLetter/ReplayFailedLeavesCopy", testDLReplayFailed},
	{"DeadLetter/Discard", testDLDiscard},
	{"DeadLetter/MessageTTL", testDLMessageTTL},
	{"DeadLetter/MaxLength", testDLMaxLength},
}

// injectFault makes the store step at point fail for consumer until the
// test ends (or the returned function is called).
func injectFault(t testing.TB, point, consumer string) (stop func()) {
	restore := faults.Set(func(p, c string) error {
		if p == point && c == consumer {
			return herr.Wrap(herr.Unavailable, errInjected, "injected store failure")
		}
		return nil
	})
	t.Cleanup(restore)
	return restore
}

// nackUntilDead pulls the only event of q for session and nacks it until
// a pull no longer hands it out; it returns the deliveries.
func nackUntilDead(t testing.TB, b *bundle, q, session string, src leasestore.Source) []*leasestore.Lease {
	t.Helper()
	var seen []*leasestore.Lease
	for range 100 {
		ls := b.pullEvents(t, q, session, 1, src)
		if len(ls) == 0 {
			return seen
		}
		seen = append(seen, ls[0])
		b.settle(t, q, nil, refs(ls...))
	}
	t.Fatal("the event was never dead-lettered")
	return nil
}

func testDLDeliveryLimitStream(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 3}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	at := b.clock.Now().Add(-time.Minute)
	poison, next := cloudEvent("shop.order.placed", "/orders/1", at, 1), cloudEvent("shop.order.placed", "/orders/2", at, 2)
	src := NewScriptedSource(poison, next)
	b.attach(t, q, "s1")
	var attempts []int64
	for range 3 {
		ls := b.pullEvents(t, q, "s1", 1, src)
		require.Equal(t, string(poison), string(ls[0].Events[0]))
		attempts = append(attempts, ls[0].Attempt)
		b.settle(t, q, nil, refs(ls...))
	}
	require.Equal(t, []int64{1, 2, 3}, attempts)

	// A fourth delivery would pass the limit: the event is dead-lettered
	// and the pull goes on to the next one.
	ls := b.pullEvents(t, q, "s1", 1, src)
	require.Equal(t, []int64{2}, starts(ls))
	require.Equal(t, int64(1), ls[0].Attempt)
	dls := b.deadLetters(t)
	require.Len(t, dls, 1)
	d := dls[0]
	require.Equal(t, leasestore.ReasonDeliveryLimit, d.Reason)
	require.Equal(t, q, d.OriginQueue)
	require.Equal(t, int64(3), d.DeliveryCount, "delivered three times before")
	require.Equal(t, "shop.order.placed", d.EventType)
	require.Equal(t, "/orders/1", d.ResourceID)
	require.Equal(t, string(poison), string(d.Body))
	require.True(t, d.DeadLetteredAt.Equal(b.clock.Now()), "DeadLetteredAt %v, want %v", d.DeadLetteredAt, b.clock.Now())
	require.NotEmpty(t, d.ID)

	c := b.getC(t, q)
	require.Equal(t, int64(1), c.Committed, "the cursor moves past a dead-lettered event")
	require.Equal(t, int64(1), c.InFlight)
	r := b.settle(t, q, refs(ls...), nil)
	require.Equal(t, int64(2), r.Committed)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)))
	require.Equal(t, 1, countRecords(t, b, "d:"), "one dead-letter record")
	requireSourceSane(t, src)
}

func testDLDeliveryLimitBatch(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 2}})
	all := bodies("b", 5)
	src := NewScriptedSource(all...)
	l := b.pull(t, "w1", 3, src)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l, leasestore.StatusFailed).Outcome)
	again := b.pull(t, "w2", 3, src)
	require.Equal(t, int64(2), again.Attempt)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, again, leasestore.StatusFailed).Outcome)

	// A third delivery would pass the limit of 2: the whole batch goes to
	// the dead-letter queue, one dead letter per event, and the pull hands
	// out new work.
	got := b.pull(t, "w3", 3, src)
	requireLease(t, got, 4, all[3:]...)
	dls := b.deadLettersOf(t, b.consumer)
	require.Equal(t, asStrings(all[:3]), dlBodies(dls))
	for _, d := range dls {
		require.Equal(t, leasestore.ReasonDeliveryLimit, d.Reason)
		require.Equal(t, int64(2), d.DeliveryCount)
		require.Empty(t, d.EventType, "not a CloudEvent: no type")
	}
	c := b.get(t)
	require.Equal(t, int64(3), c.Committed)
	require.Equal(t, int64(2), c.InFlight)
	// The failing worker's acknowledgement is stale now.
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, again, leasestore.StatusOK).Outcome)
	require.Equal(t, int64(5), b.ack(t, got, leasestore.StatusOK).Committed)
}

func testDLDeliveryLimitExpiry(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 1}})
	src := NewScriptedSource(bodies("e", 2)...)
	l := b.pull(t, "w1", 1, src)
	b.clock.Advance(visibility)
	// Expired once, at the limit of one delivery: dead-lettered at the next
	// pull, which goes on to new work.
	requireLease(t, b.pull(t, "w2", 1, src), 2, []byte("e-0002"))
	dls := b.deadLettersOf(t, b.consumer)
	require.Equal(t, []string{"e-0001"}, dlBodies(dls))
	require.Equal(t, int64(1), dls[0].DeliveryCount)
	// An ok for the expired lease arrives too late: the dead-letter queue
	// was given it.
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, l, leasestore.StatusOK).Outcome)
	require.Equal(t, int64(1), b.get(t).Committed)
}

// dyingSetup makes queue q whose only event is nacked at a delivery limit
// of 1, so the next pull dead-letters it.
func dyingSetup(t *testing.T, h Harness) (*bundle, string, *ScriptedSource, *leasestore.Lease) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 1}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource([]byte("poison"))
	b.attach(t, q, "s1")
	ls := b.pullEvents(t, q, "s1", 1, src)
	b.settle(t, q, nil, refs(ls...))
	return b, q, src, ls[0]
}

func testDLWrittenBeforeRemoval(t *testing.T, h Harness) {
	b, q, src, l := dyingSetup(t, h)
	stop := injectFault(t, faults.DeadLetterRemove, q)
	// The consumer write after the dead-letter write fails: the pull itself
	// succeeds (nothing to hand out), and the event is in both places.
	require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
	require.Equal(t, []string{"poison"}, dlBodies(b.deadLettersOf(t, q)), "the dead letter is written first")
	c := b.getC(t, q)
	require.Equal(t, int64(1), c.InFlight, "the consumer still holds the event")
	require.Zero(t, c.Committed, "the cursor has not passed it")
	// Nobody is handed it, and no generation can settle it any more: it
	// is the dead-letter queue's.
	require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
	for gen := l.Generation; gen <= l.Generation+2; gen++ {
		r := leasestore.EventRef{LeaseID: l.ID, Generation: gen}
		require.Equal(t, leasestore.SettleResult{Skipped: 2}, b.settle(t, q, []leasestore.EventRef{r}, []leasestore.EventRef{r}))
		a, err := b.store.Acknowledge(b.ctx, leasestore.AckParams{Consumer: q, LeaseID: l.ID, Generation: gen, Status: leasestore.StatusOK})
		require.NoError(t, err)
		require.Equal(t, leasestore.OutcomeStale, a.Outcome)
	}
	_, err := b.store.ExpireLeases(b.ctx, q)
	require.ErrorIs(t, err, errInjected, "the sweep reports that it could not finish")

	// Once the store works again, the next operation finishes the move,
	// without a second copy.
	stop()
	_, err = b.store.ExpireLeases(b.ctx, q)
	require.NoError(t, err)
	c = b.getC(t, q)
	require.Zero(t, c.InFlight)
	require.Equal(t, int64(1), c.Committed)
	require.Len(t, b.deadLettersOf(t, q), 1)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)))
}

func testDLNeverNeither(t *testing.T, h Harness) {
	b, q, src, _ := dyingSetup(t, h)
	stop := injectFault(t, faults.DeadLetterWrite, q)
	// The dead-letter write fails: the event stays in the consumer.
	require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
	require.Empty(t, b.deadLettersOf(t, q))
	c := b.getC(t, q)
	require.Equal(t, int64(1), c.InFlight, "never in neither place")
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(q)), "its payload is kept")

	stop()
	src.Add([]byte("next"))
	got := b.pullEvents(t, q, "s1", 1, src)
	require.Equal(t, []int64{2}, starts(got), "the next pull finishes the move and goes on")
	require.Equal(t, []string{"poison"}, dlBodies(b.deadLettersOf(t, q)))
	require.Equal(t, int64(1), b.getC(t, q).Committed)
}

// testDLActWhileFinishing: an operator replays or discards a dead letter
// whose move was interrupted (the origin still holds the event, marked).
// The move is finished first, so it cannot write the dead letter again
// afterwards.
func testDLActWhileFinishing(t *testing.T, h Harness) {
	for _, replay := range []bool{true, false} {
		b, q, src, _ := dyingSetup(t, h)
		stop := injectFault(t, faults.DeadLetterRemove, q)
		require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
		id := b.deadLettersOf(t, q)[0].ID
		if replay {
			out, err := b.store.ReplayDeadLetter(b.ctx, id)
			require.ErrorIs(t, err, errInjected, "the unfinished move fails again")
			require.Equal(t, leasestore.ReplayFailed, out)
		} else {
			require.ErrorIs(t, b.store.DiscardDeadLetter(b.ctx, id), errInjected)
		}
		require.Len(t, b.deadLettersOf(t, q), 1, "left in place")
		stop()

		if replay {
			out, err := b.store.ReplayDeadLetter(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, leasestore.ReplayReplayed, out)
		} else {
			require.NoError(t, b.store.DiscardDeadLetter(b.ctx, id))
		}
		c := b.getC(t, q)
		require.Equal(t, int64(1), c.Committed, "the move finished: the cursor passed the event")
		// Nothing brings the dead letter back.
		ls := b.pullEvents(t, q, "s1", 5, src)
		_, err := b.store.ExpireLeases(b.ctx, q)
		require.NoError(t, err)
		require.Empty(t, b.deadLettersOf(t, q))
		if replay {
			require.Equal(t, []string{"poison"}, eventBodies(ls), "replayed once")
			require.Equal(t, int64(1), b.getC(t, q).InFlight)
		} else {
			require.Empty(t, ls)
			require.Zero(t, b.getC(t, q).InFlight)
		}
	}
}

func testDLList(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 1}})
	src := NewScriptedSource(bodies("l", 6)...)
	// Three events dead-lettered at one moment, then two a second later.
	l := b.pull(t, "w", 3, src)
	b.ack(t, l, leasestore.StatusFailed)
	b.pull(t, "w", 2, src) // dead-letters 1–3, leases 4–5
	b.clock.Advance(time.Second)
	l = b.pull(t, "w", 2, src)
	b.ack(t, l, leasestore.StatusFailed)
	b.pull(t, "w", 2, src) // dead-letters 4–5, leases 6

	for _, limit := range []int{1, 2, 4, 5, 100} {
		var got []*leasestore.DeadLetter
		token := ""
		for {
			page, next, err := b.store.ListDeadLetters(b.ctx, limit, token)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), limit)
			got = append(got, page...)
			if next == "" {
				break
			}
			token = next
		}
		require.Equal(t, []string{"l-0001", "l-0002", "l-0003", "l-0004", "l-0005"}, dlBodies(got), "limit %d: by time, then id", limit)
		require.True(t, slices.IsSortedFunc(got, func(a, c *leasestore.DeadLetter) int {
			if c := a.DeadLetteredAt.Compare(c.DeadLetteredAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, c.ID)
		}))
	}

	// A page's token stays valid as the queue changes: a discarded dead
	// letter drops out, a newer one appears at the end.
	page, token, err := b.store.ListDeadLetters(b.ctx, 2, "")
	require.NoError(t, err)
	require.Equal(t, []string{"l-0001", "l-0002"}, dlBodies(page))
	all := b.deadLetters(t)
	require.NoError(t, b.store.DiscardDeadLetter(b.ctx, all[2].ID)) // l-0003
	b.clock.Advance(time.Second)
	l = b.pull(t, "w", 1, src) // the lease of 6, already held by w
	b.ack(t, l, leasestore.StatusFailed)
	require.Nil(t, b.pull(t, "w", 1, src)) // dead-letters 6
	var rest []*leasestore.DeadLetter
	for token != "" {
		page, token, err = b.store.ListDeadLetters(b.ctx, 2, token)
		require.NoError(t, err)
		rest = append(rest, page...)
	}
	require.Equal(t, []string{"l-0004", "l-0005", "l-0006"}, dlBodies(rest))

	_, _, err = b.store.ListDeadLetters(b.ctx, 0, "")
	requireCode(t, herr.InvalidArgument, err)
	for _, bad := range []string{"!", "bm90IGEgdG9rZW4", "MTIz"} {
		_, _, err = b.store.ListDeadLetters(b.ctx, 5, bad)
		requireCode(t, herr.InvalidArgument, err)
	}
}

func testDLReplay(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 2}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource([]byte("again"))
	b.attach(t, q, "s1")
	seen := nackUntilDead(t, b, q, "s1", src)
	require.Len(t, seen, 2, "delivered up to the limit")
	dls := b.deadLettersOf(t, q)
	require.Equal(t, []string{"again"}, dlBodies(dls))
	c := b.getC(t, q)
	require.Equal(t, int64(1), c.Committed)
	require.Zero(t, c.InFlight)

	out, err := b.store.ReplayDeadLetter(b.ctx, dls[0].ID)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayReplayed, out)
	require.Empty(t, b.deadLettersOf(t, q), "a replayed dead letter is removed")
	c = b.getC(t, q)
	require.Equal(t, int64(1), c.InFlight)
	require.Equal(t, int64(1), c.Requeued, "replayed as an event waiting for delivery")

	// Delivered again at the consumer's next position, ahead of new work,
	// with a fresh delivery budget.
	src.Add([]byte("other"))
	ls := b.pullEvents(t, q, "s1", 2, src)
	require.Equal(t, []string{"again", "other"}, eventBodies(ls))
	require.Equal(t, []int64{2, 3}, starts(ls))
	require.Equal(t, []int64{1, 1}, []int64{ls[0].Attempt, ls[1].Attempt}, "a fresh delivery budget")
	r := b.settle(t, q, refs(ls...), nil)
	require.Equal(t, int64(3), r.Committed)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)))

	_, err = b.store.ReplayDeadLetter(b.ctx, dls[0].ID)
	requireCode(t, herr.NotFound, err)
	_, err = b.store.ReplayDeadLetter(b.ctx, "no-such-"+uuid.NewString())
	requireCode(t, herr.NotFound, err)
}

func testDLReplayOriginDeleted(t *testing.T, h Harness) {
	b, q, src, _ := dyingSetup(t, h)
	require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
	dls := b.deadLettersOf(t, q)
	require.Len(t, dls, 1)
	_, err := b.store.DeleteConsumer(b.ctx, q)
	require.NoError(t, err)
	require.Len(t, b.deadLettersOf(t, q), 1, "deleting a queue leaves its dead letters")

	out, err := b.store.ReplayDeadLetter(b.ctx, dls[0].ID)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayOriginQueueDeleted, out)
	require.Len(t, b.deadLettersOf(t, q), 1, "the copy is left in place")
	_, err = b.store.GetConsumer(b.ctx, q)
	requireCode(t, herr.NotFound, err)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)), "nothing is left behind for the missing queue")

	// Re-created under the same id, the queue is a replay target again; its
	// own dead letters never collide with its predecessor's.
	_, err = b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: q, Type: leasestore.TypeDurableQueue, Subscription: "again"})
	require.NoError(t, err)
	b.attach(t, q, "s2")
	src2 := NewScriptedSource([]byte("poison-2"))
	ls := b.pullEvents(t, q, "s2", 1, src2)
	b.settle(t, q, nil, refs(ls...))
	require.Empty(t, b.pullEvents(t, q, "s2", 1, src2)) // dead-letters position 1 of the new queue
	require.ElementsMatch(t, []string{"poison", "poison-2"}, dlBodies(b.deadLettersOf(t, q)))

	out, err = b.store.ReplayDeadLetter(b.ctx, dls[0].ID)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayReplayed, out)
	ls = b.pullEvents(t, q, "s2", 1, src2)
	require.Equal(t, []string{"poison"}, eventBodies(ls))
	require.Equal(t, []int64{2}, starts(ls))
}

func testDLReplayFailed(t *testing.T, h Harness) {
	b, q, src, _ := dyingSetup(t, h)
	require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
	id := b.deadLettersOf(t, q)[0].ID

	stop := injectFault(t, faults.ReplayConsumerWrite, q)
	out, err := b.store.ReplayDeadLetter(b.ctx, id)
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, leasestore.ReplayFailed, out)
	require.Len(t, b.deadLettersOf(t, q), 1, "the copy is left in place")
	require.Zero(t, b.getC(t, q).InFlight, "and the queue did not get it")
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)), "nor the replay's payload")
	stop()

	stop = injectFault(t, faults.ReplayDelete, q)
	out, err = b.store.ReplayDeadLetter(b.ctx, id)
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, leasestore.ReplayFailed, out, "not confirmed until the copy is gone")
	require.Len(t, b.deadLettersOf(t, q), 1, "the copy is left in place")
	require.Equal(t, int64(1), b.getC(t, q).Requeued, "the queue has it already")
	stop()

	// Replaying again does not add it twice.
	out, err = b.store.ReplayDeadLetter(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayReplayed, out)
	require.Empty(t, b.deadLettersOf(t, q))
	c := b.getC(t, q)
	require.Equal(t, int64(1), c.InFlight, "one copy on the queue")
	ls := b.pullEvents(t, q, "s1", 5, src)
	require.Equal(t, []string{"poison"}, eventBodies(ls))
}

func testDLDiscard(t *testing.T, h Harness) {
	b, q, src, _ := dyingSetup(t, h)
	require.Empty(t, b.pullEvents(t, q, "s1", 1, src))
	id := b.deadLettersOf(t, q)[0].ID
	require.NoError(t, b.store.DiscardDeadLetter(b.ctx, id))
	require.Empty(t, b.deadLetters(t))
	requireCode(t, herr.NotFound, b.store.DiscardDeadLetter(b.ctx, id))
	_, err := b.store.ReplayDeadLetter(b.ctx, id)
	requireCode(t, herr.NotFound, err)
	require.Equal(t, int64(1), b.getC(t, q).Committed, "discarding does not bring the event back")
}

func testDLMessageTTL(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const ttl = time.Minute
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) { c.MessageTTL = ttl })
	now := b.clock.Now()
	// Attached for longer than the test moves the clock.
	require.NoError(t, b.store.Attach(b.ctx, q, "s1", time.Hour))
	src := NewScriptedSource()
	src.AddAt(now.Add(-ttl), []byte("stale"))                // exactly the TTL old
	src.AddAt(now.Add(-ttl+time.Second), []byte("fresh"))    // a second younger
	src.Add([]byte("ageless"))                               // no publish time known
	src.Add(cloudEvent("a.b", "", now.Add(-2*ttl), 4))       // aged by its publishedat
	src.Add(cloudEvent("a.b", "", now.Add(-time.Second), 5)) // young by its publishedat

	ls := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []int64{2, 3, 5}, starts(ls), "events at least the TTL old are not handed out")
	require.Equal(t, "fresh", string(ls[0].Events[0]))
	dls := b.deadLettersOf(t, q)
	require.Equal(t, []string{"stale", string(cloudEvent("a.b", "", now.Add(-2*ttl), 4))}, dlBodies(dls))
	for _, d := range dls {
		require.Equal(t, leasestore.ReasonExpired, d.Reason)
		require.Zero(t, d.DeliveryCount, "never delivered")
	}
	require.Equal(t, int64(1), b.getC(t, q).Committed)

	// Leased events are not aged; on the way out again they are.
	b.clock.Advance(time.Second)
	b.settle(t, q, nil, refs(ls...))
	again := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"ageless", eventBodies(ls)[2]}, eventBodies(again), "fresh expired while leased and was dead-lettered on redelivery")
	dls = b.deadLettersOf(t, q)
	require.Len(t, dls, 3)
	require.Equal(t, "fresh", string(dls[1].Body))
	require.Equal(t, int64(1), dls[1].DeliveryCount)

	// A replay restarts the TTL clock.
	out, err := b.store.ReplayDeadLetter(b.ctx, dls[0].ID)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayReplayed, out)
	b.clock.Advance(ttl - time.Millisecond)
	got := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"stale"}, eventBodies(got), "younger than the TTL since its replay")
	r := b.settle(t, q, refs(append(again, got...)...), nil)
	require.Equal(t, int64(6), r.Committed)
	requireSourceSane(t, src)
}

func testDLMaxLength(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) { c.MaxLength = 3 })
	all := bodies("m", 5)
	src := NewScriptedSource(all[:4]...)
	b.attach(t, q, "s1")
	held := b.pullEvents(t, q, "s1", 5, src)
	require.Equal(t, []int64{1, 2, 3}, starts(held), "the queue never holds more than MaxLength")
	receives := src.Counts().Receives
	require.Empty(t, b.pullEvents(t, q, "s1", 5, src), "full of leased events: nothing taken in")
	require.Equal(t, receives, src.Counts().Receives, "and the source is not asked")

	// The session leaves: 3 events wait. The next pull takes in one new
	// event, which makes 4: the oldest waiting event is evicted.
	require.NoError(t, b.store.Detach(b.ctx, q, "s1"))
	src.Add(all[4])
	b.attach(t, q, "s2")
	got := b.pullEvents(t, q, "s2", 1, src)
	require.Equal(t, []string{"m-0002"}, eventBodies(got))
	require.Equal(t, []string{"m-0001"}, dlBodies(b.deadLettersOf(t, q)))
	c := b.getC(t, q)
	require.Equal(t, int64(3), c.InFlight, "m-0002 leased, m-0003 and m-0004 waiting")
	require.Equal(t, int64(2), c.Requeued)

	got2 := b.pullEvents(t, q, "s2", 1, src)
	require.Equal(t, []string{"m-0004"}, eventBodies(got2), "m-0005 came in, m-0003 was evicted")
	require.Equal(t, int64(1), got2[0].Attempt, "taken in while others waited, delivered now for the first time")
	dls := b.deadLettersOf(t, q)
	require.Equal(t, []string{"m-0001", "m-0003"}, dlBodies(dls))
	require.Equal(t, []int64{1, 1}, []int64{dls[0].DeliveryCount, dls[1].DeliveryCount})
	for _, d := range dls {
		require.Equal(t, leasestore.ReasonMaxLen, d.Reason)
	}
	require.Equal(t, int64(3), b.getC(t, q).InFlight)

	r := b.settle(t, q, refs(got[0], got2[0]), nil)
	require.Equal(t, int64(4), r.Committed)
	last := b.pullEvents(t, q, "s2", 5, src)
	require.Equal(t, []string{"m-0005"}, eventBodies(last))
	require.Equal(t, int64(5), b.settle(t, q, refs(last...), nil).Committed)
	require.Equal(t, 0, src.Counts().Available)
	requireSourceSane(t, src)
}
