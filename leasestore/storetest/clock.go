package storetest

import (
	"time"

	"github.com/heraldevents/herald/internal/testkit"
)

// Clock is a hand-moved clock for leasestore.Options.Now, so that expiry
// tests move time instead of sleeping through visibility timeouts. It is
// testkit.Clock (one fake clock for all of Herald's tests) and safe for
// concurrent use.
type Clock = testkit.Clock

// NewClock returns a clock standing at 2030-01-01T00:00:00Z.
func NewClock() *Clock {
	return testkit.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
}
