package storetest

import (
	"testing"

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
	{"Ack/OKAgainIsStale", testAckOKAgain},
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

func testAckOKAgain(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("a", 2)...)
	l := b.pull(t, "w", 2, src)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome, "ok for a committed lease changes nothing")
	require.Equal(t, int64(2), r.Committed, "a stale outcome still reports the cursor")
	r = b.ack(t, l, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome, "failed for a committed lease changes nothing")
	require.Equal(t, int64(2), b.get(t).Committed)
	require.Zero(t, b.get(t).InFlight)
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
