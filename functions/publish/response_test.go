package publish

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/internal/strictjson"
)

func randomText(r *rand.Rand) string {
	pieces := []string{"a", "Z", "9", ".", " ", "\t", "\n", "\x00", "\x1f", "\x7f", `"`, `\`, "<", ">", "&",
		"é", "日本", "🎉", "\u2028", "\u2029", "\xff", ":", "2024-10-16T14:30:00Z"}
	var sb strings.Builder
	for range r.IntN(8) {
		sb.WriteString(pieces[r.IntN(len(pieces))])
	}
	return sb.String()
}

func randomMessage(r *rand.Rand) json.RawMessage {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return json.RawMessage(`{}`)
	case 2:
		return json.RawMessage(`[1, "x"]`)
	}
	m := map[string]any{}
	for range r.IntN(5) {
		m[randomText(r)] = []any{randomText(r), r.IntN(1000), 2.5, nil, map[string]any{"k": randomText(r)}}
	}
	var b []byte
	if r.IntN(3) == 0 {
		b, _ = json.MarshalIndent(m, " ", "\t")
	} else {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // leaves '<', '>', '&' raw, for the writer to escape
		_ = enc.Encode(m)
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	return b
}

// TestAppendResultsMatchesMarshal: the hand-written answer is byte for
// byte what json.Marshal writes, for random results.
func TestAppendResultsMatchesMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 13))
	for range 500 {
		results := make([]Result, 1+r.IntN(5))
		for i := range results {
			res := &results[i]
			if r.IntN(10) > 0 {
				res.Event = &WireEvent{EventType: randomText(r), Message: randomMessage(r)}
				if sc, ok := strictjson.ScanObject(res.Event.Message, delivery.MaxMessageDepth); ok && r.IntN(2) == 0 {
					res.Event.scan = sc // as parseBatch leaves it
				}
				if r.IntN(2) == 0 {
					res.Event.OccurredAt = randomText(r)
				}
				if r.IntN(2) == 0 {
					res.Event.Resource = &WireResource{ResourceID: randomText(r)}
				}
			}
			res.Success = r.IntN(2) == 0
			if r.IntN(2) == 0 {
				res.FailureReason = randomText(r)
			}
		}
		want, err := json.Marshal(map[string][]Result{"results": results})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendResults(nil, results); !bytes.Equal(got, want) {
			t.Fatalf("appendResults\n%s\njson.Marshal\n%s", got, want)
		}
		want, err = json.Marshal(map[string]Result{"result": results[0]})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSingle(nil, &results[0]); !bytes.Equal(got, want) {
			t.Fatalf("appendSingle\n%s\njson.Marshal\n%s", got, want)
		}
	}
}
