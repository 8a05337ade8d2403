package cloudevent_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
)

// TestEncodeAttributes decodes Encode's output with the SDK and checks every
// attribute, including strings that need escaping.
func TestEncodeAttributes(t *testing.T) {
	t.Parallel()
	base := cloudevent.Input{
		ID: "8f4d2a1e-0000-4000-8000-000000000001", Source: "/herald", Type: "myapp.user.created",
		Subject: "/users/123", Time: time.Date(2024, 10, 16, 14, 30, 0, 0, time.FixedZone("X", -7*3600)),
		PublishedAt:       time.Date(2024, 10, 16, 14, 30, 1, 123456789, time.UTC),
		PrincipalIdentity: "user@example.com", Data: json.RawMessage(`{"user_id":"123","html":"<b>&amp;</b>","n":[1,2.5,null]}`),
	}
	for name, s := range map[string]string{
		"plain":                  "/users/123",
		"quotes and backslashes": `say "hi" \ bye`,
		"control characters":     "tab\tnew\nline",
		"unicode":                "/files/日本語/ü 🎉",
		"html":                   "/a<b>&c",
	} {
		in := base
		in.Subject, in.PrincipalIdentity = s, s
		b, err := cloudevent.Encode(in)
		require.NoError(t, err, name)
		require.True(t, json.Valid(b), name)
		e, err := cloudevent.Decode(b)
		require.NoError(t, err, name)
		require.NoError(t, e.Validate(), name)
		require.Equal(t, "1.0", e.SpecVersion(), name)
		require.Equal(t, in.ID, e.ID(), name)
		require.Equal(t, in.Source, e.Source(), name)
		require.Equal(t, in.Type, e.Type(), name)
		require.Equal(t, s, e.Subject(), name)
		require.True(t, in.Time.Equal(e.Time()), name)
		require.Equal(t, "application/json", e.DataContentType(), name)
		require.JSONEq(t, string(in.Data), string(e.Data()), name)
		require.Equal(t, s, e.Extensions()[cloudevent.ExtPrincipalIdentity], name)
		require.Contains(t, string(b), `"time":"`+in.Time.UTC().Format(time.RFC3339)+`"`, "times are written in UTC")
	}
	in := base
	in.Subject, in.PrincipalIdentity = "", ""
	b, err := cloudevent.Encode(in)
	require.NoError(t, err)
	require.NotContains(t, string(b), `"subject"`)
	require.NotContains(t, string(b), cloudevent.ExtPrincipalIdentity)
}

// TestEncodeRejects checks the attributes CloudEvents requires.
func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	zoned := time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	ok := cloudevent.Input{ID: "1", Source: "/h", Type: "t", Time: zoned, PublishedAt: zoned, Data: json.RawMessage(`{}`)}
	b, err := cloudevent.Encode(ok)
	require.NoError(t, err)
	require.Contains(t, string(b), `"time":"`+ok.Time.UTC().Format(time.RFC3339)+`"`, "times are written in UTC")
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
