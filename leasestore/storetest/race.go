package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// racePoll is how long a caught-up racer or the cursor watcher waits
// before asking again, so that polling does not crowd out the real work on
// a slow emulator.
const racePoll = 10 * time.Millisecond

var raceCases = []conformanceCase{
	{"Race/ManyWorkersTwoClients", func(t *testing.T, h Harness) { testRace(t, h, false) }},
	{"Race/ManyWorkersWithExpiry", func(t *testing.T, h Harness) { testRace(t, h, true) }},
}

// raceLedger records every delivery the racing workers see and reports
// what breaks the rules.
type raceLedger struct {
	mu       sync.Mutex
	holder   map[[2]int64]string // (position, generation) → worker
	body     map[int64]string    // position → body
	position map[string]int64    // body → position
	aborted  int                 // pulls or acks that lost too many races
	stale    int                 // acknowledgements that came too late
	maxGen   int64               // highest generation seen

	// ops counts the racers' store calls; every raceTickOps of them one
	// is sent on tick (when set), for the clock ticker of the expiring
	// race.
	ops  atomic.Int64
	tick chan struct{}
}

// raceTickOps is how many of the racers' store calls pass between two
// moves of the expiring race's ticker: under a round of pulls and
// acknowledgements of the 8 workers. On memdocstore, the fastest backend,
// that expires leases about as often as the 5 ms wall-clock tick it
// replaces did (some 40 to 70 stale acknowledgements a run).
const raceTickOps = 6

// op counts one store call of a racer and wakes the ticker every
// raceTickOps calls. It never blocks: a tick the ticker has not taken yet
// stands for the ones after it.
func (r *raceLedger) op() {
	if r.ops.Add(1)%raceTickOps == 0 && r.tick != nil {
		select {
		case r.tick <- struct{}{}:
		default:
		}
	}
}

// see records that worker holds l; it returns an error if a position of
// l's generation is held by another worker, or if a position or body moved.
func (r *raceLedger) see(worker string, l *leasestore.Lease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxGen = max(r.maxGen, l.Generation)
	for i, e := range l.Events {
		pos := l.Start + int64(i)
		k := [2]int64{pos, l.Generation}
		if w, ok := r.holder[k]; ok && w != worker {
			return fmt.Errorf("position %d generation %d leased to both %q and %q", pos, l.Generation, w, worker)
		}
		r.holder[k] = worker
		if b, ok := r.body[pos]; ok && b != string(e) {
			return fmt.Errorf("position %d held %q, now %q", pos, b, e)
		}
		r.body[pos] = string(e)
		if p, ok := r.position[string(e)]; ok && p != pos {
			return fmt.Errorf("event %q at positions %d and %d", e, p, pos)
		}
		r.position[string(e)] = pos
	}
	return nil
}

// testRace runs 8 workers on two store clients until every event is
// committed. With expiring, every worker moves the clock past the
// visibility timeout every few rounds, and so does a ticker, so leases are
// reclaimed under the other workers' feet and some of their
// acknowledgements turn stale.
func testRace(t *testing.T, h Harness, expiring bool) {
	const (
		events  = 400
		workers = 8
	)
	b := setup(t, h, setupOptions{clients: 2})
	all := bodies("race", events)
	src := NewScriptedSource(all...)
	ledger := &raceLedger{holder: map[[2]int64]string{}, body: map[int64]string{}, position: map[string]int64{}}

	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	// A watcher checks that the cursor never moves backward while the
	// workers race.
	wg.Go(func() {
		var last int64
		for {
			select {
			case <-done:
				return
			default:
			}
			c, err := b.stores[1].GetConsumer(b.ctx, b.consumer)
			if err != nil {
				t.Errorf("watcher: %v", err)
				return
			}
			if c.Committed < last {
				t.Errorf("cursor moved backward: %d after %d", c.Committed, last)
				return
			}
			if c.InFlight > leasestore.MaxInFlight {
				t.Errorf("in flight %d exceeds the window", c.InFlight)
			}
			last = c.Committed
			time.Sleep(racePoll)
		}
	})

	if expiring {
		// Time also moves on its own, so a worker can find its lease
		// expired between any two steps of a pull. It moves by the
		// racers' store calls, not by wall time: a tick every few
		// milliseconds expired nearly every lease before its
		// acknowledgement on a backend of slow round trips (moto), where
		// the race then crawled for many minutes; counted in calls, the
		// pressure is the same on every backend.
		ledger.tick = make(chan struct{}, 1)
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-ledger.tick:
					b.clock.Advance(visibility)
				}
			}
		})
	}

	// The first racer to fail stops the others: they would otherwise wait
	// forever for a cursor that a stopped racer's lease holds back.
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	rb := *b
	rb.ctx = ctx
	var racers sync.WaitGroup
	for w := range workers {
		racers.Go(func() {
			err := raceWorker(&rb, b.stores[w%len(b.stores)], fmt.Sprintf("racer-%d", w), w, src, ledger, events, expiring)
			if err != nil && ctx.Err() == nil {
				t.Errorf("racer %d: %v", w, err)
				stop()
			}
		})
	}
	racers.Wait()
	close(done)
	wg.Wait()
	if t.Failed() {
		return
	}

	c := b.get(t)
	require.Equal(t, int64(events), c.Committed, "final cursor")
	require.Zero(t, c.InFlight)
	for p := int64(1); p <= events; p++ {
		require.Contains(t, ledger.body, p, "position %d was never leased", p)
	}
	require.Len(t, ledger.position, events, "every event was leased, at one position")
	sc := src.Counts()
	require.Equal(t, events, sc.Acked)
	require.Zero(t, sc.Outstanding)
	require.Zero(t, sc.Available)
	require.Zero(t, sc.BadSettles)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(b.consumer)), "payloads left after everything was committed")
	t.Logf("%d operations lost too many races and were retried; %d stale acknowledgements; highest generation %d",
		ledger.aborted, ledger.stale, ledger.maxGen)
}

