package leasestore

import (
	"encoding/binary"
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
		{
			{ID: "part", Payload: "shared", Offset: 41, Start: 7, Count: 1, Worker: workerKey("s"), Session: true, Attempt: 3, Expires: 5},
			{ID: "dying-1", Payload: "shared", Offset: 2, Start: 9, Count: 1, Dying: ReasonDeliveryLimit, Generation: 4, Attempt: 20},
			{ID: "dying-2", Start: 10, Count: 3, Dying: ReasonExpired},
			{ID: "dying-3", Payload: "p", Start: 13, Count: 1, Dying: ReasonMaxLen, Requeued: true, Session: true},
		},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out leaseTable
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
}

// TestLeaseTableReadsVersion1 decodes a lease table as written before
// leases could share a payload (version 1: no payload id or offset): every
// lease refers to its own payload from its first event.
func TestLeaseTableReadsVersion1(t *testing.T) {
	t.Parallel()
	v1 := []byte{leaseTableV1, 2}
	for _, l := range []leaseRec{
		{ID: "a", Start: 1, Count: 2, Generation: 0, Attempt: 1, Expires: 1_893_456_000_000, Worker: workerKey("w")},
		{ID: "b", Start: 3, Count: 1, Generation: 2, Attempt: 3, Expires: 7, Requeued: true},
	} {
		v1 = appendString(v1, l.ID)
		for _, n := range []int64{l.Start, l.Count, l.Generation, l.Attempt, l.Expires} {
			v1 = binary.AppendVarint(v1, n)
		}
		v1 = appendString(v1, l.Worker)
		if l.Requeued {
			v1 = append(v1, flagRequeued)
		} else {
			v1 = append(v1, 0)
		}
	}
	var got leaseTable
	require.NoError(t, got.UnmarshalBinary(v1))
	require.Equal(t, leaseTable{
		{ID: "a", Start: 1, Count: 2, Attempt: 1, Expires: 1_893_456_000_000, Worker: workerKey("w")},
		{ID: "b", Start: 3, Count: 1, Generation: 2, Attempt: 3, Expires: 7, Requeued: true},
	}, got)
	require.Equal(t, "a", got[0].payloadID(), "a version 1 lease's payload is its own")
	// Written back, it is version 2 and reads the same.
	b, err := got.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(leaseTableV2), b[0])
	var again leaseTable
	require.NoError(t, again.UnmarshalBinary(b))
	require.Equal(t, got, again)
}

func TestLeaseTableRejectsUnknownReason(t *testing.T) {
	t.Parallel()
	_, err := leaseTable{{ID: "x", Dying: "BORED"}}.MarshalBinary()
	require.Error(t, err)
}

func TestSessionListRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []sessionList{{}, {{Key: workerKey("s1"), Expires: 1_893_456_000_000}, {Key: workerKey("s2"), Expires: 5, Tombstone: true}}} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out sessionList
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
	var out sessionList
	require.Error(t, out.UnmarshalBinary([]byte{sessionListV1, 1, 3, 'a'}), "truncated")
	require.Error(t, out.UnmarshalBinary([]byte{9, 0}), "unknown version")
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

	// A full table of a queue: 1,000 single-event session leases, each
	// naming the payload it shares, and 1,000 sessions with MaxTombstones
	// removed ones.
	for i := range tab {
		tab[i].Payload, tab[i].Offset, tab[i].Session = "9b2f0c4e-71d2-4c59-8f5e-2a7d3b1c0e9f", int64(i%100), true
	}
	b, err = tab.MarshalBinary()
	require.NoError(t, err)
	require.Less(t, len(b), 140_000, "1,000 stream leases must stay under 140 KB")
	sessions := make(sessionList, MaxSessions+MaxTombstones)
	for i := range sessions {
		sessions[i] = session{Key: workerKey(strings.Repeat("s", i)), Expires: 1_893_456_000_000, Tombstone: i >= MaxSessions}
	}
	sb, err := sessions.MarshalBinary()
	require.NoError(t, err)
	require.Less(t, len(sb), 40_000, "the most sessions a consumer keeps must stay under 40 KB")
}

// FuzzRecordCodecs decodes arbitrary bytes as each binary value a consumer
// record holds (the lease table, the acked ranges, the sessions): decoding
// never panics, and whatever decodes encodes to a value that decodes to
// the same. Seeds are valid encodings of each.
func FuzzRecordCodecs(f *testing.F) {
	lt, _ := leaseTable{
		{ID: "a", Payload: "p", Offset: 2, Start: 9, Count: 3, Worker: workerKey("w"), Attempt: 2, Expires: 7, Dying: ReasonExpired},
		{ID: "b", Start: 12, Count: 1, Session: true, Requeued: true, Generation: 4},
	}.MarshalBinary()
	sp, _ := spanList{{Start: 3, End: 9}, {Start: 12, End: 13}}.MarshalBinary()
	ss, _ := sessionList{{Key: workerKey("s"), Expires: 77}, {Key: workerKey("t"), Expires: 5, Tombstone: true}}.MarshalBinary()
	for _, seed := range [][]byte{lt, sp, ss, {}, {leaseTableV1, 1}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l leaseTable
		if l.UnmarshalBinary(b) == nil {
			enc, err := l.MarshalBinary()
			require.NoError(t, err, "a decoded lease table encodes")
			var again leaseTable
			require.NoError(t, again.UnmarshalBinary(enc))
			require.Equal(t, samePayloadAsID(l), samePayloadAsID(again))
		}
		var s spanList
		if s.UnmarshalBinary(b) == nil {
			enc, err := s.MarshalBinary()
			require.NoError(t, err)
			var again spanList
			require.NoError(t, again.UnmarshalBinary(enc))
			require.Equal(t, s, again)
		}
		var ses sessionList
		if ses.UnmarshalBinary(b) == nil {
			enc, err := ses.MarshalBinary()
			require.NoError(t, err)
			var again sessionList
			require.NoError(t, again.UnmarshalBinary(enc))
			require.Equal(t, ses, again)
		}
	})
}

// samePayloadAsID drops what the encoding does not keep apart: a payload
// id equal to the lease's own id is stored as "" (and "" means the lease
// id).
func samePayloadAsID(t leaseTable) leaseTable {
	out := append(leaseTable(nil), t...)
	for i := range out {
		if out[i].Payload == out[i].ID {
			out[i].Payload = ""
		}
	}
	return out
}
