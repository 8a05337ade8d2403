package leasestore

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBlockLeasesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []blockLeases{
		{},
		{{Start: 1, Count: 100, Tag: newTag(), Worker: workerKey("w"), Generation: 2, Attempt: 3, Expires: 1_893_456_000_000}},
		{
			{Start: 5, Count: 1, Tag: 7, Requeued: true, Attempt: 1},
			{Start: 6, Count: 1, Tag: 8, Worker: workerKey("s"), Session: true, Expires: 9},
			{Start: 7, Count: 2, Tag: 9, Dying: ReasonMaxLen, Expires: 4},
			{Start: 9, Count: 1, Tag: 10, Dying: ReasonExpired},
			{Start: 10, Count: 1, Tag: 11, Dying: ReasonDeliveryLimit},
		},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out blockLeases
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
	_, err := blockLeases{{Dying: "BORED"}}.MarshalBinary()
	require.Error(t, err, "an unknown reason is refused, not written as none")
}

func TestBlockIndexRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []blockIndex{
		{},
		{{Start: 1, Count: 100, Held: 100, Until: 1_893_456_000_000, Holder: holderCode(workerKey("w"), false), Stamp: 3}},
		{{Start: 1, Count: 1, Held: 1, Until: 1_893_456_009_000}, {Start: 2, Count: 5, Held: 2, Until: 0, Holder: holderCode(workerKey("s"), true)}, {Start: 1 << 40, Count: 1, Until: 1_893_456_000_000}},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out blockIndex
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
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
}

func TestAckMemoryRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []ackMemory{
		{},
		{{Offset: 0, Tag: newTag(), Generation: 0, Outcome: OutcomeCommitted}},
		{{Offset: 4094, Tag: newTag(), Generation: 1 << 40, Outcome: OutcomeDeadLettered}, {Offset: 3, Tag: 7, Generation: 2, Outcome: OutcomeCommitted}},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out ackMemory
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
	_, err := ackMemory{{Outcome: OutcomeStale}}.MarshalBinary()
	require.Error(t, err, "only committed and dead_lettered are remembered")
	var out ackMemory
	require.Error(t, out.UnmarshalBinary([]byte{ackMemoryV1, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9}), "unknown outcome")
	require.Error(t, out.UnmarshalBinary([]byte{ackMemoryV1, 1, 0}), "truncated")
}

func TestKeptListRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []keptList{
		{},
		{{Start: 1, Until: 1_893_456_000_000}},
		// In the order kept, which is not the order of starts.
		{{Start: 901, Until: 1_893_456_000_000}, {Start: 1, Until: 1_893_456_001_000}, {Start: 1 << 40, Until: 1_893_456_000_000}},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err)
		var out keptList
		require.NoError(t, out.UnmarshalBinary(b))
		require.Equal(t, in, out)
	}
	b, err := keptList{{Start: 5, Until: 1_893_456_000_001}}.MarshalBinary()
	require.NoError(t, err)
	var out keptList
	require.NoError(t, out.UnmarshalBinary(b))
	require.Equal(t, int64(1_893_456_001_000), out[0].Until, "a forget time is rounded up, never down")
	require.Error(t, out.UnmarshalBinary([]byte{keptListV1, 1, 2, 0, 0}), "a start below 1")
}

// TestForgetKeepsTheLatest: past MaxRememberedBlocks the blocks kept first
// are forgotten first, whatever their starts and however close their
// forget times (stored to the second): a batch settled late, at a low
// position, is not pushed out by the ones settled before it.
func TestForgetKeepsTheLatest(t *testing.T) {
	t.Parallel()
	d := &consumerDoc{}
	const until = 1_893_456_000_000
	for i := range MaxRememberedBlocks {
		d.keep(int64(1000+i), until)
	}
	d.keep(1, until) // settled last
	d.keep(1, until) // once
	b, err := d.Kept.MarshalBinary()
	require.NoError(t, err)
	require.Less(t, len(b), 3*MaxRememberedBlocks+16, "about 3 bytes a block, at most")
	require.NoError(t, d.Kept.UnmarshalBinary(b))
	require.Equal(t, []int64{1000}, d.forget(until-1), "the first kept goes")
	require.Len(t, d.Kept, MaxRememberedBlocks)
	require.Equal(t, int64(1), d.Kept[len(d.Kept)-1].Start)
	gone := d.forget(until)
	require.Len(t, gone, MaxRememberedBlocks, "all due")
	require.Nil(t, d.Kept)
}

