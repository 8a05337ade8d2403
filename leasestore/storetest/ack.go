package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var ackCases = []conformanceCase{
	{"Ack/OKCommits", testAckCommits},
	{"Ack/CursorContiguous", testAckCursorContiguous},
	{"Ack/FailedRequeues", testAckFailedRequeues},
	{"Ack/FailedTwice", testAckFailedTwice},
	{"Ack/OKAgainAnswersCommitted", testAckOKAgain},
	{"Ack/RepeatAfterOthersSettled", testAckRepeatLater},
	{"Ack/RepeatFromAnotherClient", testAckRepeatOtherClient},
	{"Ack/RepeatRemembered", testAckRepeatRemembered},
	{"Ack/RepeatOfSplitLease", testAckRepeatSplit},
	{"Ack/RepeatOfALateBatch", testAckRepeatLate},
	{"Ack/OlderGenerationIsStale", testAckOlderGeneration},
	{"Ack/AfterExpiryBeforeReclaim", testAckAfterExpiry},
	{"Ack/UnknownLeaseIsStale", testAckUnknownLease},
	{"Ack/InvalidStatus", testAckInvalidStatus},
}

func testAckCommits(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("k", 3)...)
	l := b.pull(t, "w", 3, src)
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(3), r.Committed, "the cursor is the last position of the lease")
	c := b.get(t)
	require.Equal(t, int64(3), c.Committed)
	require.Zero(t, c.InFlight)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(b.consumer)), "a committed lease's payload is removed")

	// The worker's next pull is new work, not its committed lease.
	src.Add([]byte("k-0004"))
	requireLease(t, b.pull(t, "w", 3, src), 4, []byte("k-0004"))
}

func testAckCursorContiguous(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("c", 6)...)
	l1 := b.pull(t, "w1", 2, src) // 1–2
	l2 := b.pull(t, "w2", 3, src) // 3–5
	l3 := b.pull(t, "w3", 1, src) // 6

	r := b.ack(t, l2, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Zero(t, r.Committed, "the cursor must not pass unacknowledged lease 1")
	r = b.ack(t, l3, leasestore.StatusOK)
	require.Zero(t, r.Committed, "still held back by lease 1")
	require.Zero(t, b.get(t).Committed)
	require.Equal(t, int64(2), b.get(t).InFlight)

	// A failed lease 1 holds the cursor back too.
	r = b.ack(t, l1, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeRequeued, r.Outcome)
	require.Zero(t, r.Committed)

	again := b.pull(t, "w4", 2, src)
	require.Equal(t, l1.ID, again.ID)
	r = b.ack(t, again, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(6), r.Committed, "lease 1 closes the gap: the cursor jumps over 2 and 3")
	require.Equal(t, int64(6), b.get(t).Committed)
	require.Zero(t, b.get(t).InFlight)
}

func testAckFailedRequeues(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("f", 4)
	src := NewScriptedSource(all...)
	l := b.pull(t, "w1", 2, src)
	r := b.ack(t, l, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeRequeued, r.Outcome)
	require.Zero(t, r.Committed)
	require.Equal(t, int64(2), b.get(t).InFlight, "a requeued lease is still in flight")

	receives := src.Counts().Receives
	again := b.pull(t, "w2", 10, src)
	requireReclaimed(t, l, again, b.clock.Now().Add(visibility))
	require.Equal(t, receives, src.Counts().Receives, "a requeued lease goes before new work")
	requireLease(t, b.pull(t, "w3", 10, src), 3, all[2:]...)

	// The failing worker's next pull redelivers a failed lease too, to
	// whoever asks first; here it is the same worker.
	r = b.ack(t, again, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeRequeued, r.Outcome)
	requireReclaimed(t, again, b.pull(t, "w2", 10, src), b.clock.Now().Add(visibility))
}

func testAckFailedTwice(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("t", 1)...)
	l := b.pull(t, "w", 1, src)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l, leasestore.StatusFailed).Outcome)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l, leasestore.StatusFailed).Outcome,
		"a repeated failed for the same generation reads requeued again")
	// Failing twice did not requeue twice: the next delivery is one
	// generation and one attempt higher.
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

// testAckOKAgain: a repeated ok (a client retrying after losing the
// answer) answers committed, as the first did, with the cursor, and
// changes nothing; anything else for the committed lease is stale.
func testAckOKAgain(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("a", 2)...)
	l := b.pull(t, "w", 2, src)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	for range 3 {
		r := b.ack(t, l, leasestore.StatusOK)
		require.Equal(t, leasestore.OutcomeCommitted, r.Outcome, "a repeated ok answers as the first did")
		require.Equal(t, int64(2), r.Committed, "with the cursor")
	}
	r := b.ack(t, l, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome, "failed for a committed lease changes nothing")
	require.Equal(t, int64(2), r.Committed, "a stale outcome still reports the cursor")
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, l, leasestore.StatusRejected).Outcome)
	require.Equal(t, leasestore.OutcomeStale, b.ackGen(t, l.ID, l.Generation+1, leasestore.StatusOK).Outcome, "another generation is stale")
	require.Equal(t, int64(2), b.get(t).Committed)
	require.Zero(t, b.get(t).InFlight)
	require.Empty(t, b.deadLetters(t))
	require.Nil(t, b.pull(t, "w", 2, src), "nothing is redelivered")
}

