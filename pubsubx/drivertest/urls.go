package drivertest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/heraldevents/herald/pubsubx"
)

// RandomHex returns n random bytes in hex: the suffix drivers' tests give
// their topics and subscriptions so that runs on a shared server never
// meet.
func RandomHex(n int) string { return randomHex(n) }

// URLBrokers opens brokers by URL and remembers which URL opened which, so
// that a Harness embedding it gets MakeSecondClient: a second broker on
// the same topic. The zero value is ready; it is safe for concurrent use.
type URLBrokers struct {
	mu   sync.Mutex
	urls map[*pubsubx.Broker]string // broker → the URL that opened it
}

// Open opens u with pubsubx.Open and, when that succeeds, remembers the
// broker and runs cleanup (typically deleting the topic u made) when t
// ends. Errors are pubsubx.Open's.
func (o *URLBrokers) Open(ctx context.Context, t testing.TB, u string, cleanup func()) (*pubsubx.Broker, error) {
	b, err := pubsubx.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	if o.urls == nil {
		o.urls = map[*pubsubx.Broker]string{}
	}
	o.urls[b] = u
	o.mu.Unlock()
	t.Cleanup(cleanup)
	return b, nil
}

// MakeSecondClient implements Harness: it opens the URL that opened b
// again. It fails for a broker Open did not make.
func (o *URLBrokers) MakeSecondClient(ctx context.Context, _ testing.TB, b *pubsubx.Broker) (*pubsubx.Broker, error) {
	o.mu.Lock()
	u, ok := o.urls[b]
	o.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("broker was not made by this harness")
	}
	return pubsubx.Open(ctx, u)
}