func TestCodecRejectsCorruptInput(t *testing.T) {
	t.Parallel()
	good, err := blockLeases{{Start: 3, Count: 2, Tag: 1, Attempt: 1, Worker: workerKey("")}}.MarshalBinary()
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"version":        {9},
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"huge count":     {blockLeasesV1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		var out blockLeases
		require.Error(t, out.UnmarshalBinary(b), name)
	}
	var x blockIndex
	require.Error(t, x.UnmarshalBinary([]byte{blockIndexV1, 2, 4}), "truncated index")
}

// TestRecordsAreSmall holds the sizes the package doc gives: what an
// acknowledgement rewrites (a block) and what a reservation rewrites (the
// head's index) stay a few KiB.
func TestRecordsAreSmall(t *testing.T) {
	t.Parallel()
	one, _ := blockLeases{{Start: 1 << 30, Count: 100, Tag: newTag(), Worker: workerKey("w"), Generation: 1, Attempt: 2, Expires: 1_893_456_000_000}}.MarshalBinary()
	require.Less(t, len(one), 48, "a pulled batch's block")
	singles := make(blockLeases, 100)
	for i := range singles {
		singles[i] = leaseRec{Start: 1<<30 + int64(i), Count: 1, Tag: newTag(), Worker: workerKey("s"), Session: true, Attempt: 1, Expires: 1_893_456_000_000}
	}
	b, _ := singles.MarshalBinary()
	require.Less(t, len(b), 4096, "a stream batch of 100 single-event leases")
	idx := make(blockIndex, MaxInFlight)
	for i := range idx {
		idx[i] = blockEntry{Start: 1<<30 + int64(i), Count: 1, Held: 1, Until: 1_893_456_000_000 + int64(i)*1000, Holder: holderCode(workerKey("s"), true), Stamp: 1}
	}
	b, _ = idx.MarshalBinary()
	require.Less(t, len(b), 8*1024, "an index of 1,000 open single-event blocks of sessions, the worst case")
	idx = idx[:100]
	for i := range idx {
		idx[i] = blockEntry{Start: 1<<30 + int64(i)*10, Count: 10, Held: 10, Until: 1_893_456_000_000 + int64(i%60)*1000, Holder: holderCode(workerKey(string(rune(i))), false)}
	}
	b, _ = idx.MarshalBinary()
	require.Less(t, len(b), 700, "100 open pulled batches, each its own worker's")
}

func FuzzRecordCodecs(f *testing.F) {
	bl, _ := blockLeases{{Start: 1, Count: 2, Tag: 3, Worker: workerKey("w"), Attempt: 1}, {Start: 3, Count: 1, Dying: ReasonExpired}}.MarshalBinary()
	bi, _ := blockIndex{{Start: 3, Count: 9, Held: 2, Holder: 300, Until: 5000}}.MarshalBinary()
	ss, _ := sessionList{{Key: workerKey("s"), Expires: 77}, {Key: workerKey("t"), Expires: 5, Tombstone: true}}.MarshalBinary()
	am, _ := ackMemory{{Offset: 2, Tag: 9, Generation: 1, Outcome: OutcomeCommitted}}.MarshalBinary()
	kl, _ := keptList{{Start: 9, Until: 7000}, {Start: 3, Until: 5000}}.MarshalBinary()
	for _, seed := range [][]byte{bl, bi, ss, am, kl, {}, {blockLeasesV1, 1}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l blockLeases
		if l.UnmarshalBinary(b) == nil {
			again, err := l.MarshalBinary()
			require.NoError(t, err)
			var back blockLeases
			require.NoError(t, back.UnmarshalBinary(again))
			require.Equal(t, l, back)
		}
		var x blockIndex
		if x.UnmarshalBinary(b) == nil {
			again, err := x.MarshalBinary()
			require.NoError(t, err)
			var back blockIndex
			require.NoError(t, back.UnmarshalBinary(again))
			require.Equal(t, x, back)
		}
		var eb eventBatch
		if eb.UnmarshalBinary(b) == nil {
			again, err := eb.MarshalBinary()
			require.NoError(t, err)
			var back eventBatch
			require.NoError(t, back.UnmarshalBinary(again))
			require.Equal(t, len(eb.Events), len(back.Events))
		}
		var m ackMemory
		if m.UnmarshalBinary(b) == nil {
			again, err := m.MarshalBinary()
			require.NoError(t, err)
			var back ackMemory
			require.NoError(t, back.UnmarshalBinary(again))
			require.Equal(t, m, back)
		}
		var k keptList
		if k.UnmarshalBinary(b) == nil {
			again, err := k.MarshalBinary()
			require.NoError(t, err)
			var back keptList
			require.NoError(t, back.UnmarshalBinary(again))
			require.Equal(t, k, back)
		}
		var s sessionList
		if s.UnmarshalBinary(b) == nil {
			again, err := s.MarshalBinary()
			require.NoError(t, err)
			var back sessionList
			require.NoError(t, back.UnmarshalBinary(again))
			require.Equal(t, s, back)
		}
	})
}

