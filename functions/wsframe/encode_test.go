package wsframe

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
)

// TestEncodeEventFrameMatchesMarshal: an event frame, written by hand, is
// byte for byte what json.Marshal writes for it; any other frame, and an
// event frame json.Marshal would refuse, takes json.Marshal's path.
func TestEncodeEventFrameMatchesMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	texts := []string{"", "orders.created", "a\"b<c>&", "é\u2028", "\xff"}
	messages := []string{"{}", `{"n":1}`, `{ "s" : "Ada Lovelace" }`, `{"h":"<&>"}`}
	at := time.Date(2024, 10, 16, 14, 30, 0, 123000000, time.UTC)
	for i := range 2000 {
		f := &ServerFrame{
			Type:          TypeEvent,
			DeliveryTag:   int64(r.IntN(3)) * int64(r.IntN(1_000_000)),
			DeliveryCount: int64(r.IntN(3)),
			Event: &delivery.ConsumerEvent{
				EventType: texts[r.IntN(len(texts))], PrincipalIdentity: texts[r.IntN(len(texts))],
				OccurredAt: at, PublishedAt: at.Add(time.Second),
				Message: json.RawMessage(messages[r.IntN(len(messages))]),
			},
		}
		switch r.IntN(6) {
		case 0:
			f.Type = TypeDeadLetteredEvent // another frame: json.Marshal's path
			f.Reason = "EXPIRED"
		case 1:
			f.ID = "x" // not a plain event frame
		case 2:
			f.Event.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // json.Marshal refuses it
		}
		want, err := json.Marshal(f)
		if err != nil {
			want, _ = json.Marshal(&ServerFrame{Type: TypeError, StatusCode: 500, Code: herr.Internal.String(), Message: "an event could not be encoded"})
		}
		require.Equal(t, string(want), string(f.Encode()), "frame %d: %+v", i, f)
	}
}
