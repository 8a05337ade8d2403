package leasestore_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

// TestBatcherGroups: refs added while a group is in flight go together in
// the next one; every ref is settled exactly once and Close reports it.
func TestBatcherGroups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	defer coll.Close()
	s := leasestore.New(coll, leasestore.Options{})
	_, err = s.CreateConsumer(ctx, leasestore.Consumer{ID: "q", Type: leasestore.TypeDurableQueue, Subscription: "sub"})
	require.NoError(t, err)
	require.NoError(t, s.Attach(ctx, "q", "s1", 60e9))
	src := storetest.NewScriptedSource()
	for i := range 200 {
		src.Add([]byte{byte(i)})
	}
	var ls []*leasestore.Lease
	for len(ls) < 200 {
		got, err := s.PullEvents(ctx, leasestore.PullParams{Consumer: "q", Worker: "s1", Limit: 100, Visibility: 60e9, Source: src})
		require.NoError(t, err)
		ls = append(ls, got...)
	}
	var groups, acked atomic.Int64
	b := s.NewBatcher("q", func(r leasestore.SettleResult, err error) {
		require.NoError(t, err)
		groups.Add(1)
		acked.Add(int64(r.Acked))
	})
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { b.Add(ctx, []leasestore.EventRef{{LeaseID: l.ID, Generation: l.Generation}}, nil) })
	}
	wg.Wait()
	require.NoError(t, b.Close(ctx))
	require.Equal(t, int64(200), acked.Load(), "every ref settled once")
	require.Less(t, groups.Load(), int64(200), "refs that arrive together go together")
	c, err := s.GetConsumer(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(200), c.Committed)
	require.Zero(t, c.InFlight)
}
