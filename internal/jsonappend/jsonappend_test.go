package jsonappend

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMatchesMarshal: each appender writes what json.Marshal writes for
// the same value, after what dst held.
func TestMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "q\"uote", `back\slash`, "<&>", "é日本", "\u2028\u2029", "\xff", "\x00\x1f\x7f", "tab\t"} {
		want, _ := json.Marshal(s)
		require.Equal(t, "x"+string(want), string(String([]byte("x"), s)), "%q", s)
	}
	for _, m := range []string{"{}", `{"n":1}`, `{ "n" : [1, 2] }`, "{\n\"a\":\"<b>\"}", "{\"u\":\"\u2028\"}", `"s"`, `12`, `null`} {
		want, err := json.Marshal(json.RawMessage(m))
		require.NoError(t, err)
		require.Equal(t, "x"+string(want), string(Raw([]byte("x"), json.RawMessage(m))), "%q", m)
	}
	require.Equal(t, "xnull", string(Raw([]byte("x"), nil)))
	for _, at := range []time.Time{{}, time.Date(2024, 10, 16, 14, 30, 0, 120, time.UTC), time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("", -5*3600))} {
		want, err := json.Marshal(at)
		require.NoError(t, err)
		got, ok := Time([]byte("x"), at)
		require.True(t, ok)
		require.Equal(t, "x"+string(want), string(got))
	}
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := json.Marshal(at)
		require.Error(t, err)
		got, ok := Time([]byte("x"), at)
		require.False(t, ok)
		require.Equal(t, "x", string(got))
	}
}
