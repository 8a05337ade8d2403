package structjson

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/heraldevents/herald/internal/strictjson"
)

// Wire returns a Struct that marshals to the same protobuf bytes as
// Decode(b)'s Struct, built without it: its fields are empty and its
// unknown fields (protoreflect.Message.GetUnknown) hold the encoded map
// entries, which proto.Marshal writes as they are. So a gRPC stream sends
// the message of every event it delivers without building a Struct, a
// Value per member and a map each, only to encode them at once; a
// receiver decodes the usual Struct.
//
// Only what marshals the Struct may use it: its Go fields say nothing.
// An input the wire path does not take (see Decode) gets Decode's Struct,
// or its error. TestWireMatchesDecode and FuzzWireMatchesDecode hold the
// two equal.
func Wire(b []byte) (*structpb.Struct, error) {
	if raw, ok := wireFast(b); ok {
		s := &structpb.Struct{}
		s.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
		return s, nil
	}
	return Decode(b)
}

// WireChecked is Wire for a JSON object b the caller has found sound
// with strictjson.ScanObject, at most 64 deep and with nothing after it
// (delivery.ConsumerEvent.MessageChecked): it skips Wire's own check of
// b, the larger half of its time. Any other b may make it panic.
func WireChecked(b []byte) (*structpb.Struct, error) {
	w := wireWriter{b: make([]byte, 0, len(b)+len(b)/4), in: b, i: 1}
	if !w.members() {
		return Decode(b)
	}
	s := &structpb.Struct{}
	s.ProtoReflect().SetUnknown(protoreflect.RawFields(w.b))
	return s, nil
}

// wireFast encodes the JSON object b as the fields of a Struct: b is
// checked in full first (strictjson.ScanObject: what Decode's fast path
// refuses, it refuses too), then encoded in one pass that need not check
// anything.
func wireFast(b []byte) ([]byte, bool) {
	if sc, ok := strictjson.ScanObject(b, maxDepth); !ok || sc.Len != len(b) {
		return nil, false
	}
	w := wireWriter{b: make([]byte, 0, len(b)+len(b)/4), in: b, i: 1}
	if !w.members() {
		return nil, false
	}
	return w.b, true
}

// Field tags of google.protobuf.Struct, its map entries, Value and
// ListValue (struct.proto): field number << 3 | wire type (wireVarint,
// wireFixed64 or wireBytes).
const (
	tagStructFields = 1<<3 | wireBytes // Struct.fields, one map entry each
	tagEntryKey     = 1<<3 | wireBytes
	tagEntryValue   = 2<<3 | wireBytes
	tagNull         = 1<<3 + wireVarint  // Value.null_value
	tagNumber       = 2<<3 | wireFixed64 // Value.number_value, fixed64
	tagString       = 3<<3 | wireBytes
	tagBool         = 4<<3 + wireVarint
	tagStruct       = 5<<3 | wireBytes
	tagList         = 6<<3 | wireBytes
	tagListValues   = 1<<3 | wireBytes // ListValue.values

	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
)

// wireWriter appends protobuf. A length-prefixed field is opened with a
// one-byte length and closed by end, which widens the length (moving the
// contents) in the rare case it takes more than a byte.
type wireWriter struct {
	b  []byte // the encoding so far
	in []byte // the JSON being encoded
	i  int    // the next byte of in to read
}

func (w *wireWriter) open(tag byte) int {
	w.b = append(w.b, tag, 0)
	return len(w.b)
}

func (w *wireWriter) end(start int) {
	n := len(w.b) - start
	if n < 0x80 {
		w.b[start-1] = byte(n)
		return
	}
	k := protowire.SizeVarint(uint64(n))
	w.b = append(w.b, make([]byte, k-1)...)
	copy(w.b[start+k-1:], w.b[start:start+n])
	protowire.AppendVarint(w.b[:start-1], uint64(n))
}

func (w *wireWriter) bytesField(tag byte, s string) {
	w.b = append(w.b, tag)
	w.b = protowire.AppendVarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

// The encoder below reads JSON that ScanObject has found sound: it skips
// whitespace, but checks nothing else.

func (w *wireWriter) space() {
	for w.i < len(w.in) {
		switch w.in[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
			continue
		}
		return
	}
}

// members writes an object's members, from after its '{' to after its '}'.
func (w *wireWriter) members() bool {
	w.space()
	if w.in[w.i] == '}' {
		w.i++
		return true
	}
	for {
		w.space()
		entry := w.open(tagStructFields)
		if !w.str(tagEntryKey) {
			return false
		}
		w.space()
		w.i++ // ':'
		w.space()
		value := w.open(tagEntryValue)
		if !w.value() {
			return false
		}
		w.end(value)
		w.end(entry)
		w.space()
		c := w.in[w.i]
		w.i++
		if c == '}' {
			return true
		}
	}
}

// value writes the fields of one Value.
func (w *wireWriter) value() bool {
	switch c := w.in[w.i]; c {
	case '{':
		w.i++
		s := w.open(tagStruct)
		if !w.members() {
			return false
		}
		w.end(s)
	case '[':
		w.i++
		l := w.open(tagList)
		w.space()
		if w.in[w.i] == ']' {
			w.i++
		} else {
			for {
				w.space()
				v := w.open(tagListValues)
				if !w.value() {
					return false
				}
				w.end(v)
				w.space()
				c := w.in[w.i]
				w.i++
				if c == ']' {
					break
				}
			}
		}
		w.end(l)
	case '"':
		return w.str(tagString)
	case 't':
		w.i += len("true")
		w.b = append(w.b, tagBool, 1)
	case 'f':
		w.i += len("false")
		w.b = append(w.b, tagBool, 0)
	case 'n':
		w.i += len("null")
		w.b = append(w.b, tagNull, 0)
	default:
		start := w.i
		for w.i < len(w.in) && numberByte(w.in[w.i]) {
			w.i++
		}
		f, err := strconv.ParseFloat(string(w.in[start:w.i]), 64)
		if err != nil {
			return false // out of range: Decode says what
		}
		w.b = append(w.b, tagNumber)
		w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f))
	}
	return true
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// str writes the string at w.i as a length-prefixed field, unescaped.
func (w *wireWriter) str(tag byte) bool {
	w.i++ // '"'
	start := w.i
	// The closing quote, then any escape before it: two vectorised
	// searches, where a byte loop was most of an encoding's time.
	rest := w.in[start:]
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		return false
	}
	if bytes.IndexByte(rest[:q], '\\') < 0 {
		w.b = append(w.b, tag)
		w.b = protowire.AppendVarint(w.b, uint64(q))
		w.b = append(w.b, rest[:q]...)
		w.i = start + q + 1
		return true
	}
	// An escape: find the end, then decode (rare in messages).
	end := start + bytes.IndexByte(rest, '\\')
	for {
		switch w.in[end] {
		case '\\':
			end += 2
			continue
		case '"':
		default:
			end++
			continue
		}
		break
	}
	var s string
	if err := jsonv2.Unmarshal(w.in[start-1:end+1], &s); err != nil {
		return false
	}
	w.bytesField(tag, s)
	w.i = end + 1
	return true
}
