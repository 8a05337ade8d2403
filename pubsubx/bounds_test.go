package pubsubx_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// TestQueryBounds: the three bounds parameters parse, default, and are
// refused, naming the parameter, when they are not positive integers or a
// known overflow.
func TestQueryBounds(t *testing.T) {
	t.Parallel()
	parse := func(q string) (pubsubx.Bounds, error) {
		u, err := url.Parse("rabbit://x?" + q)
		require.NoError(t, err)
		return pubsubx.QueryBounds(u)
	}
	b, err := parse("")
	require.NoError(t, err)
	require.Equal(t, pubsubx.Bounds{}, b)
	require.Equal(t, pubsubx.Bounds{MaxPending: pubsubx.DefaultMaxPending, MaxPendingBytes: pubsubx.DefaultMaxPendingBytes, Overflow: pubsubx.RejectPublish}, b.WithDefaults())

	b, err = parse("max_pending=5&max_pending_bytes=1024&overflow=drop-head")
	require.NoError(t, err)
	require.Equal(t, pubsubx.Bounds{MaxPending: 5, MaxPendingBytes: 1024, Overflow: pubsubx.DropHead}, b)

	for q, name := range map[string]string{
		"max_pending=0":         "max_pending",
		"max_pending=-3":        "max_pending",
		"max_pending=1e3":       "max_pending",
		"max_pending_bytes=x":   "max_pending_bytes",
		"overflow=reject":       "overflow",
		"overflow=Drop-Head":    "overflow",
		"max_pending_bytes=0.5": "max_pending_bytes",
	} {
		_, err := parse(q)
		requireInvalid(t, err, name)
	}
}
