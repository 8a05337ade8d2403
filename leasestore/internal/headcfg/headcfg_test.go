package headcfg

import (
	"encoding/hex"
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
			Owner: str(),
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
	bad := append([]byte{3}, b[1:]...)
	got := keep
	require.ErrorContains(t, got.UnmarshalBinary(bad), "unknown version 3")
	require.Equal(t, keep, got)
}

// version1Golden is a Config as the release before version 2 encoded it
// (ID "nd-q", every field set, no Owner): heads stored by that release
// must still decode, and a Config without an Owner must still encode to
// exactly these bytes, so that that release keeps reading it.
const version1Golden = "01046e642d71114e4f4e5f44555241424c455f5155455545145b7b226576656e745f74797065223a2261227d5d0b686572616c642d6e642d3103696e63010180c49fd50c05c0a90714d00fa01f0ae0d403"

func goldenConfig() Config {
	return Config{ID: "nd-q", Type: "NON_DURABLE_QUEUE", Filters: `[{"event_type":"a"}]`, Subscription: "herald-nd-1", Paused: true,
		CreatedAt: time.Unix(1_700_000_000, 5).UTC(), MessageTTL: 60000, MaxLength: 10, RetryMin: 1000, RetryMax: 2000, MaxAttempts: 5, AckTimeout: 30000, Incarnation: "inc"}
}

// TestVersion1: an encoding of version 1 decodes (no Owner), and a Config
// without an Owner is still written as version 1, byte for byte.
func TestVersion1(t *testing.T) {
	gold, err := hex.DecodeString(version1Golden)
	require.NoError(t, err)
	var got Config
	require.NoError(t, got.UnmarshalBinary(gold))
	require.Equal(t, goldenConfig(), got)
	require.Empty(t, got.Owner)
	b, err := goldenConfig().MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, gold, b)
}

// TestVersion2Owner: a Config with an Owner is written as version 2 and
// comes back with it; a version-2 encoding cut anywhere, or with an empty
// Owner (never written), is refused.
func TestVersion2Owner(t *testing.T) {
	c := goldenConfig()
	c.Owner = "alice@example.com"
	b, err := c.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(2), b[0])
	var got Config
	require.NoError(t, got.UnmarshalBinary(b))
	require.Equal(t, c, got)
	for n := range len(b) {
		keep := Config{ID: "kept"}
		got := keep
		require.Error(t, got.UnmarshalBinary(b[:n]), "truncated to %d of %d bytes", n, len(b))
		require.Equal(t, keep, got)
	}
	gold, err := hex.DecodeString(version1Golden)
	require.NoError(t, err)
	empty := append(append([]byte{2}, gold[1:]...), 0)
	require.Error(t, got.UnmarshalBinary(empty), "a version-2 Owner is never empty")
}
