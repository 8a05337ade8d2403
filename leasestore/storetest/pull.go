package storetest

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var pullCases = []conformanceCase{
	{"Pull/CaughtUp", testPullCaughtUp},
	{"Pull/NewLease", testPullNewLease},
	{"Pull/Limit", testPullLimit},
	{"Pull/ContiguousPositions", testPullContiguous},
	{"Pull/SameWorkerSameLease", testPullSameWorker},
	{"Pull/DifferentWorkerNewWork", testPullDifferentWorker},
	{"Pull/EmptyWorkerIsShared", testPullEmptyWorker},
	{"Pull/ReclaimHonoursLimit", testPullReclaimSplit},
	{"Pull/SourceFor", testPullSourceFor},
}

// testPullSourceFor: a pull without a Source asks SourceFor for one with
// the consumer as it read it, once; SourceFor's error ends the pull with
// nothing written, before the paused check; a missing consumer is
// NotFound before SourceFor is asked.
func testPullSourceFor(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("s", 2)...)
	var asked []leasestore.ConsumerIdentity
	sourceFor := func(c leasestore.ConsumerIdentity) (leasestore.Source, error) {
		asked = append(asked, c)
		return src, nil
	}
	l, err := b.store.Pull(b.ctx, leasestore.PullParams{Consumer: b.consumer, Worker: "w", Limit: 10, Visibility: visibility, SourceFor: sourceFor})
	require.NoError(t, err)
	requireLease(t, l, 1, bodies("s", 2)...)
	require.Len(t, asked, 1, "SourceFor is asked once per pull")
	require.Equal(t, leasestore.ConsumerIdentity{ID: b.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "sub-" + b.consumer}, asked[0])

	refuse := herr.New(herr.Malformed, "not this consumer")
	_, err = b.store.SetPaused(b.ctx, b.consumer, true)
	require.NoError(t, err)
	_, err = b.store.Pull(b.ctx, leasestore.PullParams{Consumer: b.consumer, Worker: "w2", Limit: 10, Visibility: visibility,
		SourceFor: func(leasestore.ConsumerIdentity) (leasestore.Source, error) { return nil, refuse }})
	require.ErrorIs(t, err, refuse, "SourceFor's error is the pull's, before the paused check")
	require.Equal(t, int64(2), b.get(t).InFlight, "a refused pull writes nothing")

	called := false
	_, err = b.store.Pull(b.ctx, leasestore.PullParams{Consumer: "storetest-missing-" + b.consumer, Worker: "w", Limit: 10, Visibility: visibility,
		SourceFor: func(leasestore.ConsumerIdentity) (leasestore.Source, error) { called = true; return src, nil }})
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
	require.False(t, called, "a missing consumer is not handed to SourceFor")
}

func testPullCaughtUp(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource()
	l, err := b.tryPull(b.store, "w", 10, src)
	require.NoError(t, err)
	require.Nil(t, l, "an empty source means caught up: (nil, nil)")
	require.Zero(t, b.get(t).InFlight)

	src.Add([]byte("one"))
	requireLease(t, b.pull(t, "w", 10, src), 1, []byte("one"))
	l, err = b.tryPull(b.store, "other", 10, src)
	require.NoError(t, err)
	require.Nil(t, l, "everything is leased: caught up for another worker")
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(b.consumer)), "a caught-up pull writes no payload")
	requireSourceSane(t, src)
}

func testPullNewLease(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("n", 2)...)
	l := b.pull(t, "w", 5, src)
	requireLease(t, l, 1, bodies("n", 2)...)
	require.NotEmpty(t, l.ID)
	require.Zero(t, l.Generation, "the durable-consumer API: a first delivery has generation 0")
	require.Equal(t, int64(1), l.Attempt, "the durable-consumer API: a first delivery is attempt 1")
	require.True(t, l.ExpiresAt.Equal(b.clock.Now().Add(visibility)), "ExpiresAt %v, want now+visibility", l.ExpiresAt)
	c := b.get(t)
	require.Equal(t, int64(2), c.InFlight)
	require.Zero(t, c.Committed)
	require.Equal(t, Counts{Acked: 2, Receives: 1}, src.Counts(), "both events passed into the lease")
}

func testPullLimit(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("l", 5)
	src := NewScriptedSource(all...)
	requireLease(t, b.pull(t, "w1", 3, src), 1, all[:3]...)
	requireLease(t, b.pull(t, "w2", 3, src), 4, all[3:]...)
	l, err := b.tryPull(b.store, "w3", 3, src)
	require.NoError(t, err)
	require.Nil(t, l)
	require.Equal(t, int64(5), b.get(t).InFlight)
	require.Equal(t, 5, src.Counts().Acked)
	requireSourceSane(t, src)
}

