package leasestore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWorkerKey(t *testing.T) {
	t.Parallel()
	long := string(make([]rune, 200))
	keys := map[string]bool{}
	for _, w := range []string{"", "w", "W", "w ", long} {
		k := workerKey(w)
		require.Len(t, k, 8, "fixed size whatever the id")
		require.Equal(t, k, workerKey(w), "stable")
		keys[k] = true
	}
	require.Len(t, keys, 5, "distinct ids, distinct keys")
	require.NotEmpty(t, workerKey(""), `the shared identity "" is a key like any other, never a requeued lease's empty worker`)
}

func TestLeaseIDNamesItsBlock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ block, start int64 }{{1, 1}, {1, 100}, {1 << 40, 1<<40 + 4094}, {77, 77}} {
		l := &leaseRec{Start: c.start, Tag: newTag()}
		id := leaseID(c.block, l)
		bst, st, tag, ok := parseLeaseID(id)
		require.True(t, ok, id)
		require.Equal(t, []any{c.block, c.start, l.Tag}, []any{bst, st, tag}, id)
		require.NotEqual(t, id, leaseID(c.block, &leaseRec{Start: c.start, Tag: newTag()}), "a new tag, a new id")
	}
	for _, bad := range []string{"", "lease", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "00000000-0000-4000-8000-000000000000"} {
		_, _, _, ok := parseLeaseID(bad)
		require.False(t, ok, "%q is no id of this layout", bad)
	}
}

func TestPruneSessions(t *testing.T) {
	t.Parallel()
	const now = 100_000
	a, b, c := workerKey("a"), workerKey("b"), workerKey("c")
	d := &consumerDoc{
		LastAttached: 10,
		Sessions: sessionList{
			{Key: a, Expires: now + 1},                   // live
			{Key: b, Expires: now},                       // lapses now
			{Key: c, Expires: 50_000, Tombstone: true},   // removed a while ago
			{Key: "old", Expires: 1, Tombstone: true},    // kept, retention is an hour
			{Key: workerKey("x"), Expires: now - 20_000}, // lapsed earlier
		},
	}
	blk := &blockDoc{Start: 1, Count: 4, Leases: blockLeases{
		{Start: 1, Count: 1, Worker: a, Session: true, Expires: now + 60_000},
		{Start: 2, Count: 1, Worker: b, Session: true, Expires: now + 60_000},
		{Start: 3, Count: 1, Worker: c, Session: true, Expires: now + 60_000},
		{Start: 4, Count: 1, Worker: b, Expires: now + 60_000}, // Pull's, not a session's
	}}
	require.True(t, d.pruneSessions(now))
	require.Equal(t, int64(now), d.LastAttached, "the latest lapse")
	require.Equal(t, 1, d.liveSessions(now))
	require.True(t, d.liveSession(a, now))
	require.False(t, d.liveSession(b, now))
	live := d.sessionLive(now)
	var got []bool
	for i := range blk.Leases {
		got = append(got, blk.Leases[i].live(now, live))
	}
	require.Equal(t, []bool{true, false, false, true}, got, "leases of gone sessions come back; others and non-session leases stay held")
	require.False(t, d.pruneSessions(now), "nothing more to do")

	// Tombstones go after TombstoneRetention.
	later := now - 10_000 + TombstoneRetention.Milliseconds()
	d.Sessions[0].Expires = later + 1
	require.True(t, d.pruneSessions(later))
	var keys []string
	for _, e := range d.Sessions {
		keys = append(keys, e.Key)
	}
	require.Equal(t, []string{a, b}, keys, "tombstones of removals at least an hour old are gone, b's (50 min old) is kept")
}

