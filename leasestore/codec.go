package leasestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// A block's leases, a head's block index and its sessions are stored as
// one binary value each rather than as lists of maps: DynamoDB bills the
// attribute names inside every map of a list, and decoding nested maps
// (docstore matches every field by name) costs far more CPU than one binary
// value.
//
// Block leases (blockLeases): a version byte, a uvarint count, then per
// lease its start and count (varints), its tag (8 bytes, big-endian), its
// generation, attempt and expiry (varints), its worker key (uvarint length
// and bytes), a flags byte (bit 0: requeued; bit 1: session lease; bits
// 2–4: the dead-letter reason of a dying lease, see reasonCodes; bit 5:
// delayed) and, from version 2 on, its life in seconds (uvarint, see
// leaseRec.Life). Version 1, which Herald wrote before Extend, is still
// read (life 0, reason codes 1–3); only version 2 is written.
//
// Block index (blockIndex): a version byte, a uvarint count, the earliest
// Until in whole seconds (varint; -1 when none), then per entry its start
// (varint; after the first, the gap from the previous entry's end), its
// count and count minus held (varints), its Until (uvarint: 0 for 0, else
// one more than its whole seconds after the earliest), its holder code and
// its stamp (uvarints).
//
// Sessions (sessionList): a version byte, a uvarint count, then per session
// its key (uvarint length and bytes), expiry (varint, Unix ms) and a flags
// byte (bit 0: a tombstone, whose expiry is its removal time).

const (
	blockLeasesV1 = 1
	blockLeasesV2 = 2
	blockIndexV1  = 1
	sessionListV1 = 1
	flagRequeued  = 1 << 0
	flagSession   = 1 << 1
	reasonShift   = 2
	reasonMask    = 7 << reasonShift
	flagDelayed   = 1 << 5
	flagTombstone = 1 << 0
)

// reasonCodes are the dead-letter reasons as stored in a lease's flags; 0
// is a lease that is not dying.
var reasonCodes = [...]string{1: ReasonDeliveryLimit, 2: ReasonExpired, 3: ReasonMaxLen, 4: ReasonRejected}

func reasonCode(r string) byte {
	for i, s := range reasonCodes {
		if i > 0 && s == r {
			return byte(i)
		}
	}
	return 0
}

// blockLeases is a block's stored leases.
type blockLeases []leaseRec

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (t blockLeases) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+len(t)*32)
	b = append(b, blockLeasesV2)
	b = binary.AppendUvarint(b, uint64(len(t)))
	for i := range t {
		l := &t[i]
		b = binary.AppendVarint(b, l.Start)
		b = binary.AppendVarint(b, l.Count)
		b = binary.BigEndian.AppendUint64(b, l.Tag)
		b = binary.AppendVarint(b, l.Generation)
		b = binary.AppendVarint(b, l.Attempt)
		b = binary.AppendVarint(b, l.Expires)
		b = appendString(b, l.Worker)
		var flags byte
		if l.Requeued {
			flags |= flagRequeued
		}
		if l.Session {
			flags |= flagSession
		}
		if l.Delayed {
			flags |= flagDelayed
		}
		if l.Dying != "" {
			c := reasonCode(l.Dying)
			if c == 0 {
				return nil, fmt.Errorf("block leases: unknown dead-letter reason %q", l.Dying)
			}
			flags |= c << reasonShift
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(max(l.Life, 0)))
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (t *blockLeases) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	v := r.byte()
	if v != blockLeasesV1 && v != blockLeasesV2 {
		return fmt.Errorf("block leases: unknown version %d", v)
	}
	n := r.count()
	out := make(blockLeases, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		l := leaseRec{Start: r.varint(), Count: r.varint(), Tag: r.uint64()}
		l.Generation, l.Attempt, l.Expires, l.Worker = r.varint(), r.varint(), r.varint(), r.string()
		flags := r.byte()
		l.Requeued = flags&flagRequeued != 0
		l.Session = flags&flagSession != 0
		l.Delayed = flags&flagDelayed != 0
		if c := (flags & reasonMask) >> reasonShift; c != 0 {
			if int(c) >= len(reasonCodes) || (v == blockLeasesV1 && c > 3) {
				r.fail(fmt.Errorf("unknown dead-letter reason code %d", c))
				break
			}
			l.Dying = reasonCodes[c]
		}
		if v >= blockLeasesV2 {
			if life := r.uvarint(); life <= uint64(MaxLeaseLife/time.Second) {
				l.Life = int64(life)
			} else {
				r.fail(errors.New("lease life out of range"))
			}
		}
		out = append(out, l)
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("block leases: %w", err)
	}
	*t = out
	return nil
}

