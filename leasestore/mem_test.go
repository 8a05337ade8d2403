package leasestore_test

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

// memHarness runs the suite on memdocstore. memdocstore lives in the
// process, so n clients of one collection are the same *Collection n times:
// racing Stores still meet only at its revision-conditional writes.
type memHarness struct{}

func (memHarness) MakeCollections(_ context.Context, _ testing.TB, n int) ([]*docstore.Collection, error) {
	coll, err := memdocstore.OpenCollection("key", nil)
	if err != nil {
		return nil, err
	}
	out := make([]*docstore.Collection, n)
	for i := range out {
		out[i] = coll
	}
	return out, nil
}

func newMemHarness(context.Context, testing.TB) (storetest.Harness, error) {
	return memHarness{}, nil
}

func TestMemConformance(t *testing.T) {
	storetest.RunConformanceTests(t, newMemHarness)
}

func BenchmarkMem(b *testing.B) {
	storetest.RunBenchmarks(b, newMemHarness)
}

// TestMemURLSurvivesRestart opens the store by URL with a filename, closes
// it (which saves the file) and reopens it, as `make run` does across
// restarts: consumers, leases, payloads, cursors and positions all come
// back, and conditional writes still work on the reloaded revisions.
func TestMemURLSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "leases.gob")
	u := "mem://" + "leasestore-" + uuid.NewString() + "/key?filename=" + url.QueryEscape(file)
	clock := storetest.NewClock()
	open := func() (*docstore.Collection, *leasestore.Store) {
		t.Helper()
		coll, err := docstore.OpenCollection(ctx, u)
		require.NoError(t, err)
		return coll, leasestore.New(coll, leasestore.Options{Now: clock.Now})
	}
	src := storetest.NewScriptedSource([]byte("e1"), []byte("e2"), []byte("e3"), []byte("e4"), []byte("e5"))
	pull := func(s *leasestore.Store, worker string, limit int) *leasestore.Lease {
		t.Helper()
		l, err := s.Pull(ctx, leasestore.PullParams{Consumer: "c", Worker: worker, Limit: limit, Visibility: time.Minute, Source: src})
		require.NoError(t, err)
		require.NotNil(t, l)
		return l
	}
	ack := func(s *leasestore.Store, l *leasestore.Lease) *leasestore.AckResult {
		t.Helper()
		r, err := s.Acknowledge(ctx, leasestore.AckParams{Consumer: "c", LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
		require.NoError(t, err)
		return r
	}

	coll, s := open()
	_, err := s.CreateConsumer(ctx, leasestore.Consumer{ID: "c", Type: leasestore.TypeDurableConsumer, Subscription: "sub-c"})
	require.NoError(t, err)
	held := pull(s, "w1", 2) // 1–2, stays in flight
	done := pull(s, "w2", 1) // 3
	require.Equal(t, leasestore.OutcomeCommitted, ack(s, done).Outcome)
	require.NoError(t, coll.Close())

	coll, s = open()
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	c, err := s.GetConsumer(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, "sub-c", c.Subscription)
	require.Equal(t, int64(2), c.InFlight)
	require.Zero(t, c.Committed)

	again := pull(s, "w1", 2)
	require.Equal(t, held.ID, again.ID, "the worker's live lease survived the restart")
	require.Equal(t, held.Generation, again.Generation)
	require.Equal(t, []string{"e1", "e2"}, []string{string(again.Events[0]), string(again.Events[1])}, "its payload too")

	next := pull(s, "w3", 5)
	require.Equal(t, int64(4), next.Start, "positions continue where they stopped")
	require.Equal(t, leasestore.OutcomeCommitted, ack(s, again).Outcome)
	r := ack(s, next)
	require.Equal(t, int64(5), r.Committed, "acked ranges survived: the cursor passes 3 and 4–5")
}

// BenchmarkMemCost reports what the store's hot paths would cost on
// DynamoDB and Firestore (storetest.RunCostBenchmarks), run on memdocstore
// with a simulated millisecond round trip per call so that racing workers
// conflict as they would over a network. `make bench-cost` runs it.
func BenchmarkMemCost(b *testing.B) {
	storetest.RunCostBenchmarks(b, newMemHarness, storetest.CostOptions{Latency: time.Millisecond})
}
