package publish

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFormatTime: the echo's occurred_at is the time in UTC as RFC 3339
// with nanoseconds; a publisher's text already in that form is kept as
// it is, without allocating.
func TestFormatTime(t *testing.T) {
	for _, given := range []string{"2026-12-05T10:00:00Z", "2026-12-05T10:00:00.5Z", "2026-12-05T12:00:00.123456789+02:00", "2026-12-05T10:00:00.100Z"} {
		at, err := time.Parse(time.RFC3339Nano, given)
		require.NoError(t, err)
		require.Equal(t, at.UTC().Format(time.RFC3339Nano), formatTime(given, at), given)
	}
	given := "2026-12-05T10:00:00.25Z"
	at, err := time.Parse(time.RFC3339Nano, given)
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = formatTime(given, at) }), "a UTC text in normal form is kept")
}
