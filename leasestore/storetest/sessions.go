package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var sessionCases = []conformanceCase{
	{"Session/AttachAndHeartbeat", testSessionAttach},
	{"Session/Errors", testSessionErrors},
	{"Session/DetachRequeuesAtOnce", testSessionDetach},
	{"Session/EvictedIsCancelled", testSessionEvicted},
	{"Session/LapsedLeasesReclaimable", testSessionLapsed},
	{"Session/ExpirySweepRecordsLapse", testSessionExpirySweep},
	{"Session/PullNeedsAttachedSession", testSessionPullNeedsAttach},
	{"Session/AckAfterLapseBeforeReclaim", testSessionAckAfterLapse},
}

func testSessionAttach(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	c := b.getC(t, q)
	require.Zero(t, c.LiveSessions)
	require.True(t, c.LastAttached.IsZero(), "never attached: LastAttached is zero")

	t0 := b.clock.Now()
	b.attach(t, q, "s1")
	c = b.getC(t, q)
	require.Equal(t, 1, c.LiveSessions)
	require.True(t, c.LastAttached.Equal(t0), "LastAttached %v, want %v", c.LastAttached, t0)

	// A heartbeat refreshes the session and LastAttached; it is not a
	// second session.
	b.clock.Advance(20 * time.Second)
	b.attach(t, q, "s2")
	c = b.getC(t, q)
	require.Equal(t, 2, c.LiveSessions)
	require.True(t, c.LastAttached.Equal(t0.Add(20*time.Second)))
	b.attach(t, q, "s2")
	require.Equal(t, 2, b.getC(t, q).LiveSessions, "a heartbeat is not a new session")

	// s1's TTL lapses at t0+30s: it no longer counts, and LastAttached is
	// the moment it was last known attached.
	b.clock.Advance(15 * time.Second) // t0+35s
	c = b.getC(t, q)
	require.Equal(t, 1, c.LiveSessions, "a lapsed session does not count")
	require.True(t, c.LastAttached.Equal(t0.Add(sessionTTL)), "LastAttached %v, want the lapse at %v", c.LastAttached, t0.Add(sessionTTL))

	// Its late heartbeat is refused: it counts as detached.
	err := b.store.Attach(b.ctx, q, "s1", sessionTTL)
	requireCode(t, herr.FailedPrecondition, err)
	b.attach(t, q, "s2") // s2 is alive and well
	c = b.getC(t, q)
	require.Equal(t, 1, c.LiveSessions)
	require.True(t, c.LastAttached.Equal(b.clock.Now()))
}

func testSessionErrors(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	requireCode(t, herr.InvalidArgument, b.store.Attach(b.ctx, q, "", sessionTTL))
	requireCode(t, herr.InvalidArgument, b.store.Attach(b.ctx, q, "s", 0))
	missing := "storetest-missing-" + uuid.NewString()
	requireCode(t, herr.NotFound, b.store.Attach(b.ctx, missing, "s", sessionTTL))
	requireCode(t, herr.NotFound, b.store.Detach(b.ctx, missing, "s"))
	_, err := b.store.EvictSessions(b.ctx, missing)
	requireCode(t, herr.NotFound, err)
	_, err = b.tryPullEvents(b.store, missing, "s", 1, NewScriptedSource())
	requireCode(t, herr.NotFound, err)
	_, err = b.store.Settle(b.ctx, missing, nil, nil)
	requireCode(t, herr.NotFound, err)
	_, err = b.tryPullEvents(b.store, q, "s", 0, NewScriptedSource())
	requireCode(t, herr.InvalidArgument, err)
	_, err = b.store.PullEvents(b.ctx, leasestore.PullParams{Consumer: q, Worker: "s", Limit: 1, Source: NewScriptedSource()})
	requireCode(t, herr.InvalidArgument, err)
	require.Zero(t, b.getC(t, q).LiveSessions, "failed attaches attach nothing")
}

func testSessionDetach(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	all := bodies("d", 5)
	src := NewScriptedSource(all...)
	b.attach(t, q, "s1")
	first := b.pullEvents(t, q, "s1", 3, src)
	require.Equal(t, []int64{1, 2, 3}, starts(first))
	c := b.getC(t, q)
	require.Equal(t, int64(3), c.InFlight)
	require.Zero(t, c.Requeued)

	b.clock.Advance(time.Second)
	require.NoError(t, b.store.Detach(b.ctx, q, "s1"))
	c = b.getC(t, q)
	require.Zero(t, c.LiveSessions)
	require.Equal(t, int64(3), c.Requeued, "detach requeues every lease the session held, at once")
	require.Equal(t, int64(3), c.InFlight)
	require.True(t, c.LastAttached.Equal(b.clock.Now()), "detach records when the session left")

	// The next session gets them first, one delivery later, then new work.
	b.attach(t, q, "s2")
	receives := src.Counts().Receives
	got := b.pullEvents(t, q, "s2", 10, src)
	require.Equal(t, []int64{1, 2, 3, 4, 5}, starts(got))
	require.Equal(t, asStrings(all), eventBodies(got))
	for i, l := range got[:3] {
		require.Equal(t, first[i].ID, l.ID, "a redelivery keeps its lease id")
		require.Equal(t, first[i].Generation+1, l.Generation)
		require.Equal(t, int64(2), l.Attempt, "delivered a second time")
	}
	for _, l := range got[3:] {
		require.Equal(t, int64(1), l.Attempt)
	}
	require.Equal(t, receives+1, src.Counts().Receives, "new work only for the room the redeliveries left")

	// Detaching again, or a session never seen, is not an error.
	require.NoError(t, b.store.Detach(b.ctx, q, "s1"))
	require.NoError(t, b.store.Detach(b.ctx, q, "never-attached"))
	require.Equal(t, int64(0), b.getC(t, q).Requeued, "s2's leases are untouched")
	// A detached session stays detached.
	requireCode(t, herr.FailedPrecondition, b.store.Attach(b.ctx, q, "s1", sessionTTL))
	requireSourceSane(t, src)
}

