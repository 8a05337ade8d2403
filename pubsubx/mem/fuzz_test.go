package mem_test

import (
	"testing"

	"github.com/heraldevents/herald/pubsubx/drivertest"
)

// FuzzOpenURL: any mem:// URL opens a broker or is refused with an error,
// never a panic; an opened one closes.
func FuzzOpenURL(f *testing.F) {
	drivertest.FuzzOpenURL(f, "mem://fuzz", "mem://fuzz?ackdeadline=5s", "mem://fuzz?ackdeadline=-1s", "mem://fuzz?bogus=1", "mem://%zz", "mem:///")
}
