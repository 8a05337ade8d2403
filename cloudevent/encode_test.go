package cloudevent_test

import (
	"encoding/json"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
)

// sdkEncode is how Herald encoded events before Encode wrote them itself:
// the reference its output is held to.
func sdkEncode(t testing.TB, in cloudevent.Input) []byte {
	t.Helper()
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(in.ID)
	e.SetSource(in.Source)
	e.SetType(in.Type)
	if in.Subject != "" {
		e.SetSubject(in.Subject)
	}
	e.SetTime(in.Time)
	e.SetExtension(cloudevent.ExtPublishedAt, in.PublishedAt)
	if in.PrincipalIdentity != "" {
		e.SetExtension(cloudevent.ExtPrincipalIdentity, in.PrincipalIdentity)
	}
	e.SetDataContentType(cloudevents.ApplicationJSON)
	e.DataEncoded = in.Data
	require.NoError(t, e.Validate())
	b, err := e.MarshalJSON()
	require.NoError(t, err)
	return b
}

// TestEncodeMatchesSDK holds Encode to the SDK's output: byte for byte for
// ordinary events, as the same JSON value for strings that need escaping.
func TestEncodeMatchesSDK(t *testing.T) {
	t.Parallel()
	base := cloudevent.Input{
		ID: "8f4d2a1e-0000-4000-8000-000000000001", Source: "/herald", Type: "myapp.user.created",
		Subject: "/users/123", Time: time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC),
		// The SDK writes an extension time in its own zone, Encode always in
		// UTC; delivery stamps publish times in UTC, where the two agree.
		PublishedAt:       time.Date(2024, 10, 16, 14, 30, 1, 123456789, time.UTC),
		PrincipalIdentity: "user@example.com", Data: json.RawMessage(`{"user_id":"123","html":"<b>&amp;</b>","n":[1,2.5,null]}`),
	}
	exact := map[string]func(*cloudevent.Input){
		"full":                 func(*cloudevent.Input) {},
		"no subject":           func(in *cloudevent.Input) { in.Subject = "" },
		"no principal":         func(in *cloudevent.Input) { in.PrincipalIdentity = "" },
		"empty data object":    func(in *cloudevent.Input) { in.Data = json.RawMessage(`{}`) },
		"fractional time":      func(in *cloudevent.Input) { in.Time = time.Date(2024, 1, 2, 3, 4, 5, 600_000_000, time.UTC) },
		"zoned time":           func(in *cloudevent.Input) { in.Time = time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -7*3600)) },
		"unicode subject":      func(in *cloudevent.Input) { in.Subject = "/files/日本語/ü" },
		"URL source":           func(in *cloudevent.Input) { in.Source = "https://herald.example.com/deployments/eu-1" },
		"html in strings":      func(in *cloudevent.Input) { in.Subject = "/a<b>&c" },
		"long type":            func(in *cloudevent.Input) { in.Type = "a.b-c_d.0123456789" },
		"nested data":          func(in *cloudevent.Input) { in.Data = json.RawMessage(`{"a":{"b":[{"c":"d"}]}}`) },
		"subject with slashes": func(in *cloudevent.Input) { in.Subject = "//x//" },
	}
	for name, mod := range exact {
		in := base
		mod(&in)
		got, err := cloudevent.Encode(in)
		require.NoError(t, err, name)
		require.Equal(t, string(sdkEncode(t, in)), string(got), name)
	}

	escaped := map[string]string{
		"quotes and backslashes": `say "hi" \ bye`,
		"control characters":     "tab\tnew\nline\rcr\x00nul\x1funit\x7fdel",
		"line separators":        "a\u2028b\u2029c",
		"invalid UTF-8":          "bad\xffbyte\xc3",
		"emoji":                  "🎉 party",
	}
	for name, s := range escaped {
		in := base
		in.Subject = s
		in.PrincipalIdentity = s
		got, err := cloudevent.Encode(in)
		require.NoError(t, err, name)
		require.True(t, json.Valid(got), "%s: %q", name, got)
		require.JSONEq(t, string(sdkEncode(t, in)), string(got), name)
		e, err := cloudevent.Decode(got)
		require.NoError(t, err, name)
		require.NoError(t, e.Validate(), name)
	}
}

// TestEncodeRejects checks the attributes CloudEvents requires.
func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	zoned := time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	ok := cloudevent.Input{ID: "1", Source: "/h", Type: "t", Time: zoned, PublishedAt: zoned, Data: json.RawMessage(`{}`)}
	b, err := cloudevent.Encode(ok)
	require.NoError(t, err)
	require.Contains(t, string(b), `"time":"`+ok.Time.UTC().Format(time.RFC3339Nano)+`"`, "times are written in UTC")
	for name, mod := range map[string]func(*cloudevent.Input){
		"no id":      func(in *cloudevent.Input) { in.ID = "" },
		"no source":  func(in *cloudevent.Input) { in.Source = "" },
		"bad source": func(in *cloudevent.Input) { in.Source = "http://[::1" },
		"no type":    func(in *cloudevent.Input) { in.Type = "" },
		"no time":    func(in *cloudevent.Input) { in.Time = time.Time{} },
	} {
		in := ok
		mod(&in)
		_, err := cloudevent.Encode(in)
		require.Error(t, err, name)
	}
}

// benchInput is a 1 KiB event like the end-to-end benchmark's.
func benchInput() cloudevent.Input {
	data := make([]byte, 0, 1024)
	data = append(data, `{"pad":"`...)
	for len(data) < 1022 {
		data = append(data, 'x')
	}
	data = append(data, `"}`...)
	return cloudevent.Input{
		ID: "8f4d2a1e-0000-4000-8000-000000000001", Source: "/herald", Type: "bench.tick", Subject: "/bench/1",
		Time: time.Now().UTC(), PublishedAt: time.Now().UTC(), PrincipalIdentity: "dev", Data: data,
	}
}

// BenchmarkEncode measures the per-event cost of publishing's encoding.
func BenchmarkEncode(b *testing.B) {
	in := benchInput()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cloudevent.Encode(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeSDK is the same event through the SDK, for comparison
// (docs/benchmarks.md).
func BenchmarkEncodeSDK(b *testing.B) {
	in := benchInput()
	b.ReportAllocs()
	for b.Loop() {
		sdkEncode(b, in)
	}
}
