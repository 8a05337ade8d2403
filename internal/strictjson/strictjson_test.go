package strictjson_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
)

type ack struct {
	LeaseID    string          `json:"leaseId"`
	Generation *int64          `json:"generation"`
	Status     string          `json:"status"`
	Message    json.RawMessage `json:"message"`
	Nested     []struct {
		ID string `json:"id"`
	} `json:"nested"`
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		code       herr.Code
		msg        string
	}{
		{"ok", `{"leaseId":"l","generation":1,"status":"ok","message":{"a":[1]}}`, herr.Unknown, ""},
		{"unknown", `{"status":"failed","delay":30}`, herr.Malformed, `unknown field "delay"`},
		{"unknown nested", `{"nested":[{"id":"a","x":1}]}`, herr.Malformed, `unknown field "x" in /nested/0`},
		{"case", `{"LeaseID":"l"}`, herr.Malformed, `unknown field "LeaseID"`},
		{"duplicate", `{"status":"ok","status":"failed"}`, herr.Malformed, `duplicate field "status"`},
		{"duplicate in raw", `{"message":{"a":1,"a":2}}`, herr.Malformed, `duplicate field "a" in /message`},
		{"utf8", "{\"leaseId\":\"\xff\"}", herr.InvalidArgument, "valid UTF-8"},
		{"utf8 in raw", "{\"message\":{\"a\":\"\xc3\x28\"}}", herr.InvalidArgument, "valid UTF-8"},
		{"lone surrogate", `{"leaseId":"\ud800"}`, herr.InvalidArgument, "valid UTF-8"},
		{"syntax", `{"leaseId":`, herr.Malformed, "not valid JSON"},
		{"trailing", `{} {}`, herr.Malformed, "not valid JSON"},
		{"type", `{"generation":"1"}`, herr.Malformed, "/generation must be a JSON integer"},
		{"empty", ``, herr.Malformed, "not valid JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v ack
			err := strictjson.Unmarshal([]byte(c.body), &v)
			if c.code == herr.Unknown {
				require.NoError(t, err)
				require.Equal(t, "l", v.LeaseID)
				require.JSONEq(t, `{"a":[1]}`, string(v.Message))
				return
			}
			require.Error(t, err)
			require.Equal(t, c.code, herr.CodeOf(err), err)
			require.Contains(t, herr.MessageOf(err), c.msg)
		})
	}
}

// TestUnmarshalLenientParts: an envelope's parts may hold invalid UTF-8 or
// repeat a member name, and each part fails alone when decoded again; the
// envelope's own names must still be unique and known.
func TestUnmarshalLenientParts(t *testing.T) {
	t.Parallel()
	var v struct {
		Events []json.RawMessage `json:"events"`
	}
	require.NoError(t, strictjson.Unmarshal([]byte("{\"events\":[{\"a\":\"\xff\"},{\"b\":1,\"b\":2},{}]}"), &v, strictjson.LenientParts))
	require.Len(t, v.Events, 3)
	var inner map[string]any
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(strictjson.Unmarshal(v.Events[0], &inner)))
	err := strictjson.Unmarshal(v.Events[1], &inner)
	require.Equal(t, herr.Malformed, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), `duplicate field "b"`)
	require.NoError(t, strictjson.Unmarshal(v.Events[2], &inner))

	err = strictjson.Unmarshal([]byte(`{"events":[{}],"events":[{},{}]}`), &v, strictjson.LenientParts)
	require.Equal(t, herr.Malformed, herr.CodeOf(err))
	require.Equal(t, `duplicate field "events"`, herr.MessageOf(err))
	err = strictjson.Unmarshal([]byte(`{"events":[],"other":1}`), &v, strictjson.LenientParts)
	require.Equal(t, herr.Malformed, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), `unknown field "other"`)
}

func TestUnmarshalNameNotEchoedInFull(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 5000)
	err := strictjson.Unmarshal([]byte(`{"`+long+`":1}`), &ack{})
	require.Less(t, len(herr.MessageOf(err)), 300)
}

