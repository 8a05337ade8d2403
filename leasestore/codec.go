package leasestore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The lease table and the acked ranges are stored as one binary value each
// rather than as lists of maps. A consumer may hold 1,000 leases and as
// many acked ranges, and every pull and acknowledgement rewrites the whole
// consumer record, so the record's size is what every state change costs:
//
//   - DynamoDB counts the attribute names inside every map of a list and
//     bills writes per KB, and a list of 1,000 maps encodes to about
//     200 KB; the binary form is about a third of that.
//   - Decoding 1,000 nested maps dominated the CPU of a pull (docstore
//     matches every field of every map by name); one binary value decodes
//     in microseconds.
//
// Format (version 2): a version byte, then a uvarint count, then per lease
// its id and payload id (uvarint length and bytes; the payload id is empty
// when it equals the lease id), offset, start, count, generation, attempt,
// expires (varints), worker (uvarint length and bytes) and a flags byte
// (bit 0: requeued; bit 1: session lease; bits 2–3: the dead-letter reason
// of a dying lease, see reasonCodes). Version 1, written before leases
// could share a payload, lacks the payload id and offset and is still
// read. Per acked range: its start (varint) and length (uvarint).
//
// Sessions (sessionList): a version byte, a uvarint count, then per session
// its key (uvarint length and bytes), expiry (varint, Unix ms) and a flags
// byte (bit 0: a tombstone, whose expiry is its removal time).

const (
	leaseTableV1  = 1
	leaseTableV2  = 2
	spanListV1    = 1
	sessionListV1 = 1
	flagRequeued  = 1 << 0
	flagSession   = 1 << 1
	reasonShift   = 2
	reasonMask    = 3 << reasonShift
	flagTombstone = 1 << 0
)

// reasonCodes are the dead-letter reasons as stored in a lease's flags; 0
// is a lease that is not dying.
var reasonCodes = [...]string{1: ReasonDeliveryLimit, 2: ReasonExpired, 3: ReasonMaxLen}

func reasonCode(r string) byte {
	for i, s := range reasonCodes {
		if i > 0 && s == r {
			return byte(i)
		}
	}
	return 0
}

// leaseTable is the stored lease table: unacknowledged leases, by start.
type leaseTable []leaseRec

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (t leaseTable) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+len(t)*90)
	b = append(b, leaseTableV2)
	b = binary.AppendUvarint(b, uint64(len(t)))
	for i := range t {
		l := &t[i]
		b = appendString(b, l.ID)
		payload := l.Payload
		if payload == l.ID {
			payload = ""
		}
		b = appendString(b, payload)
		b = binary.AppendVarint(b, l.Offset)
		b = binary.AppendVarint(b, l.Start)
		b = binary.AppendVarint(b, l.Count)
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
		if l.Dying != "" {
			c := reasonCode(l.Dying)
			if c == 0 {
				return nil, fmt.Errorf("lease table: unknown dead-letter reason %q", l.Dying)
			}
			flags |= c << reasonShift
		}
		b = append(b, flags)
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (t *leaseTable) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	v := r.byte()
	if v != leaseTableV1 && v != leaseTableV2 {
		return fmt.Errorf("lease table: unknown version %d", v)
	}
	n := r.count()
	out := make(leaseTable, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		l := leaseRec{ID: r.string()}
		if v == leaseTableV2 {
			l.Payload, l.Offset = r.string(), r.varint()
		}
		l.Start, l.Count, l.Generation = r.varint(), r.varint(), r.varint()
		l.Attempt, l.Expires, l.Worker = r.varint(), r.varint(), r.string()
		flags := r.byte()
		l.Requeued = flags&flagRequeued != 0
		l.Session = flags&flagSession != 0
		if c := (flags & reasonMask) >> reasonShift; c != 0 {
			l.Dying = reasonCodes[c]
		}
		out = append(out, l)
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("lease table: %w", err)
	}
	*t = out
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

// spanList is the stored list of acknowledged ranges above the cursor,
// sorted and merged.
type spanList []span

// MarshalBinary implements encoding.BinaryMarshaler for docstore.
func (s spanList) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+len(s)*8)
	b = append(b, spanListV1)
	b = binary.AppendUvarint(b, uint64(len(s)))
	for _, sp := range s {
		b = binary.AppendVarint(b, sp.Start)
		b = binary.AppendUvarint(b, uint64(sp.End-sp.Start))
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore.
func (s *spanList) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if v := r.byte(); v != spanListV1 {
		return fmt.Errorf("acked ranges: unknown version %d", v)
	}
	n := r.count()
	out := make(spanList, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		start := r.varint()
		out = append(out, span{Start: start, End: start + int64(r.uvarint())})
	}
	if err := r.done(); err != nil {
		return fmt.Errorf("acked ranges: %w", err)
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
