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

// TestPullRacingOwnAcknowledge: a worker pulls again while its own "ok"
// for the lease it holds is being committed. The pull read the lease as
// live, then the commit removed it and its payload. The pull must re-read
// and carry on (here: caught up), not fail with not-found as if the
// consumer were gone.
func TestPullRacingOwnAcknowledge(t *testing.T) {
	// Not parallel: the hook is package-wide (it filters on the consumer
	// id, so parallel tests elsewhere are unaffected).
	ctx := t.Context()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	clock := storetest.NewClock()
	s := leasestore.New(coll, leasestore.Options{Now: clock.Now})
	const consumer = "pull-race"
	_, err = s.CreateConsumer(ctx, leasestore.Consumer{ID: consumer, Type: leasestore.TypeDurableConsumer, Subscription: "sub"})
	require.NoError(t, err)
	src := storetest.NewScriptedSource([]byte("only"))
	params := leasestore.PullParams{Consumer: consumer, Worker: "w", Limit: 5, Visibility: time.Minute, Source: src}
	l, err := s.Pull(ctx, params)
	require.NoError(t, err)
	require.NotNil(t, l)

	var fired atomic.Bool
	restore := leasestore.SetTestHookPullRead(func(c string) {
		if c != consumer || !fired.CompareAndSwap(false, true) {
			return
		}
		r, err := s.Acknowledge(ctx, leasestore.AckParams{Consumer: consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
		require.NoError(t, err)
		require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	})
	defer restore()
	again, err := s.Pull(ctx, params)
	require.True(t, fired.Load())
	require.NoError(t, err, "a pull racing its own acknowledgement must not fail")
	require.Nil(t, again, "the only event is committed: caught up")
	c, err := s.GetConsumer(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Committed)
}
