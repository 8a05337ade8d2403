package structjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/heraldevents/herald/internal/strictjson"
)

// requireSame decodes b with Decode and with protojson and requires the
// same Struct, or both to fail.
func requireSame(t *testing.T, b []byte) {
	t.Helper()
	got, err := Decode(b)
	want := &structpb.Struct{}
	wantErr := protojson.Unmarshal(b, want)
	if wantErr != nil {
		require.Error(t, err, "%q: protojson refuses it: %v", b, wantErr)
		return
	}
	require.NoError(t, err, "%q", b)
	require.True(t, proto.Equal(want, got), "%q:\nprotojson %v\nDecode    %v", b, want, got)
}

// randomJSON writes a random JSON value of at most depth levels: every
// kind, escapes, non-ASCII text, numbers of every form.
func randomJSON(r *rand.Rand, sb *strings.Builder, depth int) {
	kind := r.IntN(8)
	if depth <= 0 && kind < 2 {
		kind = 2 + r.IntN(6)
	}
	switch kind {
	case 0:
		sb.WriteByte('{')
		for i := range r.IntN(5) {
			if i > 0 {
				sb.WriteByte(',')
			}
			randomString(r, sb)
			sb.WriteString(" : "[r.IntN(2):][:1])
			randomJSON(r, sb, depth-1)
		}
		sb.WriteByte('}')
	case 1:
		sb.WriteByte('[')
		for i := range r.IntN(5) {
			if i > 0 {
				sb.WriteString(", "[:1+r.IntN(2)])
			}
			randomJSON(r, sb, depth-1)
		}
		sb.WriteByte(']')
	case 2, 3:
		randomString(r, sb)
	case 4:
		nums := []string{"0", "-0", "1", "-17", "3.25", "1e3", "1E-7", "-2.5e+300", "123456789012345678901234567890", "0.1", "5e-324", "1.7976931348623157e308"}
		sb.WriteString(nums[r.IntN(len(nums))])
	case 5:
		sb.WriteString(strconv.FormatFloat(r.NormFloat64()*1e6, 'g', -1, 64))
	case 6:
		sb.WriteString([]string{"true", "false"}[r.IntN(2)])
	default:
		sb.WriteString("null")
	}
}

// randomObject returns a random JSON object of up to five members
// (k0, k1, …), each a random value nested at most four deep.
func randomObject(r *rand.Rand) []byte {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range r.IntN(6) {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%d":`, i)
		randomJSON(r, &sb, 4)
	}
	sb.WriteByte('}')
	return []byte(sb.String())
}

func randomString(r *rand.Rand, sb *strings.Builder) {
	parts := []string{"a", "key", "Ada Lovelace", `\"`, `\\`, `\n`, `\u00e9`, `\ud83d\ude00`, "é", "日本", "\u2028", `\/`, "<&>", " ", `\t`}
	sb.WriteByte('"')
	for range r.IntN(4) {
		sb.WriteString(parts[r.IntN(len(parts))])
	}
	sb.WriteByte('"')
}

func TestDecodeMatchesProtojson(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		var sb strings.Builder
		sb.WriteByte('{')
		for j := range r.IntN(6) {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"k%d":`, j)
			randomJSON(r, &sb, 4)
		}
		sb.WriteByte('}')
		t.Run(strconv.Itoa(i), func(t *testing.T) { requireSame(t, []byte(sb.String())) })
	}
}

// TestDecodeEdges: inputs the fast path hands to protojson (or must get
// right itself).
func TestDecodeEdges(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{}`, ` { } `, `{"a":1,"a":2}`, `{"a":1e400}`, `{"a":-1e400}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`,
		`[]`, `1`, `null`, ``, `{`, `{"a":}`, `{"a":1}{}`, `{"a":1} x`, `{"a":[1,2,}`, `{"a":NaN}`,
		`{"a":{"b":{"c":[[[[]]]]}}}`, strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100),
		strings.Repeat(`{"a":[`, 40) + `1` + strings.Repeat(`]}`, 40),
	} {
		requireSame(t, []byte(in))
	}
}