// testAckRepeatLater: the repeat is remembered while new work is leased
// and settled (the head is rewritten, the committed block drops out of its
// index) and once the sweep has run; a stale ack of an older generation
// of a lease committed by someone else stays stale.
func testAckRepeatLater(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("l", 8)...)
	old := b.pull(t, "w1", 2, src)
	b.clock.Advance(visibility)
	cur := b.pull(t, "w2", 2, src) // the same lease, generation 1
	requireReclaimed(t, old, cur, b.clock.Now().Add(visibility))
	first := b.pull(t, "w3", 2, src)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, first, leasestore.StatusOK).Outcome)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, cur, leasestore.StatusOK).Outcome)
	for range 2 {
		l := b.pull(t, "w4", 2, src)
		require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	}
	_, err := b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)
	b.clock.Advance(leasestore.RememberAcks - visibility - time.Second)
	_, err = b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)

	r := b.ack(t, first, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(8), r.Committed)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, cur, leasestore.StatusOK).Outcome)
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, old, leasestore.StatusOK).Outcome,
		"generation 0 was handed to another worker before it was acknowledged: nothing of it was committed")
}

// testAckRepeatOtherClient: the memory is in the store, not in the Store
// that applied the acknowledgement.
func testAckRepeatOtherClient(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	src := NewScriptedSource(bodies("o", 2)...)
	l := b.pull(t, "w", 2, src)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	r, err := b.stores[1].Acknowledge(b.ctx, leasestore.AckParams{Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(2), r.Committed)
}

// testAckRepeatRemembered: how long a repeat is answered as the first:
// RememberAcks after its block was settled, unless MaxRememberedBlocks
// blocks settled after it are remembered first; the records kept for it
// are then deleted, and a consumer's deletion takes the kept ones along.
func testAckRepeatRemembered(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("m", leasestore.MaxRememberedBlocks+3)...)
	settle := func() *leasestore.Lease {
		t.Helper()
		l := b.pull(t, "w", 1, src)
		require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
		return l
	}
	sweep := func() {
		t.Helper()
		_, err := b.store.ExpireLeases(b.ctx, b.consumer)
		require.NoError(t, err)
	}
	repeat := func(l *leasestore.Lease) leasestore.Outcome {
		t.Helper()
		return b.ack(t, l, leasestore.StatusOK).Outcome
	}

	// By time.
	l := settle()
	sweep()
	b.clock.Advance(leasestore.RememberAcks - time.Second)
	sweep()
	require.Equal(t, leasestore.OutcomeCommitted, repeat(l), "remembered for RememberAcks")
	require.Equal(t, 1, countRecords(t, b, blockKeyPrefix(b.consumer)), "its block is kept, without its events")
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(b.consumer)))
	b.clock.Advance(time.Second)
	sweep()
	require.Equal(t, leasestore.OutcomeStale, repeat(l), "forgotten after RememberAcks")
	require.Zero(t, countRecords(t, b, blockKeyPrefix(b.consumer)), "the kept block is deleted once forgotten")

	// By count: the oldest goes first.
	var ls []*leasestore.Lease
	for range leasestore.MaxRememberedBlocks + 1 {
		ls = append(ls, settle())
		b.clock.Advance(time.Second)
	}
	sweep()
	require.Equal(t, leasestore.OutcomeStale, repeat(ls[0]), "pushed out by MaxRememberedBlocks later ones")
	for _, l := range ls[1:] {
		require.Equal(t, leasestore.OutcomeCommitted, repeat(l))
	}
	require.Equal(t, leasestore.MaxRememberedBlocks, countRecords(t, b, blockKeyPrefix(b.consumer)), "at most MaxRememberedBlocks kept")

	// A pull of new work (the head's other writer) forgets as the sweep does.
	b.clock.Advance(leasestore.RememberAcks)
	last := settle()
	require.Equal(t, 1, countRecords(t, b, blockKeyPrefix(b.consumer)), "only the block settled last is left")
	require.Equal(t, leasestore.OutcomeCommitted, repeat(last))
	sweep() // the head now lists it as kept, no longer as open
	require.Equal(t, 1, countRecords(t, b, blockKeyPrefix(b.consumer)))
	require.Equal(t, leasestore.OutcomeCommitted, repeat(last))

	_, err := b.store.DeleteConsumer(b.ctx, b.consumer)
	require.NoError(t, err)
	require.Zero(t, countRecords(t, b, blockKeyPrefix(b.consumer)), "a deleted consumer's kept blocks go with it")
}

