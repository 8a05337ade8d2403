package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// FuzzParse: filter groups from a query string either parse into valid
// groups that survive a JSON round trip, or fail with a client error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`[]`, `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"r"}]}]`,
		`[{"event_type":"a","filters":[{"filter_type":3,"resource_id":"/p/"}]}]`, `[{"event_type":"a","event_type":"b"}]`, `[{"EVENT_TYPE":"a"}]`, "[{\"event_type\":\"\xff\"}]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gs, err := filter.Parse("filter_groups", s)
		if err != nil {
			if c := herr.CodeOf(err); c != herr.Malformed && c != herr.InvalidArgument {
				t.Fatalf("code %v: %v", c, err)
			}
			return
		}
		if err := gs.Validate("filter_groups"); err != nil {
			t.Fatalf("parsed groups do not validate: %v", err)
		}
		b, err := json.Marshal(gs)
		if err != nil {
			t.Fatal(err)
		}
		again, err := filter.Parse("filter_groups", string(b))
		if err != nil || !again.Equal(gs) {
			t.Fatalf("round trip of %s: %v", b, err)
		}
	})
}