func FuzzDecodeMatchesProtojson(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,"x",true,null,{"b":-2.5e-3}]}`, `{"a":1,"a":2}`, `{"\u00e9":"\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { requireSame(t, b) })
}

func BenchmarkDecode(b *testing.B) {
	msg := []byte(`{"order":"A-1","customer":{"name":"Ada Lovelace","email":"ada@example.com"},"items":[` + strings.Repeat(`{"sku":"X-123","qty":2,"price":12.5},`, 20) + `{"sku":"Y","qty":1,"price":1}]}`)
	b.Run("structjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := protojson.Unmarshal(msg, &structpb.Struct{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// requireWireCheckedSame requires WireChecked(b), for b that ScanObject
// finds sound, to marshal to what Wire(b) marshals to.
func requireWireCheckedSame(t *testing.T, b []byte) {
	t.Helper()
	if sc, ok := strictjson.ScanObject(b, 32); !ok || sc.Len != len(b) {
		return
	}
	want, err := Wire(b)
	require.NoError(t, err, "%q", b)
	got, err := WireChecked(b)
	require.NoError(t, err, "%q", b)
	wantBytes, err := proto.Marshal(want)
	require.NoError(t, err)
	gotBytes, err := proto.Marshal(got)
	require.NoError(t, err)
	require.Equal(t, wantBytes, gotBytes, "%q", b)
}

// requireWireSame requires Wire(b) to marshal to bytes that decode to
// Decode(b)'s Struct, or both to fail alike.
func requireWireSame(t *testing.T, b []byte) {
	t.Helper()
	want, wantErr := Decode(b)
	got, err := Wire(b)
	if wantErr != nil {
		require.Error(t, err, "%q: Decode refuses it: %v", b, wantErr)
		return
	}
	require.NoError(t, err, "%q", b)
	enc, err := proto.Marshal(got)
	require.NoError(t, err)
	back := &structpb.Struct{}
	require.NoError(t, proto.Unmarshal(enc, back), "%q", b)
	require.True(t, proto.Equal(want, back), "%q:\nDecode %v\nWire   %v", b, want, back)
}

// TestWireMatchesDecode: for random JSON, Wire's bytes decode to the
// Struct Decode gives; long members take lengths of more than one byte.
func TestWireMatchesDecode(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 8))
	for range 2000 {
		obj := randomObject(r)
		requireWireSame(t, obj)
		requireWireCheckedSame(t, obj)
	}
	long := `{"s":"` + strings.Repeat("x", 70000) + `","n":{"deep":[` + strings.Repeat(`"y",`, 500) + `1]}}`
	requireWireSame(t, []byte(long))
	for _, b := range []string{`{}`, `[]`, `{"a":1,"a":2}`, `{"a":1e999}`, "{\"a\":\"\xff\"}", `{"a":1} x`, `nope`} {
		requireWireSame(t, []byte(b))
	}
}

// FuzzWireMatchesDecode: Wire never panics and agrees with Decode.
func FuzzWireMatchesDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}],"c":"é"}`, `{"a":1,"a":2}`, `{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		requireWireSame(t, b)
		requireWireCheckedSame(t, b)
	})
}

// requireEncodeSame requires Encode(s) to be json.Compact of
// protojson.Marshal(s), or both to fail.
func requireEncodeSame(t *testing.T, s *structpb.Struct) {
	t.Helper()
	got, err := Encode(s)
	want, wantErr := protojson.Marshal(s)
	if wantErr != nil {
		require.Error(t, err, "%v: protojson refuses it: %v", s, wantErr)
		return
	}
	require.NoError(t, err, "%v", s)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, want))
	require.Equal(t, compact.String(), string(got))
}