func testSessionEvicted(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("v", 4)...)
	b.attach(t, q, "s1")
	b.attach(t, q, "s2")
	held := b.pullEvents(t, q, "s1", 2, src)

	n, err := b.store.EvictSessions(b.ctx, q, "s1", "not-attached")
	require.NoError(t, err)
	require.Equal(t, 1, n, "only attached sessions are counted")
	c := b.getC(t, q)
	require.Equal(t, 1, c.LiveSessions)
	require.Equal(t, int64(2), c.Requeued, "an evicted session's leases are requeued at once")

	// The evicted session learns it was cancelled, on heartbeat and pull.
	requireCode(t, herr.FailedPrecondition, b.store.Attach(b.ctx, q, "s1", sessionTTL))
	receives := src.Counts().Receives
	_, err = b.tryPullEvents(b.store, q, "s1", 5, src)
	requireCode(t, herr.FailedPrecondition, err)
	require.Equal(t, receives, src.Counts().Receives, "a cancelled session's pull must not receive")

	got := b.pullEvents(t, q, "s2", 2, src)
	require.Equal(t, refs(held...)[0].LeaseID, got[0].ID)
	require.Equal(t, []int64{2, 2}, []int64{got[0].Attempt, got[1].Attempt})
	// The evicted session's acknowledgement is stale now.
	r := b.settle(t, q, refs(held...), nil)
	require.Equal(t, leasestore.SettleResult{Skipped: 2}, r)

	// Evicting with no ids evicts every attached session.
	n, err = b.store.EvictSessions(b.ctx, q)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, b.getC(t, q).LiveSessions)
	_, err = b.tryPullEvents(b.store, q, "s2", 5, src)
	requireCode(t, herr.FailedPrecondition, err)
	n, err = b.store.EvictSessions(b.ctx, q)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to evict")
}

func testSessionLapsed(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("l", 3)...)
	b.attach(t, q, "s1")
	held := b.pullEvents(t, q, "s1", 2, src) // visibility 5 min, TTL 30 s

	b.clock.Advance(sessionTTL)
	c := b.getC(t, q)
	require.Zero(t, c.LiveSessions)
	require.Equal(t, int64(2), c.Requeued, "a lapsed session's leases wait for redelivery, long before their visibility ends")

	b.attach(t, q, "s2")
	got := b.pullEvents(t, q, "s2", 3, src)
	require.Equal(t, []int64{1, 2, 3}, starts(got))
	require.Equal(t, held[0].ID, got[0].ID)
	require.Equal(t, held[1].ID, got[1].ID)
	require.Equal(t, []int64{2, 2, 1}, []int64{got[0].Attempt, got[1].Attempt, got[2].Attempt})
	requireCode(t, herr.FailedPrecondition, b.store.Attach(b.ctx, q, "s1", sessionTTL))
}

func testSessionExpirySweep(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeNonDurableQueue, nil)
	src := NewScriptedSource(bodies("x", 2)...)
	b.attach(t, q, "s1")
	b.pullEvents(t, q, "s1", 2, src)
	b.clock.Advance(sessionTTL + time.Second)
	got, err := b.store.ExpireLeases(b.ctx, q)
	require.NoError(t, err)
	require.Equal(t, leasestore.Expired{Leases: 2, Events: 2}, got, "the sweep requeues a lapsed session's leases")
	got, err = b.store.ExpireLeases(b.ctx, q)
	require.NoError(t, err)
	require.Equal(t, leasestore.Expired{}, got, "and records it: a second sweep finds nothing")
	c := b.getC(t, q)
	require.Equal(t, int64(2), c.Requeued)
	require.True(t, c.LastAttached.Equal(b.clock.Now().Add(-time.Second)), "LastAttached is the lapse")
	requireCode(t, herr.FailedPrecondition, b.store.Attach(b.ctx, q, "s1", sessionTTL))
}

func testSessionPullNeedsAttach(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("n", 2)...)
	_, err := b.tryPullEvents(b.store, q, "stranger", 2, src)
	requireCode(t, herr.FailedPrecondition, err)
	require.Zero(t, src.Counts().Receives, "no session, no receive")
	require.Zero(t, b.getC(t, q).InFlight)
}

func testSessionAckAfterLapse(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("a", 1)...)
	b.attach(t, q, "s1")
	l := b.pullEvents(t, q, "s1", 1, src)
	b.clock.Advance(sessionTTL)
	// Nobody has been handed the event since: the late ack still commits.
	r := b.settle(t, q, refs(l...), nil)
	require.Equal(t, leasestore.SettleResult{Acked: 1, Committed: 1}, r)
	c := b.getC(t, q)
	require.Equal(t, int64(1), c.Committed)
	require.Zero(t, c.InFlight)
}
