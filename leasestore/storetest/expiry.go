package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/leasestore"
)

var expiryCases = []conformanceCase{
	{"Expiry/ReclaimBeforeNewWork", testExpiryReclaim},
	{"Expiry/OldestFirst", testExpiryOldestFirst},
	{"Expiry/SameWorkerAfterExpiry", testExpirySameWorker},
	{"Expiry/LiveUntilDeadline", testExpiryBoundary},
}

// pullFor pulls with an explicit visibility.
func (b *bundle) pullFor(t testing.TB, worker string, limit int, vis time.Duration, src leasestore.Source) *leasestore.Lease {
	t.Helper()
	l, err := b.store.Pull(b.ctx, leasestore.PullParams{
		Consumer: b.consumer, Worker: worker, Limit: limit, Visibility: vis, Source: src,
	})
	require.NoError(t, err)
	return l
}

// requireReclaimed checks that got is old redelivered: same lease, events
// and positions, one generation and one attempt higher, and a fresh expiry.
func requireReclaimed(t testing.TB, old, got *leasestore.Lease, expires time.Time) {
	t.Helper()
	require.NotNil(t, got, "want the reclaimed lease, got caught up")
	require.Equal(t, old.ID, got.ID, "a reclaimed lease keeps its id")
	require.Equal(t, old.Generation+1, got.Generation, "generation")
	require.Equal(t, old.Attempt+1, got.Attempt, "attempt")
	require.Equal(t, old.Start, got.Start, "positions")
	require.Equal(t, asStrings(old.Events), asStrings(got.Events), "events")
	require.True(t, got.ExpiresAt.Equal(expires), "ExpiresAt %v, want %v", got.ExpiresAt, expires)
}

// requireReclaimedPart checks that got is the first n events of old,
// redelivered: same lease id and start, one generation and one attempt
// higher, a fresh expiry.
func requireReclaimedPart(t testing.TB, old, got *leasestore.Lease, n int, expires time.Time) {
	t.Helper()
	require.NotNil(t, got, "want the reclaimed lease, got caught up")
	require.Equal(t, old.ID, got.ID, "the handed-out part keeps the lease id")
	require.Equal(t, old.Generation+1, got.Generation, "generation")
	require.Equal(t, old.Attempt+1, got.Attempt, "attempt")
	require.Equal(t, old.Start, got.Start, "positions")
	require.Equal(t, asStrings(old.Events[:n]), asStrings(got.Events), "events")
	require.True(t, got.ExpiresAt.Equal(expires), "ExpiresAt %v, want %v", got.ExpiresAt, expires)
}

func testExpiryReclaim(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("r", 6)
	src := NewScriptedSource(all...)
	a := b.pull(t, "w1", 2, src)
	c := b.pull(t, "w2", 2, src)
	b.clock.Advance(visibility + time.Millisecond)

	receives := src.Counts().Receives
	got := b.pull(t, "w3", 10, src)
	requireReclaimed(t, a, got, b.clock.Now().Add(visibility))
	got2 := b.pull(t, "w4", 10, src)
	requireReclaimed(t, c, got2, b.clock.Now().Add(visibility))
	require.Equal(t, receives, src.Counts().Receives, "expired leases go before new work")

	// The reclaimer keeps its lease; new work comes after.
	requireSameLease(t, got, b.pull(t, "w3", 10, src))
	requireLease(t, b.pull(t, "w5", 10, src), 5, all[4:]...)
	require.Equal(t, int64(6), b.get(t).InFlight, "a reclaimed lease is still one lease in flight")
}

func testExpiryOldestFirst(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("o", 3)...)
	first := b.pullFor(t, "a", 1, 60*time.Second, src)  // position 1, expires last
	second := b.pullFor(t, "b", 1, 10*time.Second, src) // position 2
	third := b.pullFor(t, "c", 1, 5*time.Second, src)   // position 3, expires first

	b.clock.Advance(20 * time.Second) // 2 and 3 expired, 1 live
	r2 := b.pullFor(t, "d", 1, 30*time.Second, src)
	requireReclaimed(t, second, r2, b.clock.Now().Add(30*time.Second))

	b.clock.Advance(60 * time.Second) // all expired, 2 in generation 1
	requireReclaimed(t, first, b.pull(t, "e", 1, src), b.clock.Now().Add(visibility))
	requireReclaimed(t, r2, b.pull(t, "f", 1, src), b.clock.Now().Add(visibility))
	requireReclaimed(t, third, b.pull(t, "g", 1, src), b.clock.Now().Add(visibility))
	l, err := b.tryPull(b.store, "h", 1, src)
	require.NoError(t, err)
	require.Nil(t, l)
}

func testExpirySameWorker(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("s", 3)...)
	a := b.pull(t, "w", 2, src)
	b.clock.Advance(visibility)
	// Its own lease has expired: the worker is given it again as a
	// redelivery (the oldest reclaimable lease), not handed new work.
	requireReclaimed(t, a, b.pull(t, "w", 2, src), b.clock.Now().Add(visibility))
	// Acknowledging the abandoned generation is stale.
	r := b.ack(t, a, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome)
}

func testExpiryBoundary(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("b", 2)...)
	a := b.pull(t, "w1", 1, src)
	b.clock.Advance(visibility - time.Millisecond)
	// Still live one millisecond before its deadline: another worker gets
	// new work.
	requireLease(t, b.pull(t, "w2", 1, src), 2, []byte("b-0002"))
	b.clock.Advance(time.Millisecond)
	// At the deadline it has expired.
	requireReclaimed(t, a, b.pull(t, "w3", 1, src), b.clock.Now().Add(visibility))
}
