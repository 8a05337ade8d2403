package rabbit_test

import (
	"testing"

	"github.com/heraldevents/herald/pubsubx/drivertest"
)

// FuzzOpenURL: any rabbit:// URL opens a broker or is refused with an
// error, never a panic; opening does not dial, and an opened broker
// closes.
func FuzzOpenURL(f *testing.F) {
	drivertest.FuzzOpenURL(f,
		"rabbit://herald?url=amqp%3A%2F%2Fguest%3Aguest%40127.0.0.1%3A5672%2F",
		"rabbit://herald?url=amqps%3A%2F%2Fu%3Ap%40h%2Fvh&ackdeadline=30s",
		"rabbit://herald?url=amqp%3A%2F%2Fh&ackdeadline=-1s",
		"rabbit://herald?url=http%3A%2F%2Fh",
		"rabbit://?url=amqp%3A%2F%2Fh",
		"rabbit://herald?bogus=1",
		"rabbit://%zz",
		"rabbit:///a/b?url=amqp%3A%2F%2Fh",
	)
}
