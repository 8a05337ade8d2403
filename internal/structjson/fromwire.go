package structjson

import (
	"bytes"
	"math"
	"slices"
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
	var r wireReader
	if !r.structBody(raw, 1) {
		return nil, false
	}
	s := &structpb.Struct{}
	s.ProtoReflect().SetUnknown(raw)
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
	r := wireReader{out: make([]byte, 0, len(raw)), emit: true}
	if r.structBody(raw, 1) {
		return r.out, nil
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
	out     []byte
	emit    bool
	entries []wireEntry // the members of the open Structs, innermost last
}

// wireEntry is one member of a Struct: its key and the encoding of its
// Value.
type wireEntry struct{ key, value []byte }

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
		r.entries = append(r.entries, wireEntry{key, value})
	}
	mine := r.entries[base:]
	slices.SortFunc(mine, func(a, b wireEntry) int { return bytes.Compare(a.key, b.key) })
	for i := 1; i < len(mine); i++ {
		if bytes.Equal(mine[i-1].key, mine[i].key) {
			return false // proto keeps the last; leave that to proto
		}
	}
	r.put('{')
	for i := base; i < base+len(mine); i++ {
		if i > base {
			r.put(',')
		}
		e := r.entries[i] // not mine[i]: nested members may grow r.entries
		r.str(e.key)
		r.put(':')
		if !r.value(e.value, depth) {
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