func testPullContiguous(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const n = 60
	all := bodies("c", n)
	src := NewScriptedSource(all...)
	next := int64(1)
	for i, limit := 0, 1; ; i, limit = i+1, limit%7+1 {
		l, err := b.tryPull(b.store, workerName(i), limit, src)
		require.NoError(t, err)
		if l == nil {
			break
		}
		require.LessOrEqual(t, len(l.Events), limit)
		requireLease(t, l, next, all[next-1:next-1+int64(len(l.Events))]...)
		next += int64(len(l.Events))
	}
	require.Equal(t, int64(n+1), next, "every event was leased once, in order, from position 1")
}

func testPullSameWorker(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("s", 10)...)
	first := b.pull(t, "w", 2, src)
	receives := src.Counts().Receives

	b.clock.Advance(visibility / 2) // still live
	for _, limit := range []int{2, 1, 100} {
		again := b.pull(t, "w", limit, src)
		requireSameLease(t, first, again)
	}
	require.Equal(t, receives, src.Counts().Receives, "returning a live lease must not receive new work")
	require.Equal(t, int64(2), b.get(t).InFlight)
}

// requireSameLease checks that got is want, unchanged.
func requireSameLease(t testing.TB, want, got *leasestore.Lease) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.ID, got.ID, "lease id")
	require.Equal(t, want.Generation, got.Generation, "generation")
	require.Equal(t, want.Attempt, got.Attempt, "attempt")
	require.Equal(t, want.Start, got.Start, "start")
	require.Equal(t, asStrings(want.Events), asStrings(got.Events), "events")
	require.True(t, want.ExpiresAt.Equal(got.ExpiresAt), "expiry moved: %v, was %v", got.ExpiresAt, want.ExpiresAt)
}

func testPullDifferentWorker(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("d", 4)
	src := NewScriptedSource(all...)
	a := b.pull(t, "a", 2, src)
	c := b.pull(t, "b", 2, src)
	require.NotEqual(t, a.ID, c.ID)
	requireLease(t, a, 1, all[:2]...)
	requireLease(t, c, 3, all[2:]...)
	// Each keeps its own.
	requireSameLease(t, a, b.pull(t, "a", 2, src))
	requireSameLease(t, c, b.pull(t, "b", 2, src))
}

func testPullEmptyWorker(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("e", 4)
	src := NewScriptedSource(all...)
	shared := b.pull(t, "", 2, src)
	requireLease(t, shared, 1, all[:2]...)
	// The durable-consumer API: pulls without a workerId share one identity.
	requireSameLease(t, shared, b.pull(t, "", 2, src))
	named := b.pull(t, "named", 2, src)
	requireLease(t, named, 3, all[2:]...)
}

// workerName returns a distinct worker id for i.
func workerName(i int) string { return "worker-" + strconv.Itoa(i) }

// testPullReclaimSplit: a worker that pulls with limit 3 after a 10-event
// lease expired gets 3 events, not the whole lease; the rest stays
// reclaimable under its own lease id, sharing the payload.
func testPullReclaimSplit(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("x", 10)
	src := NewScriptedSource(all...)
	big := b.pull(t, "w1", 10, src)
	b.clock.Advance(visibility)

	head := b.pull(t, "w2", 3, src)
	requireReclaimedPart(t, big, head, 3, b.clock.Now().Add(visibility))
	c := b.get(t)
	require.Equal(t, int64(10), c.InFlight, "splitting neither adds nor drops events")

	mid := b.pull(t, "w3", 5, src)
	requireLease(t, mid, 4, all[3:8]...)
	require.NotEqual(t, big.ID, mid.ID, "the rest has its own lease id")
	require.Equal(t, int64(2), mid.Attempt, "the rest was delivered once already")
	tail := b.pull(t, "w4", 5, src)
	requireLease(t, tail, 9, all[8:]...)
	require.Equal(t, int64(2), tail.Attempt)
	require.NotEqual(t, mid.ID, tail.ID)
	require.Equal(t, 1, src.Counts().Receives, "redeliveries only, no new work")
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(b.consumer)), "the parts share the payload")

	// The first holder's generation is stale for every part.
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, big, leasestore.StatusOK).Outcome)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, tail, leasestore.StatusOK).Outcome)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, head, leasestore.StatusOK).Outcome)
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(b.consumer)), "the payload stays while a part is open")
	r := b.ack(t, mid, leasestore.StatusOK)
	require.Equal(t, int64(10), r.Committed)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(b.consumer)), "and goes with the last part")
}
