package cloudevent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/heraldevents/herald/cloudevent"
)

// encodeSDK is the reference encoder: the event built, validated and
// written by the CloudEvents SDK, as cloudevent.Encode did before it wrote
// the bytes itself.
func encodeSDK(in cloudevent.Input) ([]byte, error) {
	if in.Time.IsZero() {
		return nil, fmt.Errorf("cloudevent: time is required")
	}
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(in.ID)
	e.SetSource(in.Source)
	e.SetType(in.Type)
	if in.Subject != "" {
		e.SetSubject(in.Subject)
	}
	e.SetTime(in.Time.UTC())
	e.SetExtension(cloudevent.ExtPublishedAt, in.PublishedAt.UTC())
	if in.PrincipalIdentity != "" {
		e.SetExtension(cloudevent.ExtPrincipalIdentity, in.PrincipalIdentity)
	}
	if in.TraceParent != "" {
		e.SetExtension(cloudevent.ExtTraceParent, in.TraceParent)
		if in.TraceState != "" {
			e.SetExtension(cloudevent.ExtTraceState, in.TraceState)
		}
	}
	e.SetDataContentType(cloudevents.ApplicationJSON)
	e.DataEncoded = in.Data
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e.MarshalJSON()
}

// checkMatchesSDK fails t unless Encode and the SDK both refuse in, or
// both encode it to the same JSON value (compared decoded, numbers as
// written).
func checkMatchesSDK(t *testing.T, in cloudevent.Input) {
	t.Helper()
	got, gotErr := cloudevent.Encode(in)
	want, wantErr := encodeSDK(in)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("input %+v: Encode error %v, SDK error %v", in, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	g, err := decodeJSON(got)
	if err != nil {
		t.Fatalf("input %+v: Encode wrote invalid JSON %q: %v", in, got, err)
	}
	w, err := decodeJSON(want)
	if err != nil {
		t.Fatalf("input %+v: the SDK wrote invalid JSON %q: %v", in, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("input %+v:\nEncode %s\nSDK    %s", in, got, want)
	}
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one value")
	}
	return v, nil
}

// randomString draws strings that exercise escaping: ASCII, quotes,
// backslashes, control characters, HTML characters, multi-byte UTF-8,
// U+2028, spaces only, and (rarely) invalid UTF-8.
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "9", ".", "/", "-", " ", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", `"`, `\`, "<", ">", "&",
		"é", "日本", "🎉", "\u2028", "\u2029", "\ufffd", "%20", "?", "#", ":", "@"}
	if r.IntN(20) == 0 {
		pieces = append(pieces, "\xff", "\xc3")
	}
	var sb strings.Builder
	for range r.IntN(12) {
		sb.WriteString(pieces[r.IntN(len(pieces))])
	}
	return sb.String()
}

func randomTime(r *rand.Rand) time.Time {
	t := time.Unix(r.Int64N(253402300799+62135596800)-62135596800, r.Int64N(1e9))
	if r.IntN(3) == 0 {
		t = t.Truncate(time.Second)
	}
	return t.In(time.FixedZone("Z", (r.IntN(48)-24)*1800))
}

func randomData(r *rand.Rand) json.RawMessage {
	switch r.IntN(4) {
	case 0:
		return json.RawMessage(`{}`)
	case 1:
		return nil
	}
	m := map[string]any{}
	for range r.IntN(6) {
		switch r.IntN(4) {
		case 0:
			m[randomString(r)] = randomString(r)
		case 1:
			m[randomString(r)] = r.Float64() * 1e6
		case 2:
			m[randomString(r)] = []any{true, nil, randomString(r)}
		default:
			m[randomString(r)] = map[string]any{"n": r.IntN(100)}
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// TestEncodeMatchesSDK holds the hand-written encoder equal, as JSON, to
// the CloudEvents SDK's output (and to its refusals) for random inputs.
func TestEncodeMatchesSDK(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 5))
	sources := []string{"/herald", "https://events.example.com/x?y=1", "urn:herald:test", "HTTP://Example.com/%7e", "", " ", "http://[::1", "a b", "/é"}
	for range 5000 {
		in := cloudevent.Input{
			ID: randomString(r), Source: sources[r.IntN(len(sources))], Type: randomString(r),
			Time: randomTime(r), PublishedAt: randomTime(r), Data: randomData(r),
		}
		if r.IntN(2) == 0 {
			in.ID = "8f4d2a1e-0000-4000-8000-000000000001"
			in.Type = "myapp.user.created"
		}
		if r.IntN(2) == 0 {
			in.Subject = randomString(r)
		}
		if r.IntN(2) == 0 {
			in.PrincipalIdentity = randomString(r)
		}
		if r.IntN(3) == 0 {
			in.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			if r.IntN(2) == 0 {
				in.TraceState = randomString(r)
			}
		}
		if r.IntN(50) == 0 {
			in.Time = time.Time{}
		}
		checkMatchesSDK(t, in)
	}
	// The common case is byte for byte the SDK's.
	in := benchInput()
	got, err := cloudevent.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := encodeSDK(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode %s\nSDK    %s", got, want)
	}
}

// FuzzEncodeMatchesSDK: for any attributes, Encode and the CloudEvents
// SDK refuse alike or write equal JSON.
func FuzzEncodeMatchesSDK(f *testing.F) {
	f.Add("8f4d2a1e", "/herald", "myapp.user.created", "/users/1", "dev", "", "", int64(1729089000), int64(0), int64(1729089001), int64(5), []byte(`{"a":1}`))
	f.Add(" ", "http://[::1", "t", " ", "\x00\"\\", "00-x-y-01", "k=v", int64(-62135596800), int64(999999999), int64(253402300799), int64(1), []byte(`{}`))
	f.Add("id", "HTTP://Example.com/%7e", "<t>&", "日本\u2028", "\xff", "tp", "", int64(0), int64(1), int64(0), int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, id, source, typ, subject, principal, traceparent, tracestate string, sec, nsec, pubSec, pubNsec int64, data []byte) {
		in := cloudevent.Input{
			ID: id, Source: source, Type: typ, Subject: subject, PrincipalIdentity: principal,
			TraceParent: traceparent, TraceState: tracestate,
			Time: time.Unix(sec, nsec), PublishedAt: time.Unix(pubSec, pubNsec),
		}
		if data != nil {
			// Encode's contract: Data is a validated JSON value.
			if json.Valid(data) {
				in.Data = data
			} else {
				in.Data = json.RawMessage(`{}`)
			}
		}
		checkMatchesSDK(t, in)
	})
}

// BenchmarkEncodeSDK is BenchmarkEncode for the reference encoder.
func BenchmarkEncodeSDK(b *testing.B) {
	in := benchInput()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeSDK(in); err != nil {
			b.Fatal(err)
		}
	}
}
