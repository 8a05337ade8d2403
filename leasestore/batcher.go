package leasestore

import (
	"context"
	"sync"
)

// Batcher settles one stream's events in groups: refs handed to Add are
// queued, and one flusher settles everything queued since its last Settle
// in one call, so a stream that acknowledges event by event costs one
// block write per group instead of one per event (what DynamoDB and
// Firestore bill; docs/cost-model.md). Groups form by themselves: while a
// Settle is in flight, the refs that arrive wait for the next one, so a
// settle is never delayed more than one store round trip, and an idle
// stream's first ack is written at once.
//
// Add never blocks on the store. A group that fails is reported by Err and
// by Close (its refs stay unsettled and come back after their visibility,
// a duplicate at most). A Batcher is safe for concurrent use.
type Batcher struct {
	s        *Store
	consumer string
	// done, when set, is called after each group with its result.
	done func(SettleResult, error)

	mu      sync.Mutex
	acks    []EventRef
	nacks   []EventRef
	running bool
	idle    chan struct{} // closed when no flush runs
	err     error
}

// NewBatcher returns a Batcher over consumer. done, when not nil, is
// called after each group (from the flusher's goroutine) with the group's
// result.
func (s *Store) NewBatcher(consumer string, done func(SettleResult, error)) *Batcher {
	idle := make(chan struct{})
	close(idle)
	return &Batcher{s: s, consumer: consumer, done: done, idle: idle}
}

// Add queues acks and nacks for the next group (acks before nacks, as
// Settle). ctx bounds the store calls of the group it starts, if it
// starts one; the group runs detached from ctx's cancellation.
func (b *Batcher) Add(ctx context.Context, acks, nacks []EventRef) {
	if len(acks)+len(nacks) == 0 {
		return
	}
	b.mu.Lock()
	b.acks = append(b.acks, acks...)
	b.nacks = append(b.nacks, nacks...)
	start := !b.running
	if start {
		b.running = true
		b.idle = make(chan struct{})
	}
	b.mu.Unlock()
	if start {
		go b.flush(context.WithoutCancel(ctx))
	}
}

func (b *Batcher) flush(ctx context.Context) {
	for {
		b.mu.Lock()
		acks, nacks := b.acks, b.nacks
		b.acks, b.nacks = nil, nil
		if len(acks)+len(nacks) == 0 {
			b.running = false
			close(b.idle)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, custodyTimeout)
		res, err := b.s.Settle(wctx, b.consumer, acks, nacks)
		cancel()
		if err != nil {
			b.mu.Lock()
			if b.err == nil {
				b.err = err
			}
			b.mu.Unlock()
		}
		if b.done != nil {
			b.done(res, err)
		}
	}
}

// Wait returns when every ref added so far is settled (or failed), or
// when ctx ends.
func (b *Batcher) Wait(ctx context.Context) error {
	b.mu.Lock()
	idle := b.idle
	b.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Err returns the first error of a group, or nil.
func (b *Batcher) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Close waits for the queued refs to be settled (see Wait) and returns the
// first error of any group.
func (b *Batcher) Close(ctx context.Context) error {
	if err := b.Wait(ctx); err != nil {
		return err
	}
	return b.Err()
}
