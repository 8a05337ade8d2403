package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// BoundedBacklog is the Harness capability of a driver whose broker bounds
// a subscription's backlog by count (pubsubx.Bounds: the in-memory
// broker, RabbitMQ, NATS JetStream). Every driver implements it or
// RetainedBacklog: a subscription nobody reads must not grow its broker
// without limit.
type BoundedBacklog interface {
	// MakeBrokerWithMaxPending opens a broker like MakeBroker whose
	// subscriptions each hold at most maxPending messages, with
	// overflow=reject-publish.
	MakeBrokerWithMaxPending(ctx context.Context, t testing.TB, maxPending int) (*pubsubx.Broker, error)
}

// RetainedBacklog is the Harness capability of a driver whose broker
// cannot count a subscription's backlog and bounds it by time instead (a
// message nobody receives is dropped after the subscription's retention:
// Amazon SQS, Google Pub/Sub). Features.BacklogRetention is the bound.
type RetainedBacklog interface {
	// Retention returns how long subscription name of b keeps a message
	// nobody receives, as the broker reports it.
	Retention(ctx context.Context, t testing.TB, b *pubsubx.Broker, name string) (time.Duration, error)
}

// boundedBacklogSize is the bound the BoundedBacklog test asks for.
const boundedBacklogSize = 5

// testBoundedBacklog: a subscription nobody reads is bounded. A
// BoundedBacklog broker stores at most max_pending messages for it: the
// sends past the bound fail with ResourceExhausted (never reported sent
// when they were not stored), what it stored arrives whole, and once it
// is received and acked there is room again. Where the bound is each
// subscription's own, a subscription with room still gets the message a
// full one refused. A RetainedBacklog broker reports a retention no
// longer than the driver's bound.
func testBoundedBacklog(t *testing.T, f *fixture) {
	if h, ok := f.h.(BoundedBacklog); ok {
		testMaxPending(t, f, h)
		return
	}
	if h, ok := f.h.(RetainedBacklog); ok {
		b := f.broker()
		sub := f.subscribe(b, "retained", nil)
		r, err := h.Retention(f.ctx, t, b, sub)
		require.NoError(t, err, "Retention")
		bound := f.h.Features().BacklogRetention
		require.Positive(t, bound, "Features.BacklogRetention must state the driver's bound")
		require.Positive(t, r, "the subscription keeps messages for ever")
		require.LessOrEqual(t, r, bound, "the subscription keeps messages longer than the driver's bound")
		return
	}
	require.FailNow(t, "the driver bounds no subscription's backlog", "a subscription nobody reads would grow its broker without limit: the harness implements neither BoundedBacklog nor RetainedBacklog")
}

func testMaxPending(t *testing.T, f *fixture, h BoundedBacklog) {
	b, err := h.MakeBrokerWithMaxPending(f.ctx, t, boundedBacklogSize)
	require.NoError(t, err, "MakeBrokerWithMaxPending")
	t.Cleanup(func() { closeQuietly(t, b) })
	full := f.subscribe(b, "bounded", nil)
	sent := f.messages(boundedBacklogSize+3, "herald.test", "/bounded")
	for i, m := range sent {
		err := b.Send(f.ctx, m)
		if i < boundedBacklogSize {
			require.NoError(t, err, "Send %d of %d: the subscription has room", i+1, len(sent))
			continue
		}
		requireCode(t, herr.ResourceExhausted, err, "Send past the bound")
	}
	if !f.h.Features().SharedBacklogBound {
		other := f.subscribe(b, "room", nil)
		m := f.message("herald.test", "/bounded/other")
		requireCode(t, herr.ResourceExhausted, b.Send(f.ctx, m), "Send to a full subscription and one with room")
		f.receiveExactly(b, other, m)
	}
	f.receiveExactly(b, full, sent[:boundedBacklogSize]...)

	// Received and acked: there is room again.
	later := f.message("herald.test", "/bounded/later")
	require.NoError(t, b.Send(f.ctx, later), "Send once the backlog was consumed")
	f.receiveExactly(b, full, later)
}
