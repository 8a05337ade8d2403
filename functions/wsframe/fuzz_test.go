package wsframe_test

import (
	"testing"

	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
)

// FuzzDecode: any client frame decodes or is refused with a client error
// (400 or 422), never a panic; a refusal keeps only a valid id.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"type":"ping","id":"p"}`, `{"type":"demand","n":5}`, `{"type":"ack","delivery_tags":[1,2]}`,
		`{"type":"open","stream":"non_durable","filter_groups":[{"event_type":"a"}]}`, `{"type":"open","stream":"durable","queue_id":"q"}`,
		`{"type":"actions","actions":[{"delivery_tag":1,"action":"REPLAY"}]}`, `{"type":"ping"}{"type":"ping"}`, `{"type":"ping","type":"ack"}`, "{\"type\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := wsframe.Decode(data)
		if err == nil {
			if fr == nil || fr.Type == "" {
				t.Fatalf("accepted %q without a type", data)
			}
			return
		}
		if c := herr.CodeOf(err); c != herr.Malformed && c != herr.InvalidArgument {
			t.Fatalf("code %v: %v", c, err)
		}
		if fr != nil && len(fr.ID) > wsframe.MaxIDLength {
			t.Fatalf("kept an invalid id")
		}
	})
}