func TestCheckObject(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		want strictjson.ObjectProblem
	}{
		{`{}`, 0},
		{` {"a":[{"b":null}], "c":"é"} `, 0},
		{`[]`, strictjson.NotAnObject},
		{`"s"`, strictjson.NotAnObject},
		{`{"a":1} {}`, strictjson.NotAnObject},
		{`{"a":1`, strictjson.NotAnObject},
		{"{\"a\":\"\xff\"}", strictjson.InvalidUTF8},
		{"{\"\xff\":1}", strictjson.InvalidUTF8},
		{`{"a":"\udc00"}`, strictjson.InvalidUTF8},
		{`{"a":1,"a":2}`, strictjson.DuplicateName},
		{`{"a":{"a":{"a":1}}}`, 0},
		{`{"a":{"a":{"a":{"a":1}}}}`, strictjson.TooDeep},
		{`{"a":[[[1]]]}`, strictjson.TooDeep},
		{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), strictjson.TooDeep},
	} {
		require.Equal(t, c.want, strictjson.CheckObject([]byte(c.body), 3), "%.60q", c.body)
	}
}

// FuzzUnmarshal: any input either decodes or fails with a caller-safe
// code, never panics, and a success re-encodes to JSON that decodes again.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"leaseId":"l","generation":1,"status":"ok"}`, `{"nested":[{"id":"a"}]}`, `{"a":1,"a":2}`, "{\"leaseId\":\"\xff\"}", `{"message":{"x":[1,{"y":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v ack
		err := strictjson.Unmarshal(b, &v)
		if err != nil {
			switch herr.CodeOf(err) {
			case herr.Malformed, herr.InvalidArgument:
			default:
				t.Fatalf("code %v: %v", herr.CodeOf(err), err)
			}
			return
		}
		out, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, strictjson.Unmarshal(out, &ack{}))
	})
}

// FuzzCheckObject: CheckObject never panics, finds what the
// token-by-token scan finds, SpaceBetweenTokens agrees with json.Compact, and what it accepts is one JSON object that
// encoding/json accepts too.
func FuzzCheckObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[{"b":"c"}]}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`,
		`{"a":"x y","b":"\\"}`, `{"a":"\"", "b":1}`, `{"a":"\\\" ","c":[1 ,2]}`, " {\"a\":1}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The quick path and the token-by-token scan agree.
		for _, depth := range []int{1, 2, 32} {
			if got, want := strictjson.CheckObject(b, depth), strictjson.CheckObjectTokens(b, depth); got != want {
				t.Fatalf("%q at depth %d: CheckObject %d, token by token %d", b, depth, got, want)
			}
		}
		// SpaceBetweenTokens says whether json.Compact would change valid
		// JSON.
		if json.Valid(b) {
			var compacted bytes.Buffer
			require.NoError(t, json.Compact(&compacted, b))
			require.Equal(t, !bytes.Equal(compacted.Bytes(), b), strictjson.SpaceBetweenTokens(b), "%q", b)
		}
		if strictjson.CheckObject(b, 32) != 0 {
			return
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), "%q", b)
	})
}

// BenchmarkCheckObject measures the check of a 1 KiB message, as
// publishing runs it on every event.
func BenchmarkCheckObject(b *testing.B) {
	msg := []byte(`{"order_id":"A-1029","customer":{"id":"c-77","name":"Ada \u00e9","tags":["x","y"]},"items":[{"sku":"s1","qty":2,"price":9.5},{"sku":"s2","qty":1,"price":120}],"note":"`)
	for len(msg) < 1020 {
		msg = append(msg, 'n')
	}
	msg = append(msg, `"}`...)
	b.Run("quick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if strictjson.CheckObject(msg, 32) != 0 {
				b.Fatal("problem")
			}
		}
	})
	b.Run("tokens", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if strictjson.CheckObjectTokens(msg, 32) != 0 {
				b.Fatal("problem")
			}
		}
	})
}

