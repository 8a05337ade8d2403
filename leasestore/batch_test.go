package leasestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"
)

// jsonEvents returns n varied JSON events of about 700 bytes.
func jsonEvents(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"specversion":"1.0","id":"%016x","source":"/shops/%d","type":"com.example.order.created",`+
			`"time":"2026-03-%02dT%02d:%02d:%02d.%03dZ","data":{"orderId":"ORD-%08d","customer":{"id":"CUS-%06d","email":"c%d@example.com"},`+
			`"items":[{"sku":"SKU-%05d","quantity":%d,"unitPrice":%d.%02d}],"total":%d.%02d,"currency":"EUR","notes":"%x"}}`,
			rng.Uint64(), rng.IntN(50), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000),
			rng.IntN(1e8), rng.IntN(1e6), rng.IntN(1e6), rng.IntN(1e5), 1+rng.IntN(9), rng.IntN(500), rng.IntN(100),
			rng.IntN(5000), rng.IntN(100), rng.Uint64())
	}
	return out
}

func TestEventBatchRoundTrip(t *testing.T) {
	t.Parallel()
	noise := make([]byte, 4000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	for name, tc := range map[string]struct {
		in    eventBatch
		codec byte
	}{
		"empty":          {eventBatch{}, codecRaw},
		"tiny":           {eventBatch{Events: [][]byte{[]byte("e1")}, Published: []int64{1_893_456_000_000}}, codecRaw},
		"json":           {eventBatch{Events: jsonEvents(100)}, codecZstd},
		"incompressible": {eventBatch{Events: [][]byte{noise}, Published: []int64{-5}}, codecRaw},
		"empty event":    {eventBatch{Events: [][]byte{{}, []byte("x")}, Published: []int64{0}}, codecRaw},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := tc.in.MarshalBinary()
			require.NoError(t, err)
			require.Equal(t, byte(eventBatchV1), b[0])
			require.Equal(t, tc.codec, b[1], "codec")
			var out eventBatch
			require.NoError(t, out.UnmarshalBinary(b))
			require.Equal(t, len(tc.in.Events), len(out.Events))
			for i := range tc.in.Events {
				require.True(t, bytes.Equal(tc.in.Events[i], out.Events[i]), "event %d", i)
				var want int64
				if i < len(tc.in.Published) {
					want = tc.in.Published[i]
				}
				require.Equal(t, want, out.Published[i], "published %d (missing reads 0)", i)
			}
		})
	}
}

func TestEventBatchCompressesJSON(t *testing.T) {
	t.Parallel()
	in := eventBatch{Events: jsonEvents(100)}
	raw := 0
	for _, e := range in.Events {
		raw += len(e)
	}
	b, err := in.MarshalBinary()
	require.NoError(t, err)
	require.Less(t, len(b), raw/2, "100 varied JSON events of %d bytes pack to %d", raw, len(b))
}

func TestEventBatchRefusesCorruptValues(t *testing.T) {
	t.Parallel()
	good, err := eventBatch{Events: jsonEvents(20)}.MarshalBinary()
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"empty":           {},
		"unknown version": {9, codecRaw, 0},
		"no codec":        {eventBatchV1},
		"unknown codec":   {eventBatchV1, 7, 0},
		"truncated raw":   {eventBatchV1, codecRaw, 2, 5, 'a'},
		"trailing bytes":  {eventBatchV1, codecRaw, 0, 0},
		"bad zstd":        {eventBatchV1, codecZstd, 1, 2, 3, 4},
		"truncated zstd":  good[:len(good)/2],
	} {
		var out eventBatch
		require.Error(t, out.UnmarshalBinary(b), name)
	}
}

// TestPayloadOfOldFormatIsRead: a payload record written before
// eventBatch (its events a list of binaries, its times a list of
// numbers) still reads, so leases in flight across an upgrade deliver.
func TestPayloadOfOldFormatIsRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = coll.Close() })
	require.NoError(t, coll.Put(ctx, map[string]any{
		"key": payloadKey("c", "old"), "kind": kindPayload, "consumer": "c",
		"events": []any{[]byte("e1"), []byte("e2")}, "published": []any{int64(5), int64(6)},
	}))
	s := New(coll, Options{})
	pd, err := s.getPayload(ctx, "c", "old")
	require.NoError(t, err)
	got, err := pd.events(&leaseRec{ID: "l", Payload: "old", Offset: 1, Count: 1})
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("e2")}, got)
	require.Equal(t, int64(6), pd.publishedAt(1))

	// And a new one holds no list fields at all.
	require.NoError(t, coll.Put(ctx, newPayloadDoc("c", "new", [][]byte{[]byte("e3")}, nil)))
	m := map[string]any{"key": payloadKey("c", "new")}
	require.NoError(t, coll.Get(ctx, m))
	require.NotContains(t, m, "events")
	require.NotContains(t, m, "published")
	pd, err = s.getPayload(ctx, "c", "new")
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("e3")}, pd.Batch.Events)
}

// FuzzRecordCodecs decodes arbitrary bytes as every binary value the
// store keeps in its records (the lease table, acked ranges, sessions and
// a payload's event batch): decoding never panics, and whatever decodes
// encodes again to a value that decodes to the same. It also packs the
// input as a batch of events and requires them back unchanged.
func FuzzRecordCodecs(f *testing.F) {
	lt, _ := leaseTable{{ID: "a", Payload: "p", Offset: 2, Start: 9, Count: 3, Worker: workerKey("w"), Attempt: 2, Dying: ReasonExpired}}.MarshalBinary()
	sp, _ := spanList{{Start: 3, End: 9}, {Start: 12, End: 13}}.MarshalBinary()
	ss, _ := sessionList{{Key: workerKey("s"), Expires: 77, Tombstone: true}}.MarshalBinary()
	eb, _ := eventBatch{Events: jsonEvents(30), Published: []int64{4}}.MarshalBinary()
	for _, seed := range [][]byte{lt, sp, ss, eb, {}, {eventBatchV1, codecZstd}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l leaseTable
		if l.UnmarshalBinary(b) == nil {
			enc, err := l.MarshalBinary()
			if err != nil {
				t.Fatalf("re-encode lease table: %v", err)
			}
			var again leaseTable
			if err := again.UnmarshalBinary(enc); err != nil {
				t.Fatalf("decode re-encoded lease table: %v", err)
			}
			require.Equal(t, normalizeLeases(l), normalizeLeases(again))
		}
		var s spanList
		if s.UnmarshalBinary(b) == nil {
			enc, _ := s.MarshalBinary()
			var again spanList
			require.NoError(t, again.UnmarshalBinary(enc))
			require.Equal(t, s, again)
		}
		var ses sessionList
		if ses.UnmarshalBinary(b) == nil {
			enc, _ := ses.MarshalBinary()
			var again sessionList
			require.NoError(t, again.UnmarshalBinary(enc))
			require.Equal(t, ses, again)
		}
		var e eventBatch
		if e.UnmarshalBinary(b) == nil {
			enc, err := e.MarshalBinary()
			require.NoError(t, err)
			var again eventBatch
			require.NoError(t, again.UnmarshalBinary(enc))
			require.Equal(t, e, again)
		}
		// b as events: split at every 0xff byte.
		in := eventBatch{Events: bytes.Split(b, []byte{0xff})}
		enc, err := in.MarshalBinary()
		require.NoError(t, err)
		var out eventBatch
		require.NoError(t, out.UnmarshalBinary(enc))
		require.Equal(t, len(in.Events), len(out.Events))
		for i := range in.Events {
			require.True(t, bytes.Equal(in.Events[i], out.Events[i]), "event %d", i)
		}
	})
}

// normalizeLeases drops what encoding does not keep apart: a payload id
// equal to the lease id is stored as "".
func normalizeLeases(t leaseTable) leaseTable {
	out := append(leaseTable(nil), t...)
	for i := range out {
		if out[i].Payload == out[i].ID {
			out[i].Payload = ""
		}
	}
	return out
}
