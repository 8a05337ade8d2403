package delivery

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCompact: compact writes what json.Compact writes, and hands back a
// message without whitespace between tokens as it is (spaces inside its
// strings included), without copying it.
func TestCompact(t *testing.T) {
	t.Parallel()
	for _, m := range []string{
		`{}`, `{"a":1}`, `{"name":"Ada Lovelace","note":"tab\there"}`, `{"q":"say \"hi there\"","b":"\\ "}`,
		`{ "a" : 1 }`, "{\"a\":[1,\n 2]}", `{"s":"x y", "t":2}`, "{\r\n\t\"a\":\"b c\"\r\n}", `{"e":"\\"," f":1}`,
	} {
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, []byte(m)), m)
		in := json.RawMessage(m)
		got := compact(in)
		require.Equal(t, want.String(), string(got), m)
		if want.String() == m {
			require.Same(t, &in[0], &got[0], "compact input is returned as is: %s", m)
		}
	}
}
