package leasestore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

// These tests race a pull deterministically through leasestore's test
// hook. They are not parallel with each other (the hook is package-wide);
// each hook filters on its own consumer id, so parallel tests elsewhere
// are unaffected.

const raceVisibility = time.Minute

// raceSetup returns a store over a fresh memdocstore collection, its clock
// and a consumer named id.
func raceSetup(t *testing.T, id string) (*leasestore.Store, *storetest.Clock) {
	t.Helper()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	clock := storetest.NewClock()
	s := leasestore.New(coll, leasestore.Options{Now: clock.Now})
	_, err = s.CreateConsumer(t.Context(), leasestore.Consumer{ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "sub"})
	require.NoError(t, err)
	return s, clock
}

// hookOnce makes f run once, at point, in a pull of consumer.
func hookOnce(t *testing.T, point, consumer string, f func()) *atomic.Bool {
	var fired atomic.Bool
	restore := leasestore.SetTestHook(func(p, c string) {
		if p == point && c == consumer && fired.CompareAndSwap(false, true) {
			f()
		}
	})
	t.Cleanup(restore)
	return &fired
}

func racePull(t *testing.T, s *leasestore.Store, consumer, worker string, src leasestore.Source) *leasestore.Lease {
	t.Helper()
	l, err := s.Pull(t.Context(), leasestore.PullParams{Consumer: consumer, Worker: worker, Limit: 5, Visibility: raceVisibility, Source: src})
	require.NoError(t, err)
	return l
}

func raceAck(t *testing.T, s *leasestore.Store, consumer string, l *leasestore.Lease) *leasestore.AckResult {
	t.Helper()
	r, err := s.Acknowledge(t.Context(), leasestore.AckParams{Consumer: consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	return r
}

// TestPullRacingOwnAcknowledge: a worker pulls again while its own "ok"
// for the lease it holds is being committed. The pull read the lease as
// live, then the commit removed it and its payload. The pull must re-read
// and carry on (here: caught up), not fail with not-found as if the
// consumer were gone.
func TestPullRacingOwnAcknowledge(t *testing.T) {
	const consumer = "race-own-ack"
	s, _ := raceSetup(t, consumer)
	src := storetest.NewScriptedSource([]byte("only"))
	l := racePull(t, s, consumer, "w", src)
	require.NotNil(t, l)

	fired := hookOnce(t, leasestore.HookPullRead, consumer, func() {
		require.Equal(t, leasestore.OutcomeCommitted, raceAck(t, s, consumer, l).Outcome)
	})
	again, err := s.Pull(t.Context(), leasestore.PullParams{Consumer: consumer, Worker: "w", Limit: 5, Visibility: raceVisibility, Source: src})
	require.True(t, fired.Load())
	require.NoError(t, err, "a pull racing its own acknowledgement must not fail")
	require.Nil(t, again, "the only event is committed: caught up")
	c, err := s.GetConsumer(t.Context(), consumer)
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Committed)
}

// TestReclaimOvertaken: a pull reclaims an expired lease and is then
// delayed past the new visibility timeout, while another worker reclaims
// the lease again and commits it (deleting its payload). The delayed pull
// must still hand out the events it took (its generation is merely stale
// now), never fail for a payload that vanished.
func TestReclaimOvertaken(t *testing.T) {
	const consumer = "race-reclaim"
	s, clock := raceSetup(t, consumer)
	src := storetest.NewScriptedSource([]byte("a"), []byte("b"))
	first := racePull(t, s, consumer, "w1", src)
	clock.Advance(raceVisibility)

	fired := hookOnce(t, leasestore.HookPullReclaimed, consumer, func() {
		clock.Advance(raceVisibility)
		other := racePull(t, s, consumer, "w3", src)
		require.Equal(t, first.ID, other.ID)
		require.Equal(t, int64(2), other.Generation)
		require.Equal(t, leasestore.OutcomeCommitted, raceAck(t, s, consumer, other).Outcome)
	})
	late, err := s.Pull(t.Context(), leasestore.PullParams{Consumer: consumer, Worker: "w2", Limit: 5, Visibility: raceVisibility, Source: src})
	require.True(t, fired.Load())
	require.NoError(t, err, "an overtaken reclaim must not fail")
	require.NotNil(t, late)
	require.Equal(t, first.ID, late.ID)
	require.Equal(t, int64(1), late.Generation)
	require.Equal(t, []string{"a", "b"}, []string{string(late.Events[0]), string(late.Events[1])})
	require.Equal(t, leasestore.OutcomeStale, raceAck(t, s, consumer, late).Outcome, "its generation was overtaken")
}
