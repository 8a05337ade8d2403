package leasestore

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// eventBatch is what a payload record stores: encoded events and their
// enqueue times, packed into one binary value (field "batch") and
// compressed with zstd when that saves at least an eighth.
//
// Why: DynamoDB bills a write by the started KiB of the whole item, and a
// delete by the size of the item deleted, so a payload of 100 events of
// 1 KiB costs about 100 write units to write and 100 more to delete. JSON
// events of one stream repeat their attribute names, sources and types;
// zstd keeps a typical batch at a third of its size or less (figures in
// docs/cost-model.md). One value instead of a list of binaries also drops
// DynamoDB's per-element overhead and Firestore's per-value index entries.
//
// Format (version 1): a version byte; a codec byte (0: the body follows
// as is; 1: the body follows as one zstd frame); the body: a uvarint event
// count n, n events (uvarint length and bytes), then n enqueue times
// (varint, Unix ms, 0 when unknown).
type eventBatch struct {
	Events    [][]byte
	Published []int64 // per event; may be shorter than Events (missing = 0)
	// raw stores the batch uncompressed (Options.Uncompressed).
	raw bool
}

const (
	eventBatchV1 = 1
	codecRaw     = 0
	codecZstd    = 1
	// maxBatchBytes bounds what a stored batch may decompress to: far above
	// any payload the store writes (the item limits are 400 KB and 1 MiB,
	// and an event is compressed at least a little), small enough that a
	// corrupt or hostile value cannot exhaust memory.
	maxBatchBytes = 16 << 20
)

var (
	// SpeedFastest: on a batch of 100 ~1 KiB JSON events it spends about
	// half of SpeedDefault's CPU for a record 3% larger (23.4 KB against
	// 22.6 KB of 112 KB). S2 (klauspost/compress/s2) would spend a quarter
	// of that again but write 36 KB, which on PostgreSQL costs more than it
	// saves: the larger base64 text makes the server TOAST half as many
	// rows again (docs/benchmarks.md, "Lease store on PostgreSQL").
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBatchBytes))
		if err != nil {
			panic(err) // only for invalid options
		}
		return d
	})
)

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (b eventBatch) MarshalBinary() ([]byte, error) {
	size := 2 + binary.MaxVarintLen64
	for _, e := range b.Events {
		size += len(e) + binary.MaxVarintLen32 + binary.MaxVarintLen64
	}
	// The two header bytes go first, so that an uncompressed batch is
	// built in place, in one allocation.
	buf := make([]byte, 2, size)
	buf[0] = eventBatchV1
	buf = binary.AppendUvarint(buf, uint64(len(b.Events)))
	for _, e := range b.Events {
		buf = binary.AppendUvarint(buf, uint64(len(e)))
		buf = append(buf, e...)
	}
	for i := range b.Events {
		var p int64
		if i < len(b.Published) {
			p = b.Published[i]
		}
		buf = binary.AppendVarint(buf, p)
	}
	body := buf[2:]
	if len(body) >= 256 && !b.raw {
		out := make([]byte, 2, 2+len(body)/3)
		out[0], out[1] = eventBatchV1, codecZstd
		out = zstdEncoder().EncodeAll(body, out)
		if len(out)-2 <= len(body)-len(body)/8 {
			return out, nil
		}
		// Does not pay: store as is.
	}
	buf[1] = codecRaw
	return buf, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (b *eventBatch) UnmarshalBinary(data []byte) error {
	r := reader{b: data}
	if v := r.byte(); v != eventBatchV1 {
		if r.err != nil {
			return fmt.Errorf("event batch: %w", r.err)
		}
		return fmt.Errorf("event batch: unknown version %d", v)
	}
	var body []byte
	switch c := r.byte(); {
	case r.err != nil:
		return fmt.Errorf("event batch: %w", r.err)
	case c == codecRaw:
		body = r.b
	case c == codecZstd:
		var err error
		if body, err = zstdDecoder().DecodeAll(r.b, nil); err != nil {
			return fmt.Errorf("event batch: %w", err)
		}
	default:
		return fmt.Errorf("event batch: unknown codec %d", c)
	}
	r = reader{b: body}
	n := r.count()
	out := eventBatch{Events: make([][]byte, 0, n), Published: make([]int64, 0, n)}
	for i := 0; i < n && r.err == nil; i++ {
		out.Events = append(out.Events, r.bytes())
	}
	for i := 0; i < n && r.err == nil; i++ {
		out.Published = append(out.Published, r.varint())
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("event batch: %w", err)
	}
	*b = out
	return nil
}
