package leasestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

// expirySetup returns a store over a fresh memdocstore collection, its
// clock, a consumer id and a source of n events.
func expirySetup(t *testing.T, n int) (*leasestore.Store, *storetest.Clock, string, *storetest.ScriptedSource) {
	t.Helper()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	clock := storetest.NewClock()
	s := leasestore.New(coll, leasestore.Options{Now: clock.Now})
	_, err = s.CreateConsumer(t.Context(), leasestore.Consumer{ID: "c1", Type: leasestore.TypeDurableConsumer, Subscription: "sub-c1"})
	require.NoError(t, err)
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "e-%d", i+1)
	}
	return s, clock, "c1", storetest.NewScriptedSource(bodies...)
}

func pull(t *testing.T, s *leasestore.Store, consumer, worker string, limit int, vis time.Duration, src leasestore.Source) *leasestore.Lease {
	t.Helper()
	l, err := s.Pull(t.Context(), leasestore.PullParams{Consumer: consumer, Worker: worker, Limit: limit, Visibility: vis, Source: src})
	require.NoError(t, err)
	require.NotNil(t, l)
	return l
}

func TestExpireLeasesRequeuesOnlyExpiredLeases(t *testing.T) {
	t.Parallel()
	s, clock, c, src := expirySetup(t, 5)
	ctx := t.Context()
	short := pull(t, s, c, "w1", 2, 10*time.Second, src)
	long := pull(t, s, c, "w2", 3, 60*time.Second, src)

	// Nothing has expired yet: the sweep changes nothing.
	got, err := s.ExpireLeases(ctx, c)
	require.NoError(t, err)
	require.Equal(t, leasestore.Expired{}, got)

	clock.Advance(10 * time.Second) // short expires at its deadline; long is live
	got, err = s.ExpireLeases(ctx, c)
	require.NoError(t, err)
	require.Equal(t, leasestore.Expired{Leases: 1, Events: 2}, got)

	cons, err := s.GetConsumer(ctx, c)
	require.NoError(t, err)
	require.Equal(t, int64(5), cons.InFlight, "requeued events are still unacknowledged")
	require.Equal(t, int64(2), cons.Requeued, "the expired lease now waits for redelivery")

	// A second sweep finds nothing new.
	got, err = s.ExpireLeases(ctx, c)
	require.NoError(t, err)
	require.Equal(t, leasestore.Expired{}, got)

	// w2 still holds its live lease, unchanged.
	again := pull(t, s, c, "w2", 3, 60*time.Second, src)
	require.Equal(t, long.ID, again.ID)
	require.Equal(t, long.Generation, again.Generation)

	// The requeued lease goes to the next worker before new work, one
	// generation and attempt higher.
	re := pull(t, s, c, "w3", 5, 30*time.Second, src)
	require.Equal(t, short.ID, re.ID)
	require.Equal(t, short.Generation+1, re.Generation)
	require.Equal(t, short.Attempt+1, re.Attempt)
	require.Equal(t, short.Start, re.Start)
	cons, err = s.GetConsumer(ctx, c)
	require.NoError(t, err)
	require.Zero(t, cons.Requeued, "a reclaimed lease is held again")
	require.Equal(t, int64(5), cons.InFlight)
}

func TestExpireLeasesKeepsAcknowledgementRules(t *testing.T) {
	t.Parallel()
	s, clock, c, src := expirySetup(t, 3)
	ctx := t.Context()
	a := pull(t, s, c, "w1", 1, 5*time.Second, src)
	b := pull(t, s, c, "w2", 2, 5*time.Second, src)
	clock.Advance(6 * time.Second)
	got, err := s.ExpireLeases(ctx, c)
	require.NoError(t, err)
	require.Equal(t, leasestore.Expired{Leases: 2, Events: 3}, got)

	// Nobody has been given a since: ok for its generation still commits.
	res, err := s.Acknowledge(ctx, leasestore.AckParams{Consumer: c, LeaseID: a.ID, Generation: a.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeCommitted, res.Outcome)
	require.Equal(t, int64(1), res.Committed)

	// failed on a requeued lease reads requeued and changes nothing.
	res, err = s.Acknowledge(ctx, leasestore.AckParams{Consumer: c, LeaseID: b.ID, Generation: b.Generation, Status: leasestore.StatusFailed})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeRequeued, res.Outcome)

	cons, err := s.GetConsumer(ctx, c)
	require.NoError(t, err)
	require.Equal(t, int64(2), cons.InFlight)
	require.Equal(t, int64(2), cons.Requeued)

	// Once reclaimed, the old generation is stale.
	re := pull(t, s, c, "w3", 2, 5*time.Second, src)
	require.Equal(t, b.ID, re.ID)
	res, err = s.Acknowledge(ctx, leasestore.AckParams{Consumer: c, LeaseID: b.ID, Generation: b.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeStale, res.Outcome)
}

func TestExpireLeasesUnknownConsumer(t *testing.T) {
	t.Parallel()
	s, _, _, _ := expirySetup(t, 0)
	_, err := s.ExpireLeases(t.Context(), "nope")
	require.Error(t, err)
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
}

// TestExpireLeasesRacesWithAcknowledge runs the sweep from one Store while
// another Store acknowledges on the same collection: every lease ends
// committed exactly once and the cursor covers all of them.
func TestExpireLeasesRacesWithAcknowledge(t *testing.T) {
	t.Parallel()
	const n = 40
	s, clock, c, src := expirySetup(t, n)
	ctx := t.Context()
	leases := make([]*leasestore.Lease, n)
	for i := range leases {
		leases[i] = pull(t, s, c, fmt.Sprintf("w%d", i), 1, time.Second, src)
	}
	clock.Advance(2 * time.Second)

	done := make(chan error, 1)
	go func() {
		for range 10 {
			if _, err := s.ExpireLeases(context.WithoutCancel(ctx), c); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for _, l := range leases {
		res, err := s.Acknowledge(ctx, leasestore.AckParams{Consumer: c, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
		require.NoError(t, err)
		require.Equal(t, leasestore.OutcomeCommitted, res.Outcome)
	}
	require.NoError(t, <-done)
	cons, err := s.GetConsumer(ctx, c)
	require.NoError(t, err)
	require.Equal(t, int64(n), cons.Committed)
	require.Zero(t, cons.InFlight)
	require.Zero(t, cons.Requeued)
}
