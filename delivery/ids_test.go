package delivery

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestNewEventIDIsAVersion4UUID: every id parses as a version 4 UUID of
// the RFC variant, in the canonical lower-case form, and ids differ.
func TestNewEventIDIsAVersion4UUID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := newEventID()
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(4), u.Version())
		require.Equal(t, uuid.RFC4122, u.Variant())
		require.Equal(t, u.String(), id)
		require.False(t, seen[id], "repeated id %s", id)
		seen[id] = true
	}
}