func TestPruneSessionsKeepsNewestTombstones(t *testing.T) {
	t.Parallel()
	const now = 10_000_000
	d := &consumerDoc{}
	for i := range MaxTombstones + 50 {
		d.Sessions = append(d.Sessions, session{Key: workerKey(string(rune('a' + i))), Expires: now - int64(i), Tombstone: true})
	}
	require.True(t, d.pruneSessions(now))
	require.Len(t, d.Sessions, MaxTombstones)
	for _, e := range d.Sessions {
		require.Greater(t, e.Expires, int64(now-MaxTombstones), "the newest removals are kept")
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	b := &blockDoc{Start: 1, Count: 11, Leases: blockLeases{
		{Start: 1, Count: 1, Tag: 1},
		{Start: 2, Count: 10, Tag: 2, Worker: workerKey("w"), Generation: 3, Attempt: 4, Expires: 9},
	}}
	r := b.split(1, 4)
	require.Equal(t, 2, r, "appended: existing indexes stay valid")
	require.Equal(t, leaseRec{Start: 2, Count: 4, Tag: 2, Worker: workerKey("w"), Generation: 3, Attempt: 4, Expires: 9}, b.Leases[1])
	rest := b.Leases[2]
	require.NotEqual(t, uint64(2), rest.Tag, "the rest is a new lease")
	rest.Tag = 0
	require.Equal(t, leaseRec{Start: 6, Count: 6, Requeued: true, Generation: 3, Attempt: 4, Expires: 9}, rest)
	require.Equal(t, int64(11), b.unsettled(), "no event lost or added")
	require.Equal(t, int64(1), b.firstUnsettled())
	b.remove(0)
	require.Equal(t, int64(2), b.firstUnsettled())
}

func TestHints(t *testing.T) {
	t.Parallel()
	const now = 1_000
	live := func(string) bool { return true }
	w, v := workerKey("w"), workerKey("v")
	b := &blockDoc{Start: 1, Count: 3, Leases: blockLeases{
		{Start: 1, Count: 1, Worker: w, Expires: now + 50},
		{Start: 2, Count: 2, Worker: w, Expires: now + 20},
	}}
	held, until, holder := b.hints(now, live, redelivery{limit: 20})
	require.Equal(t, []any{int64(3), int64(now + 20), holderCode(w, false)}, []any{held, until, holder}, "one holder, the earliest expiry")
	require.False(t, sessionCode(holder))
	b.Leases[1].Worker = v
	_, _, holder = b.hints(now, live, redelivery{limit: 20})
	require.Zero(t, holder, "several holders: read by every pull")
	b.Leases[0].Requeued = true
	_, until, _ = b.hints(now, live, redelivery{limit: 20})
	require.Zero(t, until, "a reclaimable lease: read by every pull")
	b.Leases = blockLeases{{Start: 1, Count: 1, Worker: v, Session: true, Expires: now + 5}}
	_, _, holder = b.hints(now, live, redelivery{limit: 20})
	require.True(t, sessionCode(holder))
	b.Leases = blockLeases{{Start: 1, Count: 1, Delayed: true, Expires: now + 30}}
	_, until, holder = b.hints(now, live, redelivery{limit: 20})
	require.Equal(t, []any{int64(now + 30), uint16(holderNobody)}, []any{until, holder}, "a delayed lease: nobody reads it before it is due")
	require.False(t, sessionCode(holder))
	b.Leases[0].Attempt = 20
	_, until, _ = b.hints(now, live, redelivery{limit: 20})
	require.Zero(t, until, "past the delivery limit it is due at once, for the dead-letter queue")
	b.Leases = blockLeases{{Start: 1, Count: 1, Attempt: 2, Expires: now - 500}}
	_, until, _ = b.hints(now, live, redelivery{limit: 20, retry: &RetryPolicy{MinimumBackoff: 10 * time.Second, MaximumBackoff: 15 * time.Second}})
	require.Equal(t, int64(now+14_500), until, "an expired lease backs off from its expiry: 10 s doubled, capped at 15 s")
	b.Leases = nil
	held, _, _ = b.hints(now, live, redelivery{limit: 20})
	require.Zero(t, held)
}

func TestApplyDropsDoneBlocksAndRaisesTheFloor(t *testing.T) {
	t.Parallel()
	d := &consumerDoc{Next: 31, Blocks: blockIndex{
		{Start: 1, Count: 10, Held: 10, Until: 5},
		{Start: 11, Count: 10, Held: 10, Until: 5, Stamp: 2},
		{Start: 21, Count: 10, Held: 10, Until: 5},
	}}
	r := &refresh{
		blocks: map[int64]*blockDoc{1: nil, 11: {Start: 11, Count: 10}},
		stamps: map[int64]uint64{1: 0, 11: 1}, // 11 was lowered since it was read
	}
	d.apply(r, map[int64]note{21: {Held: 4}}, 0, redelivery{limit: 20})
	require.Equal(t, blockIndex{
		{Start: 11, Count: 10, Held: 10, Until: 5, Stamp: 2},
		{Start: 21, Count: 10, Held: 4, Until: 5},
	}, d.Blocks, "a gone block is dropped; a lowered entry keeps its hints; notes tighten Held")
	require.Equal(t, int64(10), d.Committed)
	d.apply(nil, map[int64]note{11: {Held: 0, Kept: true}, 21: {Held: 0}}, 0, redelivery{limit: 20})
	require.Empty(t, d.Blocks)
	require.Equal(t, int64(30), d.Committed, "nothing open: everything handed out is settled")
	require.Equal(t, keptList{{Start: 11, Until: RememberAcks.Milliseconds()}}, d.Kept,
		"a settled block that remembers acknowledgements is kept")
}
