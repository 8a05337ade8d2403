package nats_test

import (
	"context"
	"testing"

	"github.com/heraldevents/herald/pubsubx"
)

// FuzzOpenURL: any nats:// URL opens a broker or is refused with an
// error, never a panic; opening does not dial, and an opened broker
// closes.
func FuzzOpenURL(f *testing.F) {
	for _, s := range []string{
		"nats://127.0.0.1:4222/HERALD",
		"nats://u:p@127.0.0.1:4222/HERALD?ackdeadline=30s&subject_prefix=herald.dev",
		"nats://127.0.0.1:4222/HERALD?ackdeadline=0s",
		"nats://127.0.0.1:4222/bad.stream",
		"nats:///HERALD",
		"nats://h/HERALD?subject_prefix=a..b",
		"nats://h/HERALD?bogus=1",
		"nats://%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		b, err := pubsubx.Open(context.Background(), raw)
		if err != nil {
			return
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
