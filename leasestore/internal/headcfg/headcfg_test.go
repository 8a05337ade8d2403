package headcfg

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRoundTrip: every field comes back as it went in, zero values and
// extremes (years far outside Unix nanoseconds' range) included; bytes
// after the last field are refused rather than dropped at the next write.
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
			CreatedAt:  time.Unix(rng.Int64N(1<<50)-1<<49, rng.Int64N(1e9)).UTC(),
			MessageTTL: num(), MaxLength: num(), RetryMin: num(), RetryMax: num(), MaxAttempts: num(), AckTimeout: num(),
		})
	}
	for _, c := range cases {
		b, err := c.MarshalBinary()
		require.NoError(t, err)
		var got Config
		require.NoError(t, got.UnmarshalBinary(b))
		require.Equal(t, c, got)
		before := got
		require.Error(t, got.UnmarshalBinary(append(b, 9)), "bytes after the last field are refused")
		require.Equal(t, before, got)
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
	paused := 1 // the Paused flag's offset: after the version and five strings
	for _, s := range []string{c.ID, c.Type, c.Filters, c.Subscription, c.Incarnation} {
		paused += 1 + len(s)
	}
	for _, at := range []int{paused, paused + 1} {
		flag := append([]byte(nil), b...)
		flag[at] = 2
		got := keep
		require.Error(t, got.UnmarshalBinary(flag), "a flag byte of 2 at %d", at)
		require.Equal(t, keep, got)
	}
	bad := append([]byte{2}, b[1:]...)
	got := keep
	require.ErrorContains(t, got.UnmarshalBinary(bad), "unknown version 2")
	require.Equal(t, keep, got)
}
