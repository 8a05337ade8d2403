package headcfg

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRoundTrip: every field comes back as it went in, zero values and
// extremes included; a reader ignores bytes a later version appends.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -1 << 63
		case 2:
			return 1<<63 - 1
		}
		return rng.Int64N(1<<40) - 1<<39
	}
	cases := []Config{{}, {ID: "q", Type: "DURABLE_QUEUE", Paused: true, CreatedAt: time.Unix(1_700_000_000, 123_456_789).UTC()}}
	for range 200 {
		cases = append(cases, Config{
			ID: str(), Type: str(), Filters: str(), Subscription: str(), Incarnation: str(), Paused: rng.IntN(2) == 0,
			CreatedAt:  time.Unix(0, rng.Int64()).UTC(),
			MessageTTL: num(), MaxLength: num(), RetryMin: num(), RetryMax: num(), MaxAttempts: num(), AckTimeout: num(),
		})
	}
	for _, c := range cases {
		b, err := c.MarshalBinary()
		require.NoError(t, err)
		var got Config
		require.NoError(t, got.UnmarshalBinary(b))
		require.Equal(t, c, got)
		require.NoError(t, got.UnmarshalBinary(append(b, 9, 9, 9)), "a later version's fields are skipped")
		require.Equal(t, c, got)
	}
}

// TestRefusesBadEncodings: an unknown version or any truncation fails,
// and leaves the value as it was.
func TestRefusesBadEncodings(t *testing.T) {
	c := Config{ID: "consumer", Type: "DURABLE_CONSUMER", Filters: `[{"event_type":"a"}]`, CreatedAt: time.Unix(5, 0).UTC(), RetryMax: 9000}
	b, err := c.MarshalBinary()
	require.NoError(t, err)
	keep := Config{ID: "kept"}
	for n := range len(b) {
		got := keep
		require.Error(t, got.UnmarshalBinary(b[:n]), "truncated to %d of %d bytes", n, len(b))
		require.Equal(t, keep, got)
	}
	bad := append([]byte{2}, b[1:]...)
	got := keep
	require.ErrorContains(t, got.UnmarshalBinary(bad), "unknown version 2")
	require.Equal(t, keep, got)
}