// FuzzScanObject: ScanObject, CheckObject's one-pass check, accepts
// exactly what the token-by-token scan finds sound (so it never lets a
// problem through, and never sends a sound message down the slow path),
// its length ends the object, and Compact and HTMLSafe say what
// encoding/json would change.
func FuzzScanObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[{"b":"c"}]}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`,
		`{"a":"\ud83d\ude00","\u0061":1,"a":2}`, `{"a\n":1,"a\u000a":2}`, `{"x":"<b>&amp;</b>"}`, "{\"u\":\"\u2028\"}",
		`{"n":[-0.5e+10,0,1E2,true,false,null]}`, `{"a":01}`, `{"a":1.}`, " {\"a\":1}\n", `{"a":{"b":{"c":{}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		for _, depth := range []int{1, 2, 32} {
			want := strictjson.CheckObjectTokens(b, depth) == 0
			sc, ok := strictjson.ScanObject(trimmed, depth)
			quick := ok && len(bytes.TrimRight(trimmed[sc.Len:], " \t\r\n")) == 0
			if quick != want {
				t.Fatalf("%q at depth %d: ScanObject %v, token by token %v", b, depth, quick, want)
			}
			if !quick || len(trimmed) != len(b) || sc.Len != len(b) {
				continue
			}
			var compacted bytes.Buffer
			require.NoError(t, json.Compact(&compacted, b))
			require.Equal(t, bytes.Equal(compacted.Bytes(), b), sc.Compact, "Compact of %q", b)
			marshalled, err := json.Marshal(json.RawMessage(b))
			require.NoError(t, err)
			require.Equal(t, bytes.Equal(marshalled, compacted.Bytes()), sc.HTMLSafe, "HTMLSafe of %q", b)
		}
	})
}

// BenchmarkScanRealistic measures the check of a realistic 1 KiB
// message (many short strings and numbers, as bench/peer sends).
func BenchmarkScanRealistic(b *testing.B) {
	msg := []byte(`{"created_at":"2024-02-11T08:13:20Z","currency":"EUR","customer":{"email":"golf@kilo.example","id":612341,"name":"alpha papa","vip":false},` +
		`"items":[{"price":612.11,"qty":3,"sku":"SKU-118822","title":"echo lima mike"},{"price":19.9,"qty":1,"sku":"SKU-000912","title":"india hotel kilo"},` +
		`{"price":5.05,"qty":9,"sku":"SKU-771234","title":"oscar alpha delta"},{"price":870,"qty":2,"sku":"SKU-456123","title":"bravo juliet golf"},` +
		`{"price":33.3,"qty":4,"sku":"SKU-909090","title":"november mike echo"},{"price":1.25,"qty":7,"sku":"SKU-123456","title":"papa oscar foxtrot"}],` +
		`"note":"charlie delta charlie delta ","order_id":"ord-00000042-beef","tags":["kilo","lima","mike"],"extra":{"a":[1,2,3,4,5,6,7,8,9,10],"b":"x y z"}}`)
	b.SetBytes(int64(len(msg)))
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := strictjson.ScanObject(msg, 32); !ok {
				b.Fatal("problem")
			}
		}
	})
	b.Run("tokens", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if strictjson.CheckObjectTokens(msg, 32) != 0 {
				b.Fatal("problem")
			}
		}
	})
}

// TestPlainRunMatchesByteByByte holds the eight-bytes-at-a-time scan of
// string contents to the byte table: every byte value at every lane of a
// word, then random texts dense in the bytes that end a plain run (and in
// their neighbours, where a borrow between lanes could hide one).
func TestPlainRunMatchesByteByByte(t *testing.T) {
	byteByByte := func(b []byte, i int) int {
		for i < len(b) && strictjson.IsPlain(b[i]) {
			i++
		}
		return i
	}
	for c := range 256 {
		for at := range 16 {
			b := bytes.Repeat([]byte{'a'}, 16)
			b[at] = byte(c)
			require.Equal(t, byteByByte(b, 0), strictjson.PlainRun(b, 0), "byte %#x at %d", c, at)
		}
	}
	edges := []byte{0x00, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', '<', '=', '>', '&', '%', '\'', 0x7f, 0x80, 0xc3, 0xff, 'a', 'z'}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = edges[rng.IntN(len(edges))]
			} else {
				b[i] = 'a' + byte(rng.IntN(26))
			}
		}
		start := rng.IntN(len(b))
		require.Equal(t, byteByByte(b, start), strictjson.PlainRun(b, start), "%q from %d", b, start)
	}
}

