package mem_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/drivertest"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// harness opens mem:// brokers by URL, so a second client is a second Open
// of the same name, as a second handler stack in one process would be.
type harness struct {
	urls map[*pubsubx.Broker]string // broker → the URL that opened it
}

func (h *harness) open(ctx context.Context, query string) (*pubsubx.Broker, error) {
	name := make([]byte, 8)
	_, _ = rand.Read(name)
	u := "mem://drivertest-" + hex.EncodeToString(name) + query
	b, err := pubsubx.Open(ctx, u)
	if err == nil {
		h.urls[b] = u
	}
	return b, err
}

func (h *harness) MakeBroker(ctx context.Context, _ testing.TB) (*pubsubx.Broker, error) {
	return h.open(ctx, "")
}

func (h *harness) MakeBrokerWithAckDeadline(ctx context.Context, _ testing.TB, d time.Duration) (*pubsubx.Broker, error) {
	return h.open(ctx, "?ackdeadline="+d.String())
}

func (h *harness) MakeBrokerWithMaxPending(ctx context.Context, _ testing.TB, n int) (*pubsubx.Broker, error) {
	return h.open(ctx, "?max_pending="+strconv.Itoa(n))
}

func (h *harness) MakeSecondClient(ctx context.Context, _ testing.TB, b *pubsubx.Broker) (*pubsubx.Broker, error) {
	return pubsubx.Open(ctx, h.urls[b])
}

// MakeUnreachableBroker returns a closed broker: in one process, "the
// server is gone" and "closed" are the same thing.
func (h *harness) MakeUnreachableBroker(context.Context, testing.TB) (*pubsubx.Broker, error) {
	b := mem.New(0)
	return b, b.Close()
}

func (h *harness) Features() drivertest.Features {
	return drivertest.Features{PublishOrder: true, AckDeadline: mem.DefaultAckDeadline}
}

func newHarness(context.Context, testing.TB) (drivertest.Harness, error) {
	return &harness{urls: map[*pubsubx.Broker]string{}}, nil
}

var _ drivertest.BoundedBacklog = (*harness)(nil)

func TestConformance(t *testing.T) { drivertest.RunConformanceTests(t, newHarness) }

func BenchmarkConformance(b *testing.B) { drivertest.RunBenchmarks(b, newHarness) }
