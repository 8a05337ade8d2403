package leasestore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLeaseTableRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []leaseTable{
		{},
		{{ID: "a", Start: 1, Count: 1, Attempt: 1, Expires: 1_893_456_000_000, Worker: workerKey("w")}},
		{
			{ID: "3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40", Start: 1 << 40, Count: 100, Generation: 7, Attempt: 8, Expires: -1, Requeued: true},
			{ID: "", Start: 0, Count: 0, Worker: strings.Repeat("é", 300)},
		},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out leaseTable
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
}

func TestSpanListRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []spanList{{}, {{2, 3}}, {{5, 9}, {11, 12}, {1 << 50, 1<<50 + 1000}}} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out spanList
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
}

func TestCodecRejectsCorruptInput(t *testing.T) {
	t.Parallel()
	good, err := leaseTable{{ID: "lease", Start: 3, Count: 2, Attempt: 1, Worker: workerKey("")}}.MarshalBinary()
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown format": append([]byte{99}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"huge count":     {leaseTableV1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		var out leaseTable
		require.Error(t, out.UnmarshalBinary(b), name)
	}
	var spans spanList
	require.Error(t, spans.UnmarshalBinary([]byte{spanListV1, 2, 4}), "truncated spans")
}

func TestLeaseTableIsCompact(t *testing.T) {
	t.Parallel()
	// A full table: 1,000 leases with 36-character ids, positions and
	// expiries of realistic magnitude. It has to fit comfortably in a
	// DynamoDB item next to the rest of the consumer record.
	tab := make(leaseTable, MaxInFlight)
	for i := range tab {
		tab[i] = leaseRec{
			ID: "3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40", Start: 1<<40 + int64(i), Count: 1,
			Worker: workerKey(strings.Repeat("𝄞", 200)), Generation: 1000, Attempt: 1001, Expires: 1_893_456_000_000,
		}
	}
	b, err := tab.MarshalBinary()
	require.NoError(t, err)
	require.Less(t, len(b), 100_000, "1,000 leases must stay under 100 KB")
}