// TestEncodeMatchesProtojson: for random Structs (from random JSON) and
// the values protojson refuses, Encode writes what protojson writes,
// compacted.
func TestEncodeMatchesProtojson(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 34))
	for range 2000 {
		obj := randomObject(r)
		s, err := Decode(obj)
		if err != nil {
			continue
		}
		requireEncodeSame(t, s)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-6, 9.99e-7, 1e20, 1e21, 123456789, 5e-324, math.MaxFloat64, -1.5e-300, 0.1} {
		requireEncodeSame(t, &structpb.Struct{Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(f)}})
	}
	for _, s := range []string{"\x00\x1f\x7f", "<&>\u2028\u2029", `"\`, "é日本🎉", "\b\f\n\r\t"} {
		requireEncodeSame(t, &structpb.Struct{Fields: map[string]*structpb.Value{s: structpb.NewStringValue(s)}})
	}
	for _, bad := range []*structpb.Value{{}, structpb.NewNumberValue(math.NaN()), structpb.NewNumberValue(math.Inf(1)), structpb.NewStringValue("\xff")} {
		requireEncodeSame(t, &structpb.Struct{Fields: map[string]*structpb.Value{"v": bad}})
	}
	requireEncodeSame(t, &structpb.Struct{Fields: map[string]*structpb.Value{"\xff": structpb.NewNullValue()}})
	// Deeper than the fast path recurses: protojson encodes it, and so
	// must Encode.
	deep := &structpb.Struct{}
	for range maxDepth + 8 {
		deep = &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStructValue(deep), "l": structpb.NewListValue(&structpb.ListValue{})}}
	}
	requireEncodeSame(t, deep)
}

// FuzzEncodeMatchesProtojson: Encode of the Struct of any JSON object
// agrees with protojson.
func FuzzEncodeMatchesProtojson(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}],"c":"é","d":1e-7,"e":1e21}`, `{"s":"\u0000<\u2028"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		requireEncodeSame(t, s)
	})
}

// requireFromWireSame requires FromWire(raw) to be Encode of the Struct
// proto.Unmarshal makes of raw, or to fail when either refuses; and a
// Struct Lazy takes from raw to marshal back to raw and encode the same.
func requireFromWireSame(t *testing.T, raw []byte) {
	t.Helper()
	got, err := FromWire(raw)
	s := &structpb.Struct{}
	if uerr := proto.Unmarshal(raw, s); uerr != nil {
		require.Error(t, err, "%x: proto.Unmarshal refuses it: %v", raw, uerr)
		_, ok := Lazy(raw)
		require.False(t, ok, "%x: Lazy took what proto.Unmarshal refuses", raw)
		return
	}
	want, werr := encodeFields(s)
	if werr != nil {
		require.Error(t, err, "%x: Encode refuses it: %v", raw, werr)
		_, ok := Lazy(raw)
		require.False(t, ok, "%x: Lazy took what Encode refuses", raw)
		return
	}
	require.NoError(t, err, "%x", raw)
	require.Equal(t, string(want), string(got), "%x", raw)
	if l, ok := Lazy(raw); ok {
		b, err := proto.Marshal(l)
		require.NoError(t, err)
		require.Equal(t, string(raw), string(b), "a lazy Struct marshals to what it holds")
		enc, err := Encode(l)
		require.NoError(t, err)
		require.Equal(t, string(want), string(enc))
	}
}

// entry is the encoding of one Struct member: a map entry of key and the
// encoded Value v.
func entry(key string, v []byte) []byte {
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendBytes(e, v)
	out := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(out, e)
}

func marshalValue(t *testing.T, v *structpb.Value) []byte {
	t.Helper()
	b, err := proto.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestFromWireMatchesUnmarshal: for the encodings of random Structs, of
// those bytes with bytes changed, and of the encodings no encoder writes
// but proto.Unmarshal takes (a repeated key, a value of two kinds or of
// none, unknown fields, fields out of order), FromWire gives what
// proto.Unmarshal then Encode give; and Lazy takes every Struct an
// encoder writes from a JSON message.
func TestFromWireMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(55, 89))
	for range 2000 {
		obj := randomObject(r)
		s, err := Decode(obj)
		if err != nil {
			continue
		}
		raw, err := proto.Marshal(s)
		require.NoError(t, err)
		_, ok := Lazy(raw)
		require.True(t, ok, "Lazy refused the encoding of %s", obj)
		requireFromWireSame(t, raw)
		for range 3 {
			if len(raw) == 0 {
				break
			}
			changed := bytes.Clone(raw)
			changed[r.IntN(len(changed))] = byte(r.IntN(256))
			requireFromWireSame(t, changed)
			requireFromWireSame(t, changed[:r.IntN(len(changed))])
		}
	}
	str := marshalValue(t, structpb.NewStringValue("x"))
	num := marshalValue(t, structpb.NewNumberValue(1.5))
	odd := [][]byte{
		nil,
		append(entry("a", num), entry("a", str)...),                               // a repeated key: the last wins
		append(entry("b", str), entry("a", num)...),                               // out of key order
		entry("a", append(str, num...)),                                           // two kinds: the last wins
		entry("a", nil),                                                           // no kind
		entry("\xff", num),                                                        // a key that is not UTF-8
		entry("a", append([]byte{0x1a, 1}, 0xff)),                                 // a string that is not UTF-8
		entry("a", marshalValue(t, structpb.NewNumberValue(math.Inf(-1)))),        // not finite
		entry("a", []byte{0x08, 0x05}),                                            // null with an unknown enum number
		entry("a", []byte{0x20, 0x02}),                                            // true as 2
		entry("a", []byte{0x20, 0x80, 0x00}),                                      // a varint longer than it needs
		entry("a", []byte{0x38, 0x01}),                                            // only an unknown field: no kind
		append(entry("a", num), 0x10, 0x01),                                       // an unknown field in the Struct
		append(protowire.AppendTag(nil, 1, protowire.BytesType), 2, 0x12, 0),      // an entry with a value, no key
		append(protowire.AppendTag(nil, 1, protowire.BytesType), 3, 0x0a, 1, 'a'), // a key, no value
		entry("a", append([]byte{0x32, 4, 0x0a, 2}, num[:2]...)),                  // a list cut short
	}
	nested := &structpb.Struct{}
	for range maxDepth + 4 {
		nested = &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStructValue(nested), "l": structpb.NewListValue(&structpb.ListValue{})}}
	}
	raw, err := proto.Marshal(nested)
	require.NoError(t, err)
	odd = append(odd, raw)
	for _, b := range odd {
		requireFromWireSame(t, b)
	}
}

// FuzzFromWireMatchesUnmarshal: FromWire never panics and agrees with
// proto.Unmarshal and Encode, and Lazy with both.
func FuzzFromWireMatchesUnmarshal(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}],"c":"é","d":true}`, `{"s":"\u0000<\u2028","n":1e-7}`} {
		st, err := Decode([]byte(s))
		if err != nil {
			f.Fatal(err)
		}
		raw, err := proto.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) { requireFromWireSame(t, raw) })
}

