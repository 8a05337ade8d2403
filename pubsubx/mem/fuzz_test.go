package mem_test

import (
	"context"
	"testing"

	"github.com/heraldevents/herald/pubsubx"
)

// FuzzOpenURL: any mem:// URL opens a broker or is refused with an error,
// never a panic; an opened one closes.
func FuzzOpenURL(f *testing.F) {
	for _, s := range []string{"mem://fuzz", "mem://fuzz?ackdeadline=5s", "mem://fuzz?ackdeadline=-1s", "mem://fuzz?bogus=1", "mem://%zz", "mem:///"} {
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
