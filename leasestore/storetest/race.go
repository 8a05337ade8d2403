package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var raceCases = []conformanceCase{
	{"Race/ManyWorkersTwoClients", testRace},
}

// raceLedger records every delivery the racing workers see and reports
// what breaks the rules.
type raceLedger struct {
	mu       sync.Mutex
	holder   map[[2]int64]string // (position, generation) → worker
	body     map[int64]string    // position → body
	position map[string]int64    // body → position
	aborted  int                 // pulls or acks that lost too many races
}

// see records that worker holds l; it returns an error if a position of
// l's generation is held by another worker, or if a position or body moved.
func (r *raceLedger) see(worker string, l *leasestore.Lease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
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

func testRace(t *testing.T, h Harness) {
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
			time.Sleep(time.Millisecond)
		}
	})

	var racers sync.WaitGroup
	for w := range workers {
		racers.Go(func() {
			if err := raceWorker(b, b.stores[w%len(b.stores)], fmt.Sprintf("racer-%d", w), w, src, ledger, events); err != nil {
				t.Errorf("racer %d: %v", w, err)
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
	t.Logf("%d operations lost too many races and were retried", ledger.aborted)
}

// raceWorker pulls and acknowledges until the cursor reaches events. It
// fails the first delivery of every lease whose start is a multiple of 5,
// and sometimes pulls twice to check it gets the same lease back.
func raceWorker(b *bundle, s *leasestore.Store, worker string, seed int, src *ScriptedSource, ledger *raceLedger, events int64) error {
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
		limit := 1 + (seed+i)%10
		l, err := b.tryPull(s, worker, limit, src)
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
			if err != nil {
				return err
			}
			if err := observe(c.Committed); err != nil {
				return err
			}
			if c.Committed == events {
				return nil
			}
			time.Sleep(time.Millisecond) // others hold leases; poll again
			continue
		}
		if len(l.Events) == 0 || len(l.Events) > limit && l.Generation == 0 {
			return fmt.Errorf("lease of %d events for limit %d", len(l.Events), limit)
		}
		if err := ledger.see(worker, l); err != nil {
			return err
		}
		if i%3 == 0 {
			again, err := b.tryPull(s, worker, limit, src)
			if err != nil {
				return fmt.Errorf("pull again: %w", err)
			}
			if again == nil || again.ID != l.ID || again.Generation != l.Generation {
				return fmt.Errorf("a second pull did not return the live lease %s", l.ID)
			}
		}
		status := leasestore.StatusOK
		if l.Start%5 == 0 && l.Attempt == 1 {
			status = leasestore.StatusFailed
		}
		for {
			r, err := s.Acknowledge(b.ctx, leasestore.AckParams{
				Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: status,
			})
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
			if r.Outcome != want {
				return fmt.Errorf("acknowledge %s of a live lease: %s, want %s", status, r.Outcome, want)
			}
			if err := observe(r.Committed); err != nil {
				return err
			}
			break
		}
	}
}
