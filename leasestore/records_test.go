package leasestore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddAckedMerges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		have spanList
		add  span
		want spanList
	}{
		{"into empty", nil, span{5, 7}, spanList{{5, 7}}},
		{"before, apart", spanList{{10, 12}}, span{5, 7}, spanList{{5, 7}, {10, 12}}},
		{"after, apart", spanList{{5, 7}}, span{10, 12}, spanList{{5, 7}, {10, 12}}},
		{"touches the left one", spanList{{5, 7}}, span{7, 9}, spanList{{5, 9}}},
		{"touches the right one", spanList{{9, 12}}, span{7, 9}, spanList{{7, 12}}},
		{"closes a gap", spanList{{5, 7}, {9, 12}}, span{7, 9}, spanList{{5, 12}}},
		{"closes two gaps of three", spanList{{1, 2}, {3, 4}, {5, 6}, {8, 9}}, span{2, 3}, spanList{{1, 4}, {5, 6}, {8, 9}}},
		{"lands in the middle, apart", spanList{{1, 2}, {8, 9}}, span{4, 6}, spanList{{1, 2}, {4, 6}, {8, 9}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &consumerDoc{Acked: append(spanList(nil), c.have...)}
			d.addAcked(c.add)
			require.Equal(t, c.want, d.Acked)
		})
	}
}

// lease returns an unacknowledged lease of count positions from start.
func lease(id string, start, count int64) leaseRec {
	return leaseRec{ID: id, Start: start, Count: count, Attempt: 1, Expires: 1_000}
}

func TestCommitAdvancesOverContiguousRun(t *testing.T) {
	t.Parallel()
	d := &consumerDoc{Next: 10, Leases: []leaseRec{
		lease("a", 1, 2), // 1–2
		lease("b", 3, 3), // 3–5
		lease("c", 6, 1), // 6
		lease("d", 7, 3), // 7–9
	}}
	commit := func(id string) {
		t.Helper()
		i := d.lease(id)
		require.GreaterOrEqual(t, i, 0, "lease %s", id)
		d.commit(i)
	}

	commit("c")
	require.Zero(t, d.Committed, "lease a holds the cursor back")
	require.Equal(t, spanList{{6, 7}}, d.Acked)
	commit("b")
	require.Zero(t, d.Committed)
	require.Equal(t, spanList{{3, 7}}, d.Acked, "b and c merge")
	commit("a")
	require.Equal(t, int64(6), d.Committed, "a closes the gap: the cursor passes b and c")
	require.Empty(t, d.Acked, "ranges at or below the cursor are dropped")
	require.Equal(t, []string{"d"}, leaseIDs(d))
	commit("d")
	require.Equal(t, int64(9), d.Committed)
	require.Empty(t, d.Leases)
	require.Empty(t, d.Acked)
}

func TestCommitNeverMovesBackward(t *testing.T) {
	t.Parallel()
	// A lease below the cursor cannot exist, but if a record says so the
	// cursor must still not move back.
	d := &consumerDoc{Committed: 10, Next: 12, Leases: []leaseRec{lease("old", 3, 2), lease("new", 11, 1)}}
	d.commit(d.lease("old"))
	require.Equal(t, int64(10), d.Committed)
	require.Empty(t, d.Acked)
	d.commit(d.lease("new"))
	require.Equal(t, int64(11), d.Committed)
}

func leaseIDs(d *consumerDoc) []string {
	var out []string
	for _, l := range d.Leases {
		out = append(out, l.ID)
	}
	return out
}

func TestReclaimableOrder(t *testing.T) {
	t.Parallel()
	const now = 5_000
	d := &consumerDoc{Leases: []leaseRec{
		{ID: "live", Start: 1, Count: 1, Expires: now + 1},
		{ID: "expired-late", Start: 9, Count: 1, Expires: now - 1},
		{ID: "requeued", Start: 5, Count: 1, Expires: now + 10_000, Requeued: true},
		{ID: "expired-now", Start: 7, Count: 1, Expires: now},
	}}
	next := func() string {
		i := d.reclaimable(now)
		if i < 0 {
			return ""
		}
		id := d.Leases[i].ID
		// Hand it out, as Pull does.
		d.Leases[i].Requeued, d.Leases[i].Expires = false, now+60_000
		return id
	}
	require.Equal(t, "requeued", next(), "the lowest start goes first, requeued or expired alike")
	require.Equal(t, "expired-now", next(), "a lease expires at its deadline")
	require.Equal(t, "expired-late", next())
	require.Equal(t, "", next(), "live leases are never reclaimed")
}

