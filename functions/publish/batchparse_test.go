package publish

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/internal/strictjson"
)

var batchSeeds = []string{
	`{"events":[{"event_type":"a.b","message":{"x":1}}]}`,
	` { "events" : [ {"event_type":"a.b","resource":{"resource_id":"/r/ü"},"occurred_at":"2024-10-16T14:30:00Z","message":{"n":[1,2,{"k":"v"}]}} , {"event_type":"c"} ] } `,
	`{"events":[{}]}`,
	`{"events":[{"event_type":"a","resource":{}}]}`,
	`{"events":[]}`,
	`{"events":[{"event_type":"a","event_type":"b"}]}`,
	`{"events":[{"event_type":"a","message":{"x":1,"x":2}}]}`,
	`{"events":[{"event_type":"a\u0062"}]}`,
	`{"events":[{"event_type":"a","message":null}]}`,
	`{"events":[{"event_type":"a","resource":null}]}`,
	`{"events":[{"event_type":"a","extra":1}]}`,
	`{"events":[{"event_type":"a"}],"more":1}`,
	`{"events":[{"event_type":"a","message":{"s":"<b> & \u2028"}}]}`,
	"{\"events\":[{\"event_type\":\"a\xff\"}]}",
	`{"events":[{"event_type":"a","idempotency_key":"k-1 /x"},{"event_type":"b","idempotency_key":""}]}`,
	`{"events":[{"event_type":"a","idempotency_key":"k","idempotency_key":"k"}]}`,
	`{"events":[{"event_type":"a","idempotency_key":7}]}`,
	`{"events":[{"event_type":"a","idempotency_key":"k\u0041"}]}`,
	`{"events":[{"event_type":"a","message":{"deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}]}`,
}

// FuzzParseBatch: every body parseBatch accepts, strictjson.Unmarshal
// (the decoder it stands in for) accepts too, with the same events; and
// the scan each event carries is ScanObject's of its message.
func FuzzParseBatch(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := parseBatch(body)
		if !ok {
			return
		}
		var all struct {
			Events []WireEvent `json:"events"`
		}
		require.NoError(t, strictjson.Unmarshal(body, &all), "%q", body)
		require.Len(t, fast, len(all.Events))
		for i, e := range fast {
			want := all.Events[i]
			require.Equal(t, want.EventType, e.EventType)
			require.Equal(t, string(want.Message), string(e.Message))
			require.Equal(t, want.OccurredAt, e.OccurredAt)
			require.Equal(t, want.Resource, e.Resource)
			require.Equal(t, want.IdempotencyKey, e.IdempotencyKey)
			if len(e.Message) > 0 {
				sc, ok := strictjson.ScanObject(e.Message, delivery.MaxMessageDepth)
				require.True(t, ok)
				require.Equal(t, sc, e.scan)
			}
		}
	})
}

// TestParseBatchTakesTheCommonShape: a typical batch takes the one-pass
// path, and its messages are slices of the body, not copies.
func TestParseBatchTakesTheCommonShape(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := range 100 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"event_type":"orders.created","resource":{"resource_id":"/orders/ü"},"occurred_at":"2024-10-16T14:30:00Z","message":{"id":1,"name":"Ada Lovelace","items":[{"sku":"a","qty":2}]}}`)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	events, ok := parseBatch(body)
	require.True(t, ok)
	require.Len(t, events, 100)
	msg := events[99].Message
	require.True(t, bytes.Contains(body, msg))
	require.Same(t, &body[bytes.LastIndex(body, []byte(`{"id":1`))], &msg[0])
	require.True(t, events[0].scan.Compact)
	require.True(t, events[0].scan.HTMLSafe)
	// An event's idempotency_key is read on the same path.
	events, ok = parseBatch([]byte(batchSeeds[14]))
	require.True(t, ok)
	require.Equal(t, "k-1 /x", *events[0].IdempotencyKey)
	require.Equal(t, "", *events[1].IdempotencyKey)
	// Each of the seeds either takes the path or is left to the decoder,
	// never half-decoded.
	for _, s := range batchSeeds[2:] {
		events, ok := parseBatch([]byte(s))
		require.Equal(t, ok, events != nil, "%s", s)
	}
}
