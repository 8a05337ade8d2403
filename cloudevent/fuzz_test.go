package cloudevent_test

import (
	"testing"

	"github.com/heraldevents/herald/cloudevent"
)

// FuzzParseSequence: what parses formats back to itself, and positions
// keep their order as strings.
func FuzzParseSequence(f *testing.F) {
	for _, s := range []string{"001.00000000000000000042", "001.-0000000000000000042", "001.99999999999999999999", "", "002.00000000000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pos, err := cloudevent.ParseSequence(s)
		if err != nil {
			return
		}
		if pos < 0 || cloudevent.FormatSequence(pos) != s {
			t.Fatalf("%q parsed to %d, which formats as %q", s, pos, cloudevent.FormatSequence(pos))
		}
		if pos > 0 && !(cloudevent.FormatSequence(pos-1) < s) {
			t.Fatalf("%q does not sort after its predecessor", s)
		}
	})
}