// TestNumberRange: a message's numbers must be doubles (RFC 7493, I-JSON):
// one that overflows to ±Inf, or a nonzero one that underflows to 0, is
// NumberOutOfRange on both paths (ScanObject and token by token); zero in
// any spelling, the extremes of the range and long numbers inside it
// (precision lost, range kept) pass.
func TestNumberRange(t *testing.T) {
	t.Parallel()
	digits := func(n int) string { return "1" + strings.Repeat("0", n-1) }
	bad := []string{"1e400", "-1e400", "1E+309", "1.7976931348623159e308", "1e-400", "-2e-324", "0.2e-323",
		digits(400), "-" + digits(310), "0." + strings.Repeat("0", 400) + "1", digits(250) + "e99", "1e0000000000400",
		"0." + strings.Repeat("0", 250) + "1e-99"}
	good := []string{"0", "-0", "0.0", "0e400", "0.000e-9999", "1.7976931348623157e308", "-1.7976931348623157e308",
		"5e-324", "3e-324", "4.9e-324", "1e308", "1e-307", digits(300), digits(308) + ".5", "0." + strings.Repeat("0", 300) + "1",
		"1" + strings.Repeat("0", 199) + "e99", "123.456e-78", "1e0000000000000000000000000000000000008"}
	for _, n := range bad {
		msg := []byte(`{"a":[1,{"n":` + n + `}]}`)
		_, ok := strictjson.ScanObject(msg, 32)
		require.False(t, ok, "ScanObject took %.40s", n)
		require.Equal(t, strictjson.NumberOutOfRange, strictjson.CheckObjectTokens(msg, 32), "%.40s", n)
		require.Equal(t, strictjson.NumberOutOfRange, strictjson.CheckObject(msg, 32), "%.40s", n)
		require.False(t, strictjson.NumberInRange([]byte(n)), "%.40s", n)
	}
	for _, n := range good {
		msg := []byte(`{"a":[1,{"n":` + n + `}]}`)
		sc, ok := strictjson.ScanObject(msg, 32)
		require.True(t, ok, "ScanObject refused %.40s", n)
		require.Equal(t, len(msg), sc.Len)
		require.Zero(t, strictjson.CheckObjectTokens(msg, 32), "%.40s", n)
		require.True(t, strictjson.NumberInRange([]byte(n)), "%.40s", n)
	}
}

// TestUnmarshalIgnoreUnknown: with IgnoreUnknown a member no field
// declares is skipped, at any depth, but still held to the rules of the
// text (no repeated name, valid UTF-8); without it, it is refused.
func TestUnmarshalIgnoreUnknown(t *testing.T) {
	t.Parallel()
	var v ack
	require.NoError(t, strictjson.Unmarshal([]byte(`{"leaseId":"l","extra":{"x":[1e5]},"nested":[{"id":"a","kind":"k"}]}`), &v, strictjson.IgnoreUnknown))
	require.Equal(t, "l", v.LeaseID)
	require.Equal(t, "a", v.Nested[0].ID)
	err := strictjson.Unmarshal([]byte(`{"leaseId":"l","extra":{"x":1,"x":2}}`), &v, strictjson.IgnoreUnknown)
	require.Contains(t, herr.MessageOf(err), `duplicate field "x"`)
	err = strictjson.Unmarshal([]byte("{\"extra\":\"\xff\"}"), &v, strictjson.IgnoreUnknown)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	err = strictjson.Unmarshal([]byte(`{"leaseId":"l","extra":1}`), &v)
	require.Contains(t, herr.MessageOf(err), `unknown field "extra"`)
	err = strictjson.Unmarshal([]byte(`{"leaseId":"l","extra":1}`), &v, strictjson.LenientParts)
	require.Contains(t, herr.MessageOf(err), `unknown field "extra"`, "LenientParts alone keeps unknown members refused")
}
