package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// The notifications API (ConsumeDurableEventsWithAcks): "a nacked message is requeued
// and redelivered immediately, possibly on the same stream". A stream's
// pull waits at the broker for up to StreamConfig.PollWait when nothing is
// there, and a nack that lands during that wait must not sit out the rest
// of it. Cancelling the broker call would be the obvious interrupt, but a
// cancelled long poll may already hold messages (SQS, Pub/Sub, NATS) that
// would then stay invisible until their ack deadline. So a waiting
// receive runs in its own goroutine: a nack nudges the pull, which returns
// at once with nothing new (the next pull finds the requeued event first),
// and the receive goes on; what it brings is kept for the stream's next
// pull, or handed back to the broker when the stream closes.

// inflight is one broker receive running in its own goroutine; done is
// closed once res is set.
type inflight struct {
	done chan struct{}
	msgs []*pubsubx.Message
	err  error
}

// asyncReceiver is the interruptible broker wait of one Stream's source.
// Next's goroutine calls begin and receive; Close releases, possibly while
// a Next is still returning; Settle calls nacked.
//
// Why a sequence number and not a flag: a nack is "seen" by a pull only if
// its store write finished before the pull read the queue's record. Next
// calls begin before each pull; a receive returns at once if any nack
// finished since (its write may have come after the read), and otherwise
// waits for the broker or for the next nack.
type asyncReceiver struct {
	life context.Context // the stream's: ends every receive when it closes

	mu      sync.Mutex
	seq     int64              // nacks finished so far
	nackCh  chan struct{}      // closed (and replaced) by every nack
	since   int64              // seq when the current pull began
	pending *inflight          // the receive in flight, nil when none
	spare   []*pubsubx.Message // received, not yet handed to a pull
	closed  bool               // released: receive no more
}

func newAsyncReceiver(life context.Context) *asyncReceiver {
	return &asyncReceiver{life: life, nackCh: make(chan struct{})}
}

// begin marks the start of a pull (before it reads the queue's record).
func (a *asyncReceiver) begin() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.since = a.seq
	a.mu.Unlock()
}

// nacked records that a nack's store write has finished: a receive that
// is waiting returns at once with nothing, so the pull that called it
// ends and the next one finds the requeued event.
func (a *asyncReceiver) nacked() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.seq++
	close(a.nackCh)
	a.nackCh = make(chan struct{})
	a.mu.Unlock()
}

// receive returns up to max messages: first those kept from an earlier
// receive, else the result of the receive in flight or of a new one that
// waits up to wait. It returns (nil, nil) when nudged, and ctx's error
// when ctx ends first; in both cases the receive in flight goes on.
func (a *asyncReceiver) receive(ctx context.Context, b *pubsubx.Broker, sub string, max int, wait time.Duration) ([]*pubsubx.Message, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, herr.New(herr.Canceled, "the stream is closed")
	}
	if len(a.spare) > 0 {
		defer a.mu.Unlock()
		return a.take(max), nil
	}
	if a.seq != a.since {
		// A nack finished after this pull began, maybe after it read the
		// record: end the pull so that the next one looks again.
		a.mu.Unlock()
		return nil, nil
	}
	nack := a.nackCh
	if a.pending == nil {
		if wait <= 0 {
			a.mu.Unlock()
			return b.Receive(ctx, sub, pubsubx.ReceiveParams{Max: max, Wait: 0})
		}
		f := &inflight{done: make(chan struct{})}
		go func() {
			f.msgs, f.err = b.Receive(a.life, sub, pubsubx.ReceiveParams{Max: max, Wait: wait})
			close(f.done)
		}()
		a.pending = f
	}
	f := a.pending
	a.mu.Unlock()
	if wait <= 0 {
		// The caller will not wait (a nack has just requeued an event):
		// take what the receive in flight has brought, if it is done.
		select {
		case <-f.done:
		default:
			return nil, nil
		}
	}
	select {
	case <-f.done:
		a.mu.Lock()
		defer a.mu.Unlock()
		if err := a.collect(f); err != nil {
			return nil, err
		}
		return a.take(max), nil
	case <-nack:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// collect moves a finished receive's messages to spare, once, and returns
// its error. a.mu is held.
func (a *asyncReceiver) collect(f *inflight) error {
	if a.pending != f {
		return nil // collected already
	}
	a.pending = nil
	a.spare = append(a.spare, f.msgs...)
	return f.err
}

// take returns up to max of the kept messages. a.mu is held.
func (a *asyncReceiver) take(max int) []*pubsubx.Message {
	n := min(max, len(a.spare))
	out := a.spare[:n:n]
	a.spare = a.spare[n:]
	return out
}

// release stops receiving, waits for the receive in flight (the stream's
// life has ended, so it returns soon) and hands every message the stream
// did not take back to the broker, available again at once.
func (a *asyncReceiver) release(ctx context.Context, b *pubsubx.Broker, sub string) error {
	a.mu.Lock()
	a.closed = true
	f := a.pending
	a.mu.Unlock()
	if f != nil {
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		a.mu.Lock()
		_ = a.collect(f) // a receive cut short by the closing stream
		a.mu.Unlock()
	}
	a.mu.Lock()
	msgs := a.spare
	a.spare = nil
	a.mu.Unlock()
	if len(msgs) == 0 {
		return nil
	}
	return b.Nack(ctx, sub, msgs)
}
