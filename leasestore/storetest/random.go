package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var randomCases = []conformanceCase{
	{"Random/SessionsUntilSettled", testRandomSessions},
}

// testRandomSessions runs stream sessions on two store clients that ack,
// nack, leave unsettled, detach, get evicted and let their TTL lapse at
// random, until the cursor has passed every event. Every event must end
// either committed (a Settle reported acking it) or dead-lettered for its
// delivery limit, never both, never neither.
func testRandomSessions(t *testing.T, h Harness) {
	const (
		events  = 60
		workers = 4
		limit   = 3
	)
	b := setup(t, h, setupOptions{clients: 2, opts: leasestore.Options{DeliveryLimit: limit}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("rnd", events)...)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	var (
		mu        sync.Mutex
		committed = map[string]int{}
		stats     = map[string]int{}
	)
	count := func(what string) {
		mu.Lock()
		stats[what]++
		mu.Unlock()
	}
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	var wg sync.WaitGroup
	fail := func(err error) {
		if ctx.Err() == nil {
			t.Errorf("%v", err)
			stop()
		}
	}
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		s := b.stores[w%len(b.stores)]
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				session := fmt.Sprintf("w%d-%d", w, n)
				if err := untilDone(func() error { return s.Attach(ctx, q, session, sessionTTL) }); err != nil {
					fail(fmt.Errorf("attach: %w", err))
					return
				}
				if err := randomSession(ctx, b, s, q, session, rng, src, &mu, committed, count); err != nil {
					fail(err)
					return
				}
				var err error
				switch p := rng.IntN(10); {
				case p < 7:
					count("detach")
					err = untilDone(func() error { return s.Detach(ctx, q, session) })
				case p < 9:
					count("evict")
					err = untilDone(func() error {
						_, err := s.EvictSessions(ctx, q, session)
						return err
					})
				default:
					count("lapse")
					b.clock.Advance(sessionTTL) // every other session lapses too
				}
				if err != nil {
					fail(fmt.Errorf("end session: %w", err))
					return
				}
			}
		})
	}
	// Watch until the cursor has passed every event.
	for ctx.Err() == nil {
		c, err := b.stores[1].GetConsumer(ctx, q)
		if err != nil {
			fail(err)
			break
		}
		if c.Committed == events && c.InFlight == 0 {
			break
		}
		time.Sleep(racePoll)
	}
	stop()
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("actions: %v", stats)

	dead := map[string]int{}
	for _, d := range b.deadLettersOf(t, q) {
		dead[string(d.Body)]++
		require.Equal(t, leasestore.ReasonDeliveryLimit, d.Reason)
		require.Equal(t, int64(limit), d.DeliveryCount, "dead-lettered after exactly the limit")
	}
	for _, body := range asStrings(bodies("rnd", events)) {
		require.Equal(t, 1, committed[body]+dead[body], "%s: committed %d times, dead-lettered %d times", body, committed[body], dead[body])
	}
	c := b.getC(t, q)
	require.Equal(t, int64(events), c.Committed)
	require.Zero(t, c.InFlight)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)), "payloads left after everything settled")
	sc := src.Counts()
	require.Equal(t, events, sc.Acked)
	require.Zero(t, sc.Outstanding)
	require.Zero(t, sc.BadSettles)
}

// randomSession pulls and settles for one attached session until it is
// cancelled or has done a few rounds.
func randomSession(ctx context.Context, b *bundle, s *leasestore.Store, q, session string, rng *rand.Rand,
	src *ScriptedSource, mu *sync.Mutex, committed map[string]int, count func(string)) error {
	for range 1 + rng.IntN(4) {
		var ls []*leasestore.Lease
		err := untilDone(func() error {
			var err error
			ls, err = s.PullEvents(ctx, leasestore.PullParams{
				Consumer: q, Worker: session, Limit: 1 + rng.IntN(4), Visibility: streamVisibility, Source: src,
			})
			return err
		})
		switch {
		case herr.CodeOf(err) == herr.FailedPrecondition:
			count("cancelled")
			return nil // this session was evicted or lapsed: start another
		case err != nil:
			return fmt.Errorf("pull: %w", err)
		case len(ls) == 0:
			time.Sleep(racePoll) // others hold what is left
			continue
		}
		for _, l := range ls {
			if len(l.Events) != 1 {
				return fmt.Errorf("lease of %d events", len(l.Events))
			}
			var acks, nacks []leasestore.EventRef
			switch p := rng.IntN(10); {
			case p < 4:
				acks = refs(l)
			case p < 7:
				nacks = refs(l)
			default:
				count("left")
				continue
			}
			var r leasestore.SettleResult
			if err := untilDone(func() error {
				var err error
				r, err = s.Settle(ctx, q, acks, nacks)
				return err
			}); err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			if r.Acked+r.Nacked+r.Skipped != 1 {
				return fmt.Errorf("settling one ref: %+v", r)
			}
			if r.Acked == 1 {
				mu.Lock()
				committed[string(l.Events[0])]++
				mu.Unlock()
			}
			count(fmt.Sprintf("acked %d nacked %d skipped %d", r.Acked, r.Nacked, r.Skipped))
		}
	}
	return nil
}

// untilDone runs f again while it fails with herr.Aborted (too many lost
// races), and returns its final error.
func untilDone(f func() error) error {
	for {
		err := f()
		if herr.CodeOf(err) != herr.Aborted {
			return err
		}
	}
}