// BenchmarkFromWire measures what a gRPC publish does with one message:
// from its encoding to its JSON, through a decoded Struct (what the
// default codec and Encode do) and straight from the wire (Lazy's check,
// then FromWire).
func BenchmarkFromWire(b *testing.B) {
	msg := []byte(`{"order":"A-1","customer":{"name":"Ada Lovelace","email":"ada@example.com"},"items":[` + strings.Repeat(`{"sku":"X-123","qty":2,"price":12.5},`, 20) + `{"sku":"Y","qty":1,"price":1}]}`)
	s, err := Decode(msg)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := proto.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st := &structpb.Struct{}
			if err := proto.Unmarshal(raw, st); err != nil {
				b.Fatal(err)
			}
			if _, err := Encode(st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st, ok := Lazy(raw)
			if !ok {
				b.Fatal("not lazy")
			}
			if _, err := Encode(st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLazyKeepsToItsBytes: a lazy Struct made from part of a larger
// buffer (a request) cannot write past its part: appending to its
// unknown fields leaves the rest of the buffer as it was.
func TestLazyKeepsToItsBytes(t *testing.T) {
	first := entry("a", marshalValue(t, structpb.NewNumberValue(1)))
	second := entry("b", marshalValue(t, structpb.NewStringValue("v")))
	buf := append(append([]byte(nil), first...), second...)
	s, ok := Lazy(buf[:len(first)])
	require.True(t, ok)
	s.ProtoReflect().SetUnknown(append(s.ProtoReflect().GetUnknown(), 0x10, 0x01))
	require.Equal(t, second, buf[len(first):], "the bytes after the Struct's own are untouched")
}
