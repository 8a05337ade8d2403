package leasestore

import (
	"context"
	"sync"
	"time"
)

// Settlements of one consumer that arrive at one Store while another is
// being written are coalesced: Acknowledge and Settle calls queue per
// consumer, and one writer applies every queued call, in arrival order, to
// one read of the consumer record and writes it once. Each call's outcome
// is the one it would have had alone at its place in that order, so
// concurrent callers see what a serial run would give them.
//
// Why: every settlement rewrites the consumer record, and concurrent
// settlements of one consumer (16 workers, 8 streams, in one process)
// otherwise race for it: each lost race is a billed, failed conditional
// write and a re-read, and the record's write rate is capped per key
// (DynamoDB about 1,000 write units a second, Firestore about one write a
// second per document). Coalescing turns k concurrent settlements into one
// write and no lost races among them. Stores in other processes still race
// as before, through the revision-conditional write.
//
// The writer runs in its own goroutine, bounded by settleTimeout; a caller
// whose context ends while it waits returns the context's error at once,
// and its settlement is dropped if the writer has not taken it yet (and
// otherwise may still apply, as with any write whose reply is lost).

// settleTimeout bounds one coalesced write, retries included.
const settleTimeout = 30 * time.Second

// settleOp is one queued Acknowledge or Settle.
type settleOp struct {
	// apply applies the call to d (read at nowMs) and reports whether it
	// changed d; it records the call's outcome in its closure, and adds
	// the payload ids it may have freed to freed. It is called again,
	// from scratch, on every retry.
	apply func(d *consumerDoc, freed *[]string) bool
	done  chan error // receives the call's error (nil on success), once
}

// settleQueue is the queue of one consumer.
type settleQueue struct {
	running bool
	waiting []*settleOp
}

// settler holds a Store's queues, by consumer id.
type settler struct {
	mu     sync.Mutex
	queues map[string]*settleQueue
}

// settle queues op on consumer, starts a writer if none runs, and waits for
// op's outcome or ctx's end.
func (s *Store) settle(ctx context.Context, consumer string, apply func(d *consumerDoc, freed *[]string) bool) error {
	op := &settleOp{apply: apply, done: make(chan error, 1)}
	st := &s.settler
	st.mu.Lock()
	if st.queues == nil {
		st.queues = map[string]*settleQueue{}
	}
	q := st.queues[consumer]
	if q == nil {
		q = &settleQueue{}
		st.queues[consumer] = q
	}
	q.waiting = append(q.waiting, op)
	if !q.running {
		q.running = true
		go s.runSettles(context.WithoutCancel(ctx), consumer, q)
	}
	st.mu.Unlock()

	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		st.mu.Lock()
		for i, w := range q.waiting {
			if w == op {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
		st.mu.Unlock()
		return ctx.Err()
	}
}

// runSettles writes q's queued calls, a batch per write, until the queue
// is empty.
func (s *Store) runSettles(ctx context.Context, consumer string, q *settleQueue) {
	st := &s.settler
	for {
		st.mu.Lock()
		batch := q.waiting
		q.waiting = nil
		if len(batch) == 0 {
			q.running = false
			delete(st.queues, consumer)
			st.mu.Unlock()
			return
		}
		st.mu.Unlock()
		err := s.writeSettles(ctx, consumer, batch)
		for _, op := range batch {
			op.done <- err
		}
	}
}

// writeSettles applies batch to one read of consumer's record and writes
// it once, retrying after lost races; then deletes the payloads the batch
// freed (best effort: an orphaned payload is unreachable and harmless).
func (s *Store) writeSettles(ctx context.Context, consumer string, batch []*settleOp) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	var freed []string
	err := s.retry(ctx, func() (bool, error) {
		freed = nil
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		runTestHook(hookSettleRead, consumer)
		d.pruneSessions(s.nowMs())
		changed := false
		for _, op := range batch {
			if op.apply(d, &freed) {
				changed = true
			}
		}
		if !changed {
			freed = nil
			return true, nil
		}
		freed = d.unreferenced(freed)
		return s.write(ctx, s.coll.Replace, d)
	})
	if err != nil {
		return err
	}
	s.deletePayloads(ctx, consumer, freed)
	return nil
}
