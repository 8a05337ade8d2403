// Package headcfg is the part of a consumer's head record that describes
// the consumer (its id, type, filters, subscription, limits and delivery
// policies), stored as one binary attribute.
//
// Why one attribute: every operation of the lease store reads the head,
// and gocloud.dev's docstore decodes a stored record into a struct by
// looking each attribute's name up among the struct's fields, one by one,
// allocating a copy of every field it passes. A head of 17 to 21
// attributes (and its revision) cost about 200 to 250 allocations per read, a quarter of all the allocations of a
// publish, pull and acknowledge; with the descriptive fields packed into
// one, a head has nine attributes and costs about 45. DynamoDB bills every
// attribute name with every write of the head, too.
package headcfg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Config describes a consumer. It changes only when the consumer is
// reconfigured (paused, resumed, its policies set); the head's other
// attributes change with every reservation.
type Config struct {
	ID           string
	Type         string
	Filters      string // JSON of filter.Groups
	Subscription string
	Paused       bool
	CreatedAt    time.Time // UTC; stored to the nanosecond, any year
	MessageTTL   int64     // ms; 0 = none
	MaxLength    int64     // 0 = none
	RetryMin     int64     // ms
	RetryMax     int64     // ms; 0 = no retry policy
	MaxAttempts  int64     // 0 = the deployment's delivery limit
	AckTimeout   int64     // ms; 0 = the deployment's
	// Incarnation tells consumers that reuse an id apart (see leasestore).
	Incarnation string
	// Owner is the principal id of whoever created the consumer, where
	// that decides who may reconfigure it (a non-durable queue's); ""
	// for none. Stored from version 2 on.
	Owner string
}

// Versions of the encoding: the first byte of an encoded Config. A reader
// refuses bytes after the fields it knows: every reservation rewrites the
// head, so a reader that skipped a later version's fields would silently
// drop them. A new field needs a new version, which readers of the older
// ones refuse; every reader decodes every version up to its own.
//
//   - version1: the fields up to AckTimeout.
//   - version2: version1's, then Owner.
//
// MarshalBinary writes the oldest version that holds c: a Config without
// Owner is written as version1, byte for byte as before version2 existed,
// so a release that knows only version1 still reads every consumer but
// those that record an owner.
const (
	version1 = 1
	version2 = 2
)

// MarshalBinary implements encoding.BinaryMarshaler for docstore: version
// byte, then the strings (ID, Type, Filters, Subscription, Incarnation) as
// uvarint length and bytes, a Paused byte (0 or 1), CreatedAt (0, or 1
// and its Unix seconds as a varint and nanoseconds as a uvarint), the six
// numbers as varints, and in version2 Owner as uvarint length and bytes.
func (c Config) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 48+len(c.ID)+len(c.Type)+len(c.Filters)+len(c.Subscription)+len(c.Incarnation)+len(c.Owner))
	version := byte(version1)
	if c.Owner != "" {
		version = version2
	}
	b = append(b, version)
	for _, s := range [...]string{c.ID, c.Type, c.Filters, c.Subscription, c.Incarnation} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if c.Paused {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	if c.CreatedAt.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendVarint(b, c.CreatedAt.Unix())
		b = binary.AppendUvarint(b, uint64(c.CreatedAt.Nanosecond()))
	}
	for _, n := range [...]int64{c.MessageTTL, c.MaxLength, c.RetryMin, c.RetryMax, c.MaxAttempts, c.AckTimeout} {
		b = binary.AppendVarint(b, n)
	}
	if version >= version2 {
		b = binary.AppendUvarint(b, uint64(len(c.Owner)))
		b = append(b, c.Owner...)
	}
	return b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler for docstore. It
// reads version1 and version2 encodings (a version1 Config has no Owner).
// It fails on an unknown version, a truncated encoding, a flag byte other
// than 0 or 1, an empty Owner in version2 (which MarshalBinary never
// writes), or bytes after the last field, and leaves c unchanged then.
func (c *Config) UnmarshalBinary(b []byte) error {
	if len(b) == 0 {
		return errors.New("consumer config: empty")
	}
	version := b[0]
	if version != version1 && version != version2 {
		return fmt.Errorf("consumer config: unknown version %d", version)
	}
	r := reader{b: b[1:]}
	var out Config
	for _, s := range [...]*string{&out.ID, &out.Type, &out.Filters, &out.Subscription, &out.Incarnation} {
		*s = r.str()
	}
	out.Paused = r.flag()
	if r.flag() {
		sec := r.varint()
		ns := r.uvarint()
		if ns >= 1e9 {
			r.bad = true
		}
		out.CreatedAt = time.Unix(sec, int64(ns)).UTC()
	}
	for _, n := range [...]*int64{&out.MessageTTL, &out.MaxLength, &out.RetryMin, &out.RetryMax, &out.MaxAttempts, &out.AckTimeout} {
		*n = r.varint()
	}
	if version >= version2 {
		if out.Owner = r.str(); out.Owner == "" {
			r.bad = true
		}
	}
	if r.bad {
		return errors.New("consumer config: truncated or corrupt")
	}
	if len(r.b) > 0 {
		return fmt.Errorf("consumer config: %d bytes after the last field", len(r.b))
	}
	*c = out
	return nil
}

// reader reads what MarshalBinary wrote; bad is set once anything runs
// past the end.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// flag reads a byte that must be 0 or 1.
func (r *reader) flag() bool {
	c := r.byte()
	if c > 1 {
		r.bad = true
	}
	return c == 1
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	l, n := binary.Uvarint(r.b)
	if n <= 0 || l > uint64(len(r.b)-n) {
		r.bad = true
		return ""
	}
	s := string(r.b[n : n+int(l)])
	r.b = r.b[n+int(l):]
	return s
}