func TestInFlightAndEarliestExpiry(t *testing.T) {
	t.Parallel()
	const now = 5_000
	d := &consumerDoc{Leases: []leaseRec{
		{ID: "a", Start: 1, Count: 3, Expires: now + 9_000},
		{ID: "b", Start: 4, Count: 2, Expires: now + 2_000},
		{ID: "c", Start: 6, Count: 4, Expires: now - 1},                      // expired
		{ID: "d", Start: 10, Count: 1, Expires: now + 1_000, Requeued: true}, // failed
	}}
	require.Equal(t, int64(10), d.inFlight(), "expired and requeued leases count until committed")
	require.Equal(t, int64(now+2_000), d.earliestExpiry(now), "only live leases have an expiry that matters")
	require.Zero(t, (&consumerDoc{}).earliestExpiry(now))
}

func TestWorkerKey(t *testing.T) {
	t.Parallel()
	long := string(make([]rune, 200))
	keys := map[string]bool{}
	for _, w := range []string{"", "w", "W", "w ", long} {
		k := workerKey(w)
		require.Len(t, k, 22, "fixed size whatever the id")
		require.Equal(t, k, workerKey(w), "stable")
		keys[k] = true
	}
	require.Len(t, keys, 5, "distinct ids, distinct keys")
	require.NotEmpty(t, workerKey(""), `the shared identity "" is a key like any other, never a requeued lease's empty worker`)
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
		Leases: []leaseRec{
			{ID: "la", Worker: a, Session: true, Count: 1, Expires: now + 60_000},
			{ID: "lb", Worker: b, Session: true, Count: 1, Expires: now + 60_000},
			{ID: "lc", Worker: c, Session: true, Count: 1, Expires: now + 60_000},
			{ID: "batch", Worker: b, Count: 1, Expires: now + 60_000}, // Pull's, not a session's
		},
	}
	require.True(t, d.pruneSessions(now))
	require.Equal(t, int64(now), d.LastAttached, "the latest lapse")
	require.Equal(t, 1, d.liveSessions(now))
	require.True(t, d.liveSession(a, now))
	require.False(t, d.liveSession(b, now))
	require.Equal(t, []bool{false, true, true, false}, []bool{d.Leases[0].Requeued, d.Leases[1].Requeued, d.Leases[2].Requeued, d.Leases[3].Requeued},
		"leases of gone sessions are requeued; others and non-session leases are not")
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
	d := &consumerDoc{Leases: []leaseRec{
		{ID: "other", Start: 1, Count: 1},
		{ID: "big", Start: 2, Count: 10, Offset: 0, Worker: workerKey("w"), Generation: 3, Attempt: 4, Expires: 9},
	}}
	r := d.split(1, 4, "rest")
	require.Equal(t, 2, r, "appended: existing indexes stay valid")
	require.Equal(t, leaseRec{ID: "big", Start: 2, Count: 4, Worker: workerKey("w"), Generation: 3, Attempt: 4, Expires: 9}, d.Leases[1])
	require.Equal(t, leaseRec{ID: "rest", Payload: "big", Offset: 4, Start: 6, Count: 6, Requeued: true, Generation: 3, Attempt: 4, Expires: 9}, d.Leases[2])
	r2 := d.split(2, 1, "rest2")
	require.Equal(t, "big", d.Leases[r2].Payload, "a part of a part still names the first payload")
	require.Equal(t, int64(5), d.Leases[r2].Offset)
	require.Equal(t, int64(7), d.Leases[r2].Start)
	require.Equal(t, int64(11), d.inFlight(), "no event lost or added")
	require.Empty(t, d.unreferenced([]string{"big", "other", "big"}))
	d.Leases = d.Leases[:1]
	require.Equal(t, []string{"big"}, d.unreferenced([]string{"big", "other", "big"}))
}
