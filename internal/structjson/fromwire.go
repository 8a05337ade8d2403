package structjson

import (
	"bytes"
	"math"
	"slices"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// A Struct can carry its fields encoded rather than decoded: a Struct
// whose Go fields are empty and whose unknown fields
// (protoreflect.Message.GetUnknown) hold the encoded map entries, as Wire
// builds and as Lazy keeps them from a request. proto.Marshal writes such
// a Struct byte for byte what the decoded one would be, so a gRPC publish
// can echo each message without building it; Encode reads the entries
// from the wire (FromWire) to get its JSON.

// Lazy returns a Struct that carries raw, the encoded fields of a
// google.protobuf.Struct (the contents of its length-delimited field in
// the enclosing message), without decoding them: its Go fields are empty
// and raw is kept as its unknown fields (not copied: raw must not change
// while the Struct is used). ok is false, and no Struct returned, unless
// raw is in the form every encoder writes and proto.Unmarshal would take
// without a complaint: map entries of a key then a value, a value of
// exactly one kind, strings of valid UTF-8, finite numbers, nesting at
// most maxDepth deep, no member repeated, no field proto.Unmarshal would
// keep as unknown. For any other raw the caller decodes it as usual,
// and gets proto.Unmarshal's own result and error.
//
// It checks raw in one pass that builds nothing; Encode of the Struct
// then needs a second (FromWire).
func Lazy(raw []byte) (*structpb.Struct, bool) {
	r := newWireReader(raw, nil)
	ok := r.structBody(raw, 1)
	r.release()
	if !ok {
		return nil, false
	}
	s := &structpb.Struct{}
	// Capped: raw is usually part of a larger buffer (the request), and
	// an append to the Struct's unknown fields must not run into it.
	s.ProtoReflect().SetUnknown(raw[:len(raw):len(raw)])
	return s, true
}

// FromWire returns the compact JSON of the Struct whose encoded fields
// are raw: Encode of the Struct proto.Unmarshal makes of raw, or an error
// when proto.Unmarshal or Encode refuses. Raw in the form Lazy takes is
// transcoded in one pass (members sorted by key, as Encode writes them);
// any other goes through proto.Unmarshal and Encode themselves.
// TestFromWireMatchesUnmarshal and FuzzFromWireMatchesUnmarshal hold the
// two equal.
func FromWire(raw []byte) ([]byte, error) {
	r := newWireReader(raw, make([]byte, 0, len(raw)))
	ok := r.structBody(raw, 1)
	out := r.out
	r.release()
	if ok {
		return out, nil
	}
	s := &structpb.Struct{}
	if err := proto.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return encodeFields(s)
}

// wireReader walks the encoding of a Struct on the fast path, checking
// it and, with emit, appending its JSON to out. Any input off the fast
// path makes its methods return false.
type wireReader struct {
	raw     []byte // the Struct's encoding, which every slice read is part of
	out     []byte
	emit    bool
	entries []wireEntry // the members of the open Structs, innermost last
}

// wireEntry is one member of a Struct: where in wireReader.raw its key
// and the encoding of its Value are. Offsets rather than slices: the
// entries hold no pointers, so appending them needs no write barriers
// and the collector does not scan them.
type wireEntry struct{ key, keyEnd, value, valueEnd int32 }

// readers keeps the entry stacks of wireReaders: a message has dozens of
// members, and a fresh stack grown per message cost more than its reading.
var readers = sync.Pool{New: func() any { return &wireReader{entries: make([]wireEntry, 0, 64)} }}

// newWireReader returns a reader of raw that appends to out, emitting
// JSON unless out is nil. raw must be at most 2 GiB (a gRPC message is
// far smaller).
func newWireReader(raw, out []byte) *wireReader {
	r := readers.Get().(*wireReader)
	r.raw, r.out, r.emit = raw, out, out != nil
	return r
}

func (r *wireReader) release() {
	if cap(r.entries) > maxPooledEntries {
		return // a message of very many members: let its stack go
	}
	r.raw, r.out, r.entries = nil, nil, r.entries[:0]
	readers.Put(r)
}

// maxPooledEntries bounds the entry stacks the pool keeps (16 bytes each).
const maxPooledEntries = 4096

// span is the offsets of b, a part of r.raw, in r.raw.
func (r *wireReader) span(b []byte) (start, end int32) {
	start = int32(cap(r.raw) - cap(b))
	return start, start + int32(len(b))
}

func (r *wireReader) keyOf(e wireEntry) []byte   { return r.raw[e.key:e.keyEnd] }
func (r *wireReader) valueOf(e wireEntry) []byte { return r.raw[e.value:e.valueEnd] }

func (r *wireReader) structBody(b []byte, depth int) bool {
	if depth > maxDepth {
		return false
	}
	base := len(r.entries)
	defer func() { r.entries = r.entries[:base] }()
	for len(b) > 0 {
		if b[0] != tagStructFields {
			return false
		}
		entry, n := protowire.ConsumeBytes(b[1:])
		if n < 0 {
			return false
		}
		b = b[1+n:]
		if len(entry) == 0 || entry[0] != tagEntryKey {
			return false
		}
		key, n := protowire.ConsumeBytes(entry[1:])
		if n < 0 || !utf8.Valid(key) {
			return false
		}
		entry = entry[1+n:]
		if len(entry) == 0 || entry[0] != tagEntryValue {
			return false
		}
		value, n := protowire.ConsumeBytes(entry[1:])
		if n < 0 || 1+n != len(entry) {
			return false
		}
		var e wireEntry
		e.key, e.keyEnd = r.span(key)
		e.value, e.valueEnd = r.span(value)
		r.entries = append(r.entries, e)
	}
	mine := r.entries[base:]
	slices.SortFunc(mine, func(a, b wireEntry) int { return bytes.Compare(r.keyOf(a), r.keyOf(b)) })
	for i := 1; i < len(mine); i++ {
		if bytes.Equal(r.keyOf(mine[i-1]), r.keyOf(mine[i])) {
			return false // proto keeps the last; leave that to proto
		}
	}
	r.put('{')
	for i := base; i < base+len(mine); i++ {
		if i > base {
			r.put(',')
		}
		e := r.entries[i] // not mine[i]: nested members may grow r.entries
		r.str(r.keyOf(e))
		r.put(':')
		if !r.value(r.valueOf(e), depth) {
			return false
		}
	}
	r.put('}')
	return true
}

// value reads the encoding of a Value of exactly one kind.
func (r *wireReader) value(b []byte, depth int) bool {
	if len(b) < 2 {
		return false
	}
	tag, body := b[0], b[1:]
	switch tag {
	case tagNull, tagBool:
		v, n := protowire.ConsumeVarint(body)
		if n != len(body) {
			return false
		}
		switch {
		case tag == tagNull:
			r.puts("null")
		case v != 0:
			r.puts("true")
		default:
			r.puts("false")
		}
		return true
	case tagNumber:
		v, n := protowire.ConsumeFixed64(body)
		if n != len(body) {
			return false
		}
		f := math.Float64frombits(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		if r.emit {
			r.out, _ = appendNumber(r.out, f)
		}
		return true
	}
	inner, n := protowire.ConsumeBytes(body)
	if n != len(body) {
		return false
	}
	switch tag {
	case tagString:
		if !utf8.Valid(inner) {
			return false
		}
		r.str(inner)
		return true
	case tagStruct:
		return r.structBody(inner, depth+1)
	case tagList:
		return r.list(inner, depth+1)
	}
	return false
}

func (r *wireReader) list(b []byte, depth int) bool {
	if depth > maxDepth {
		return false
	}
	r.put('[')
	for first := true; len(b) > 0; first = false {
		if b[0] != tagListValues {
			return false
		}
		v, n := protowire.ConsumeBytes(b[1:])
		if n < 0 {
			return false
		}
		b = b[1+n:]
		if !first {
			r.put(',')
		}
		if !r.value(v, depth) {
			return false
		}
	}
	r.put(']')
	return true
}

func (r *wireReader) put(c byte) {
	if r.emit {
		r.out = append(r.out, c)
	}
}

func (r *wireReader) puts(s string) {
	if r.emit {
		r.out = append(r.out, s...)
	}
}

// str writes s (valid UTF-8) quoted as appendString does.
func (r *wireReader) str(s []byte) {
	if !r.emit {
		return
	}
	r.out = append(r.out, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		r.out = append(r.out, s[start:i]...)
		r.out = appendEscape(r.out, c)
		start = i + 1
	}
	r.out = append(r.out, s[start:]...)
	r.out = append(r.out, '"')
}
