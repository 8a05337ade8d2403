package structjson

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Encode returns the compact JSON of s: the bytes json.Compact makes of
// protojson.Marshal(s) (members in key order, numbers as encoding/json
// writes them), without protojson's general encoder, which sorts every
// map through reflection and was a third of a gRPC publish's CPU. What
// protojson refuses (a Value of no kind, a number that is not finite, a
// string that is not UTF-8) gets protojson's own error.
// TestEncodeMatchesProtojson and FuzzEncodeMatchesProtojson hold the two
// equal.
//
// A Struct that carries encoded fields (Lazy, Wire) is encoded as the
// Struct it marshals to: Encode(s) is Encode of proto.Unmarshal of
// proto.Marshal(s), where protojson would see only its Go fields.
func Encode(s *structpb.Struct) ([]byte, error) {
	if unknown := s.ProtoReflect().GetUnknown(); len(unknown) > 0 {
		if len(s.GetFields()) == 0 {
			return FromWire(unknown)
		}
		raw, err := proto.Marshal(s)
		if err != nil {
			return nil, err
		}
		return FromWire(raw)
	}
	return encodeFields(s)
}

// encodeFields is Encode of s's Go fields; unknown fields are ignored, as
// protojson ignores them.
func encodeFields(s *structpb.Struct) ([]byte, error) {
	if b, ok := appendStruct(make([]byte, 0, 256), s, 1); ok {
		return b, nil
	}
	// The fast path refused: either protojson refuses too (and its error
	// says why) or the message nests deeper than the fast path recurses.
	raw, err := protojson.Marshal(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appendStruct(b []byte, s *structpb.Struct, depth int) ([]byte, bool) {
	if depth > maxDepth {
		return b, false
	}
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendString(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendValue(b, fields[k], depth); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendValue(b []byte, v *structpb.Value, depth int) ([]byte, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return append(b, "null"...), true
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), true
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue)
	case *structpb.Value_NumberValue:
		return appendNumber(b, k.NumberValue)
	case *structpb.Value_StructValue:
		return appendStruct(b, k.StructValue, depth+1)
	case *structpb.Value_ListValue:
		if depth+1 > maxDepth {
			return b, false
		}
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false // no kind: protojson refuses it
}

// appendNumber writes f as encoding/json (and protojson) do: the
// shortest decimal that reads back as f, in exponent form below 1e-6 and
// from 1e21 on, with a two-digit exponent written without its zero.
func appendNumber(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 → 1e-7
		if n := len(b); n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendString writes s quoted as protojson does: '"', '\\' and control
// characters escaped (\b \f \n \r \t by name, the others as \u00XX),
// everything else as it is. Invalid UTF-8 is refused, as protojson
// refuses it.
func appendString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return b, false
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		b = appendEscape(b, c)
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

// appendEscape writes the escape of c, a '"', '\\' or control character,
// as protojson writes it.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, `\b`...)
	case '\f':
		return append(b, `\f`...)
	case '\n':
		return append(b, `\n`...)
	case '\r':
		return append(b, `\r`...)
	case '\t':
		return append(b, `\t`...)
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}
