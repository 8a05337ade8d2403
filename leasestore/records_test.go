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