func TestEventBatchRoundTrip(t *testing.T) {
	t.Parallel()
	big := make([][]byte, 50)
	for i := range big {
		big[i] = []byte(`{"specversion":"1.0","type":"com.example.order","data":{"n":` + string(rune('0'+i%10)) + `}}`)
	}
	for name, in := range map[string]eventBatch{
		"empty":      {},
		"small":      {Events: [][]byte{[]byte("a"), {}}, Published: []int64{5}},
		"compressed": {Events: big, Published: make([]int64, len(big))},
		"raw":        {Events: big, Published: make([]int64, len(big)), raw: true},
	} {
		b, err := in.MarshalBinary()
		require.NoError(t, err, name)
		switch name {
		case "compressed":
			require.Equal(t, byte(codecZstd), b[1], "repetitive JSON compresses")
		case "raw":
			require.Equal(t, byte(codecRaw), b[1])
		}
		var out eventBatch
		require.NoError(t, out.UnmarshalBinary(b), name)
		require.Len(t, out.Events, len(in.Events), name)
		for i := range in.Events {
			require.Equal(t, string(in.Events[i]), string(out.Events[i]), name)
			want := int64(0)
			if i < len(in.Published) {
				want = in.Published[i]
			}
			require.Equal(t, want, out.Published[i], name)
		}
	}
	var out eventBatch
	require.Error(t, out.UnmarshalBinary([]byte{eventBatchV1, 9}), "unknown codec")
	require.Error(t, out.UnmarshalBinary([]byte{eventBatchV1, codecZstd, 1, 2, 3}), "corrupt frame")
}

// FuzzEventBatchRoundTrip: whatever the events, a batch reads back
// exactly what was written, compressed or not, and both forms read the
// same.
func FuzzEventBatchRoundTrip(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"1","type":"com.example.order","data":{"sku":"a-1","qty":3}}`), uint8(7), int64(1_765_000_000_000))
	f.Add([]byte{}, uint8(1), int64(0))
	f.Add([]byte{0, 1, 2, 3, 255}, uint8(200), int64(-1))
	f.Fuzz(func(t *testing.T, event []byte, n uint8, published int64) {
		in := eventBatch{}
		for i := range int(n) {
			// Events that differ a little, as a stream's do.
			e := append(slices.Clone(event), byte(i))
			in.Events = append(in.Events, e)
			in.Published = append(in.Published, published+int64(i))
		}
		var first *eventBatch
		for _, w := range []eventBatch{
			{Events: in.Events, Published: in.Published},
			{Events: in.Events, Published: in.Published, raw: true},
		} {
			b, err := w.MarshalBinary()
			require.NoError(t, err)
			var out eventBatch
			require.NoError(t, out.UnmarshalBinary(b))
			require.Len(t, out.Events, len(in.Events))
			for i := range in.Events {
				require.Equal(t, in.Events[i], out.Events[i])
				require.Equal(t, in.Published[i], out.Published[i])
			}
			if first == nil {
				first = &out
			} else {
				require.Equal(t, *first, out)
			}
		}
	})
}