// testAckRepeatSplit: the leases of one block are remembered one by one,
// while the block still has open leases and once it is settled.
func testAckRepeatSplit(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("s", 4)...)
	whole := b.pull(t, "w1", 4, src)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, whole, leasestore.StatusFailed).Outcome)
	first := b.pull(t, "w2", 1, src)  // splits the lease: 1, and 2–4 waiting
	second := b.pull(t, "w3", 2, src) // splits again: 2–3, and 4 waiting
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, second, leasestore.StatusOK).Outcome)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, second, leasestore.StatusOK).Outcome, "remembered while the block has open leases")
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, whole, leasestore.StatusOK).Outcome, "the lease id of another generation")
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, first, leasestore.StatusOK).Outcome)
	rest := b.pull(t, "w4", 4, src)
	require.Equal(t, int64(4), rest.Start)
	r := b.ack(t, rest, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(4), r.Committed)
	_, err := b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)
	for _, l := range []*leasestore.Lease{first, second, rest} {
		r := b.ack(t, l, leasestore.StatusOK)
		require.Equal(t, leasestore.OutcomeCommitted, r.Outcome, "lease at %d, once its block is settled", l.Start)
		require.Equal(t, int64(4), r.Committed)
	}
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, whole, leasestore.StatusOK).Outcome)
}

func testAckOlderGeneration(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("g", 2)...)
	old := b.pull(t, "w1", 2, src)
	b.clock.Advance(visibility)
	cur := b.pull(t, "w2", 2, src)
	require.Equal(t, int64(1), cur.Generation)

	for _, st := range []leasestore.AckStatus{leasestore.StatusOK, leasestore.StatusFailed} {
		r := b.ack(t, old, st)
		require.Equal(t, leasestore.OutcomeStale, r.Outcome, "%s for generation 0 after generation 1 was handed out", st)
		require.Zero(t, r.Committed, "nothing was committed")
	}
	// A generation from the future is stale too.
	require.Equal(t, leasestore.OutcomeStale, b.ackGen(t, cur.ID, cur.Generation+1, leasestore.StatusOK).Outcome)
	c := b.get(t)
	require.Zero(t, c.Committed)
	require.Equal(t, int64(2), c.InFlight)
	// The current holder is untouched by the stale acks.
	requireSameLease(t, cur, b.pull(t, "w2", 2, src))
	r := b.ack(t, cur, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(2), r.Committed)
}

func testAckAfterExpiry(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("x", 3)...)
	l := b.pull(t, "w1", 2, src)
	b.clock.Advance(2 * visibility)
	// Expired, but nobody has been given it since: ok still commits.
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(2), r.Committed)
	// So it is not redelivered: the next pull is new work.
	requireLease(t, b.pull(t, "w2", 5, src), 3, []byte("x-0003"))

	// failed after expiry, before a reclaim, requeues.
	l2 := b.pull(t, "w3", 5, NewScriptedSource())
	require.Nil(t, l2)
	b.clock.Advance(2 * visibility)
	src.Add([]byte("x-0004"))
	l3 := b.pull(t, "w4", 1, src) // reclaims position 3, generation 1
	require.Equal(t, int64(3), l3.Start)
	require.Equal(t, int64(1), l3.Generation)
	b.clock.Advance(2 * visibility)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l3, leasestore.StatusFailed).Outcome)
	requireReclaimed(t, l3, b.pull(t, "w5", 1, src), b.clock.Now().Add(visibility))
}

func testAckUnknownLease(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	r := b.ackGen(t, uuid.NewString(), 0, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome)
	require.Zero(t, r.Committed)
}

func testAckInvalidStatus(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	l := b.pull(t, "w", 1, NewScriptedSource([]byte("i")))
	_, err := b.store.Acknowledge(b.ctx, leasestore.AckParams{
		Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: "maybe",
	})
	requireCode(t, herr.InvalidArgument, err)
	requireSameLease(t, l, b.pull(t, "w", 1, NewScriptedSource()))
}

// testAckRepeatLate: a batch settled after many others (here, at the
// lowest position, after MaxRememberedBlocks later batches settled within
// the same second) is remembered like any other: the blocks settled first
// are forgotten first, whatever their positions.
func testAckRepeatLate(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("t", leasestore.MaxRememberedBlocks+3)...)
	late := b.pull(t, "slow", 1, src)
	for range leasestore.MaxRememberedBlocks + 1 {
		l := b.pull(t, "fast", 1, src)
		require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	}
	_, err := b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, late, leasestore.StatusOK).Outcome)
	// Another pull of new work writes the head: the late batch's block is
	// kept now, and one of the first ones forgotten.
	l := b.pull(t, "fast", 1, src)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	_, err = b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)
	r := b.ack(t, late, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome, "the batch settled last is remembered")
	require.Equal(t, int64(leasestore.MaxRememberedBlocks+3), r.Committed)
}
