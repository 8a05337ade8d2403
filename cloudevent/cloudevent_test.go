package cloudevent_test

import (
	"encoding/json"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
)

// TestFormatSequence checks the documented form and that string order is
// position order, including where the number of digits changes.
func TestFormatSequence(t *testing.T) {
	t.Parallel()
	require.Equal(t, "001.00000000000000000001", cloudevent.FormatSequence(1))
	require.Equal(t, "001.00000000000000000042", cloudevent.FormatSequence(42))
	require.Equal(t, "001.00000000000000000000", cloudevent.FormatSequence(0))
	require.Equal(t, "001.09223372036854775807", cloudevent.FormatSequence(math.MaxInt64))

	positions := []int64{1, 2, 9, 10, 11, 99, 100, 101, 999, 1000, 12345, 1 << 32, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64}
	seqs := make([]string, len(positions))
	for i, p := range positions {
		seqs[i] = cloudevent.FormatSequence(p)
		require.Len(t, seqs[i], 24)
	}
	require.True(t, sort.StringsAreSorted(seqs), "%v", seqs)
	for i := 1; i < len(seqs); i++ {
		require.Less(t, seqs[i-1], seqs[i])
	}
}

// TestParseSequence checks the round trip and the rejections.
func TestParseSequence(t *testing.T) {
	t.Parallel()
	for _, p := range []int64{0, 1, 7, 10, 1_000_000, math.MaxInt64} {
		got, err := cloudevent.ParseSequence(cloudevent.FormatSequence(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	for _, bad := range []string{
		"",
		"42",
		"001.42",
		"002.00000000000000000042",   // another epoch
		"001-00000000000000000042",   // wrong separator
		"001.0000000000000000004x",   // not a number
		"001.000000000000000000042",  // too long
		"001.99999999999999999999",   // overflows int64
		"001.-0000000000000000042",   // sign
		"00100000000000000000000042", // no separator
		"001.00000000000000000042 ",  // trailing space
	} {
		_, err := cloudevent.ParseSequence(bad)
		require.Error(t, err, "%q", bad)
	}
}

// TestAppendWithSequence checks that the splice yields the same JSON object
// with a sequence member, without disturbing dst.
func TestAppendWithSequence(t *testing.T) {
	t.Parallel()
	body := []byte(`{"specversion":"1.0","id":"x","data":{"a":[1,2]}}`)
	prefix := []byte(`[`)
	out := cloudevent.AppendWithSequence(prefix, body, 42)
	require.Equal(t, `[{"sequence":"001.00000000000000000042","specversion":"1.0","id":"x","data":{"a":[1,2]}}`, string(out))
	require.Equal(t, `{"specversion":"1.0","id":"x","data":{"a":[1,2]}}`, string(body), "body is not modified")

	var m map[string]any
	require.NoError(t, json.Unmarshal(out[1:], &m))
	require.Equal(t, "001.00000000000000000042", m["sequence"])
	require.Equal(t, "x", m["id"])

	require.Equal(t, `{"sequence":"001.00000000000000000001"}`, string(cloudevent.AppendWithSequence(nil, []byte(`{}`), 1)))

	// Appending into spare capacity does not reallocate or touch what is
	// already there.
	dst := make([]byte, 0, 256)
	dst = append(dst, "x,"...)
	got := cloudevent.AppendWithSequence(dst, body, 7)
	require.Equal(t, &dst[:1][0], &got[0], "appended in place")
	require.Equal(t, "x,", string(got[:2]))
}

// TestEncodeDecode checks the attribute mapping of a full event and of a
// minimal one.
func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	occurred := time.Date(2024, 10, 16, 14, 30, 0, 123_000_000, time.UTC)
	published := time.Date(2024, 10, 16, 14, 30, 1, 0, time.UTC)
	b, err := cloudevent.Encode(cloudevent.Input{
		ID: "id-1", Source: "/herald/test", Type: "myapp.user.created", Subject: "/users/123",
		Time: occurred, PublishedAt: published, PrincipalIdentity: "user@example.com",
		Data: json.RawMessage(`{"user_id":"123","html":"<b>&</b>"}`),
	})
	require.NoError(t, err)

	e, err := cloudevent.Decode(b)
	require.NoError(t, err)
	require.Equal(t, "1.0", e.SpecVersion())
	require.Equal(t, "id-1", e.ID())
	require.Equal(t, "/herald/test", e.Source())
	require.Equal(t, "myapp.user.created", e.Type())
	require.Equal(t, "/users/123", e.Subject())
	require.True(t, occurred.Equal(e.Time()))
	require.Equal(t, "application/json", e.DataContentType())
	require.JSONEq(t, `{"user_id":"123","html":"<b>&</b>"}`, string(e.Data()))
	// data is embedded byte for byte: no HTML escaping, no re-encoding.
	require.Contains(t, string(b), `"data":{"user_id":"123","html":"<b>&</b>"}`)
	require.Equal(t, "user@example.com", e.Extensions()[cloudevent.ExtPrincipalIdentity])
	at, err := time.Parse(time.RFC3339Nano, e.Extensions()[cloudevent.ExtPublishedAt].(string))
	require.NoError(t, err)
	require.True(t, published.Equal(at))

	// With a sequence spliced in, the SDK still reads it, as a string.
	e, err = cloudevent.Decode(cloudevent.AppendWithSequence(nil, b, 3))
	require.NoError(t, err)
	require.NoError(t, e.Validate())
	require.Equal(t, cloudevent.FormatSequence(3), e.Extensions()[cloudevent.ExtSequence])

	// Optional attributes are left out, not sent empty.
	b, err = cloudevent.Encode(cloudevent.Input{ID: "id-2", Source: "/h", Type: "t", Time: occurred, PublishedAt: published, Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &raw))
	require.NotContains(t, raw, "subject")
	require.NotContains(t, raw, cloudevent.ExtPrincipalIdentity)
	require.JSONEq(t, `{}`, string(raw["data"]))

	// An event the SDK would reject is refused.
	_, err = cloudevent.Encode(cloudevent.Input{ID: "", Source: "/h", Type: "t", Data: json.RawMessage(`{}`)})
	require.Error(t, err)
}

// BenchmarkAppendWithSequence measures the per-event cost of a pull body.
func BenchmarkAppendWithSequence(b *testing.B) {
	body := []byte(`{"specversion":"1.0","id":"8f4d2a1e","type":"a.b","source":"/herald","data":{"k":"v"}}`)
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for i := int64(0); b.Loop(); i++ {
		dst = cloudevent.AppendWithSequence(dst[:0], body, i)
	}
}