// maxUntilSec is the largest Until, in seconds, an index entry can hold
// without overflowing milliseconds.
const maxUntilSec = math.MaxInt64 / 1000

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (x blockIndex) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 12+len(x)*8)
	b = append(b, blockIndexV1)
	b = binary.AppendUvarint(b, uint64(len(x)))
	var base int64 = -1 // the earliest Until in seconds
	for _, e := range x {
		if e.Until > 0 && (base < 0 || e.Until/1000 < base) {
			base = e.Until / 1000
		}
	}
	b = binary.AppendVarint(b, base)
	var end int64
	for i, e := range x {
		if i == 0 {
			b = binary.AppendVarint(b, e.Start)
		} else {
			b = binary.AppendVarint(b, e.Start-end)
		}
		end = e.Start + e.Count
		b = binary.AppendVarint(b, e.Count)
		b = binary.AppendVarint(b, e.Count-e.Held)
		if e.Until > 0 {
			b = binary.AppendUvarint(b, uint64(e.Until/1000-base)+1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(e.Holder))
		b = binary.AppendUvarint(b, e.Stamp)
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (x *blockIndex) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if v := r.byte(); v != blockIndexV1 {
		return fmt.Errorf("block index: unknown version %d", v)
	}
	n := r.count()
	base := r.varint()
	out := make(blockIndex, 0, n)
	var end int64
	for i := 0; i < n && r.err == nil; i++ {
		e := blockEntry{Start: r.varint()}
		if i > 0 {
			e.Start += end
		}
		e.Count = r.varint()
		e.Held = e.Count - r.varint()
		end = e.Start + e.Count
		if u := r.uvarint(); u > 0 {
			sec := base + int64(u) - 1
			if u > maxUntilSec || base > maxUntilSec || sec > maxUntilSec {
				r.fail(errors.New("until out of range"))
			}
			// A corrupt base could make it negative: a hint at or below 0
			// only means "read the block", so clamp it there, before the
			// multiplication can overflow.
			e.Until = max(sec, 0) * 1000
		}
		h := r.uvarint()
		if h > 1<<16-1 {
			r.fail(errors.New("holder code out of range"))
		}
		e.Holder, e.Stamp = uint16(h), r.uvarint()
		out = append(out, e)
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("block index: %w", err)
	}
	*x = out
	return nil
}

// session is one entry of a consumer's session list: an attached session,
// or the tombstone of one that was removed.
type session struct {
	Key string // workerKey of the session id
	// Expires is when the session's TTL lapses (Unix ms); for a tombstone,
	// when the session was removed.
	Expires   int64
	Tombstone bool
}

// sessionList is the stored list of sessions and tombstones.
type sessionList []session

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (s sessionList) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+len(s)*32)
	b = append(b, sessionListV1)
	b = binary.AppendUvarint(b, uint64(len(s)))
	for _, e := range s {
		b = appendString(b, e.Key)
		b = binary.AppendVarint(b, e.Expires)
		var flags byte
		if e.Tombstone {
			flags |= flagTombstone
		}
		b = append(b, flags)
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (s *sessionList) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if v := r.byte(); v != sessionListV1 {
		return fmt.Errorf("sessions: unknown version %d", v)
	}
	n := r.count()
	out := make(sessionList, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		e := session{Key: r.string(), Expires: r.varint()}
		e.Tombstone = r.byte()&flagTombstone != 0
		out = append(out, e)
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	*s = out
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errShort = errors.New("truncated")

// reader decodes the formats above; the first error sticks and later reads
// return zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail(errShort)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads an element count, bounded by the bytes left (every element
// takes at least one byte), so a corrupt count cannot allocate wildly.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return 0
	}
	return int(n)
}

