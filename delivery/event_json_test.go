package delivery

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConsumerEventAppendJSONMatchesMarshal: AppendJSON writes what
// json.Marshal writes, byte for byte, for events with every kind of text
// (escapes, HTML characters, U+2028, invalid UTF-8), messages with and
// without whitespace, and times in and out of json.Marshal's range.
func TestConsumerEventAppendJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	texts := []string{"", "orders.created", "billing", "a\"b", `back\slash`, "<tag>&", "é日本", "line\nbreak", "\u2028", "\xff\xfe", "tab\t", "\x00"}
	messages := []string{"null", "{}", `{"n":1}`, `{ "n" : 1 }`, `{"s":"Ada Lovelace"}`, `{"h":"<b>&"}`, "{\"u\":\"\u2028\"}", `{"a":[1, 2]}`, "{\n\"x\":true}"}
	times := []time.Time{{}, time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC), time.Date(2024, 10, 16, 14, 30, 0, 123456789, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600))}
	for i := range 3000 {
		e := &ConsumerEvent{
			EventType:         texts[r.IntN(len(texts))],
			PrincipalIdentity: texts[r.IntN(len(texts))],
			OccurredAt:        times[r.IntN(len(times))],
			PublishedAt:       times[r.IntN(3)],
			Message:           json.RawMessage(messages[r.IntN(len(messages))]),
		}
		if r.IntN(2) == 0 {
			e.ID = texts[r.IntN(len(texts))]
		}
		if r.IntN(2) == 0 {
			e.Resource.ResourceID = texts[r.IntN(len(texts))]
		}
		if r.IntN(10) == 0 {
			e.Message = nil // written as null
		}
		want, wantErr := json.Marshal(e)
		prefix := []byte("prefix:")
		got, err := e.AppendJSON(prefix)
		if wantErr != nil {
			require.Error(t, err, strconv.Itoa(i))
			require.Equal(t, "prefix:", string(got), "nothing appended on failure")
			continue
		}
		require.NoError(t, err, strconv.Itoa(i))
		require.Equal(t, "prefix:"+string(want), string(got), "%d: %+v", i, e)
	}
}