// raceWorker pulls and acknowledges until the cursor reaches events. It
// fails the first delivery of every lease whose start is a multiple of 5,
// and sometimes pulls twice to check it gets the same lease back. With
// expiring, a lease may be reclaimed from it at any moment, so a stale
// outcome or a different lease on the second pull is allowed.
func raceWorker(b *bundle, s *leasestore.Store, worker string, seed int, src *ScriptedSource, ledger *raceLedger, events int64, expiring bool) error {
	var lastCommitted int64
	observe := func(c int64) error {
		if c < lastCommitted {
			return fmt.Errorf("acknowledge reported cursor %d after %d", c, lastCommitted)
		}
		lastCommitted = c
		return nil
	}
	for i := 0; ; i++ {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if expiring && i%7 == 6 {
			b.clock.Advance(visibility)
		}
		limit := 1 + (seed+i)%10
		l, err := b.tryPull(s, worker, limit, src)
		ledger.op()
		if herr.CodeOf(err) == herr.Aborted {
			ledger.mu.Lock()
			ledger.aborted++
			ledger.mu.Unlock()
			continue
		}
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		if l == nil {
			c, err := s.GetConsumer(b.ctx, b.consumer)
			ledger.op()
			if err != nil {
				return err
			}
			if err := observe(c.Committed); err != nil {
				return err
			}
			if c.Committed == events {
				return nil
			}
			time.Sleep(racePoll) // others hold leases; poll again
			continue
		}
		if len(l.Events) == 0 || len(l.Events) > limit && l.Generation == 0 {
			return fmt.Errorf("lease of %d events for limit %d", len(l.Events), limit)
		}
		if err := ledger.see(worker, l); err != nil {
			return err
		}
		held := []*leasestore.Lease{l}
		if i%3 == 0 {
			again, err := b.tryPull(s, worker, limit, src)
			ledger.op()
			if err != nil {
				return fmt.Errorf("pull again: %w", err)
			}
			same := again != nil && again.ID == l.ID && again.Generation == l.Generation
			if !same && !expiring {
				return fmt.Errorf("a second pull did not return the live lease %s", l.ID)
			}
			if !same && again != nil {
				// l expired meanwhile and this worker was given other work
				// (or l again, one generation on): settle that too.
				if err := ledger.see(worker, again); err != nil {
					return err
				}
				held = append(held, again)
			}
		}
		for _, h := range held {
			if err := raceAck(b, s, h, ledger, expiring, observe); err != nil {
				return err
			}
		}
	}
}

// raceAck acknowledges l: failed for the first delivery of a lease whose
// start is a multiple of 5, ok otherwise.
func raceAck(b *bundle, s *leasestore.Store, l *leasestore.Lease, ledger *raceLedger, expiring bool, observe func(int64) error) error {
	status := leasestore.StatusOK
	if l.Start%5 == 0 && l.Attempt == 1 {
		status = leasestore.StatusFailed
	}
	for {
		r, err := s.Acknowledge(b.ctx, leasestore.AckParams{
			Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: status,
		})
		ledger.op()
		if herr.CodeOf(err) == herr.Aborted {
			ledger.mu.Lock()
			ledger.aborted++
			ledger.mu.Unlock()
			continue
		}
		if err != nil {
			return fmt.Errorf("acknowledge: %w", err)
		}
		want := leasestore.OutcomeCommitted
		if status == leasestore.StatusFailed {
			want = leasestore.OutcomeRequeued
		}
		if r.Outcome == leasestore.OutcomeStale && expiring {
			ledger.mu.Lock()
			ledger.stale++
			ledger.mu.Unlock()
		} else if r.Outcome != want {
			return fmt.Errorf("acknowledge %s of a live lease: %s, want %s", status, r.Outcome, want)
		}
		return observe(r.Committed)
	}
}