func (r *reader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail(errShort)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bytes reads a length-prefixed byte string as a copy of its own, with no
// spare capacity (callers may append to what a lease hands out).
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return nil
	}
	out := make([]byte, n)
	copy(out, r.b[:n])
	r.b = r.b[n:]
	return out
}

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Remembered acknowledgements (ackMemory), a block's: a version byte, a
// uvarint count, then per entry the lease's offset in the block
// (uvarint), its tag (8 bytes, big-endian), the generation acknowledged
// (uvarint) and the outcome (a byte: 1 committed, 2 dead-lettered).
//
// Kept blocks (keptList), a head's, in the order they were kept: a version
// byte, a uvarint count, then per entry its start and its forget time in
// whole seconds, rounded up, each as a varint of the difference from the
// previous entry's (from 0 for the first): blocks settle in roughly the
// order they were reserved and are kept in the order they settle, so an
// entry takes about 2–3 bytes.

const (
	ackMemoryV1 = 1
	keptListV1  = 1
)

// ackOutcomes are the remembered outcomes as stored; 0 is none.
var ackOutcomes = [...]Outcome{1: OutcomeCommitted, 2: OutcomeDeadLettered}

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (m ackMemory) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+len(m)*12)
	b = append(b, ackMemoryV1)
	b = binary.AppendUvarint(b, uint64(len(m)))
	for _, a := range m {
		code := byte(0)
		for i, o := range ackOutcomes {
			if i > 0 && o == a.Outcome {
				code = byte(i)
			}
		}
		if code == 0 || a.Offset < 0 || a.Generation < 0 {
			return nil, fmt.Errorf("remembered acknowledgements: cannot store %+v", a)
		}
		b = binary.AppendUvarint(b, uint64(a.Offset))
		b = binary.BigEndian.AppendUint64(b, a.Tag)
		b = binary.AppendUvarint(b, uint64(a.Generation))
		b = append(b, code)
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (m *ackMemory) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if v := r.byte(); v != ackMemoryV1 {
		return fmt.Errorf("remembered acknowledgements: unknown version %d", v)
	}
	n := r.count()
	out := make(ackMemory, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		off, tag, gen := r.uvarint(), r.uint64(), r.uvarint()
		code := r.byte()
		if off > maxBlockEvents || gen > math.MaxInt64 || code == 0 || int(code) >= len(ackOutcomes) {
			r.fail(errors.New("entry out of range"))
			break
		}
		out = append(out, ackRec{Offset: int64(off), Tag: tag, Generation: int64(gen), Outcome: ackOutcomes[code]})
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("remembered acknowledgements: %w", err)
	}
	*m = out
	return nil
}

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (k keptList) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 4+len(k)*3)
	b = append(b, keptListV1)
	b = binary.AppendUvarint(b, uint64(len(k)))
	var start, sec int64
	for _, e := range k {
		s := (e.Until + 999) / 1000 // rounded up: never forgotten early
		b = binary.AppendVarint(b, e.Start-start)
		b = binary.AppendVarint(b, s-sec)
		start, sec = e.Start, s
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (k *keptList) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if v := r.byte(); v != keptListV1 {
		return fmt.Errorf("kept blocks: unknown version %d", v)
	}
	n := r.count()
	out := make(keptList, 0, n)
	var start, sec int64
	for i := 0; i < n && r.err == nil; i++ {
		ds, dt := r.varint(), r.varint()
		if ds < -maxUntilSec || ds > maxUntilSec || dt < -maxUntilSec || dt > maxUntilSec {
			r.fail(errors.New("entry out of range"))
			break
		}
		start, sec = start+ds, sec+dt
		if start < 1 || sec < 1 || sec > maxUntilSec {
			r.fail(errors.New("entry out of range"))
			break
		}
		out = append(out, keptBlock{Start: start, Until: sec * 1000})
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("kept blocks: %w", err)
	}
	*k = out
	return nil
}
