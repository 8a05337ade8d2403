package nats_test

import (
	"testing"

	"github.com/heraldevents/herald/pubsubx/drivertest"
)

// FuzzOpenURL: any nats:// URL opens a broker or is refused with an
// error, never a panic; opening does not dial, and an opened broker
// closes.
func FuzzOpenURL(f *testing.F) {
	drivertest.FuzzOpenURL(f,
		"nats://127.0.0.1:4222/HERALD",
		"nats://u:p@127.0.0.1:4222/HERALD?ackdeadline=30s&subject_prefix=herald.dev",
		"nats://127.0.0.1:4222/HERALD?ackdeadline=0s",
		"nats://127.0.0.1:4222/bad.stream",
		"nats:///HERALD",
		"nats://h/HERALD?subject_prefix=a..b",
		"nats://h/HERALD?bogus=1",
		"nats://%zz",
	)
}
