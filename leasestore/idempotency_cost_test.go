package leasestore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

// TestKeyedPublishCost measures, with DynamoDB's billing rules
// (storetest.Meter), what an idempotency key adds to a publish: the
// figures of docs/cost-model.md. A plan is what package delivery stores:
// 8 bytes of publish time and 16 per event id.
func TestKeyedPublishCost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, c := range []struct {
		events            int
		wantFirstUnits    int64 // claim + completion
		wantRepeatUnits   int64 // the failed conditional create
		wantRepeatReadsRU int64
	}{
		{events: 1, wantFirstUnits: 2, wantRepeatUnits: 1, wantRepeatReadsRU: 1},
		{events: 100, wantFirstUnits: 4, wantRepeatUnits: 2, wantRepeatReadsRU: 1},
		{events: 1000, wantFirstUnits: 32, wantRepeatUnits: 16, wantRepeatReadsRU: 4},
	} {
		inner, err := memdocstore.OpenCollection("key", nil)
		require.NoError(t, err)
		m := storetest.NewMeter()
		coll := m.Wrap(inner)
		s := leasestore.New(coll, leasestore.Options{})
		kp := leasestore.KeyedPublish{
			KeyRequest: leasestore.KeyRequest{
				Principal: "svc-orders", Key: "3f1c9a2e-0b7d-4c55-9a51-8d2f0c6e4b17",
				Fingerprint: make([]byte, 32), Plan: make([]byte, 8+16*c.events),
			},
			Publish: func(context.Context, []byte, bool) ([]byte, bool, error) { return nil, true, nil },
		}
		o, err := s.PublishOnce(ctx, kp)
		require.NoError(t, err)
		require.False(t, o.Replayed)
		first := m.Report()
		m.Reset()
		o, err = s.PublishOnce(ctx, kp)
		require.NoError(t, err)
		require.True(t, o.Replayed)
		repeat := m.Report()
		t.Logf("%4d events: first %d writes, %d WU, %d RU (%d bytes); repeat %d writes (%d failed), %d WU, %d RU",
			c.events, first.Writes, first.WriteUnits, first.ReadUnits, first.BytesStored, repeat.Writes, repeat.FailedWrites, repeat.WriteUnits, repeat.ReadUnits)
		require.Equal(t, int64(2), first.Writes)
		require.Zero(t, first.Reads, "a new key reads nothing")
		require.Equal(t, c.wantFirstUnits, first.WriteUnits)
		require.Equal(t, int64(1), repeat.FailedWrites)
		require.Equal(t, c.wantRepeatUnits, repeat.WriteUnits)
		require.Equal(t, int64(1), repeat.Reads)
		require.Equal(t, c.wantRepeatReadsRU, repeat.ReadUnits)
		require.NoError(t, coll.Close())
	}
}

// TestKeyedEachPublishCost measures a batch of 100 events each under its
// own key (PublishEach): the per-event row of docs/cost-model.md.
func TestKeyedEachPublishCost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const n = 100
	inner, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	m := storetest.NewMeter()
	coll := m.Wrap(inner)
	t.Cleanup(func() { _ = coll.Close() })
	s := leasestore.New(coll, leasestore.Options{})
	keys := make([]leasestore.KeyRequest, n)
	for i := range keys {
		keys[i] = leasestore.KeyRequest{
			Principal: "svc-orders", Key: fmt.Sprintf("3f1c9a2e-0b7d-4c55-9a51-8d2f0c6e%04d", i),
			Fingerprint: make([]byte, 32), Plan: make([]byte, 8+16),
		}
	}
	b := leasestore.KeyedEvents{Keys: keys, Publish: func(_ context.Context, claimed []int, _ [][]byte) ([][]byte, []bool, error) {
		published := make([]bool, len(claimed))
		for i := range published {
			published[i] = true
		}
		return nil, published, nil
	}}
	outs, err := s.PublishEach(ctx, b)
	require.NoError(t, err)
	require.True(t, outs[0].Claimed)
	first := m.Report()
	m.Reset()
	outs, err = s.PublishEach(ctx, b)
	require.NoError(t, err)
	require.True(t, outs[0].Replayed)
	repeat := m.Report()
	t.Logf("%d events, a key each: first %d writes, %d WU, %d RU; repeat %d writes (%d failed), %d WU, %d reads, %d RU",
		n, first.Writes, first.WriteUnits, first.ReadUnits, repeat.Writes, repeat.FailedWrites, repeat.WriteUnits, repeat.Reads, repeat.ReadUnits)
	require.Equal(t, int64(2*n), first.Writes, "a claim and a completion per event")
	require.Equal(t, int64(2*n), first.WriteUnits)
	require.Zero(t, first.Reads)
	require.Equal(t, int64(n), repeat.FailedWrites)
	require.Equal(t, int64(n), repeat.WriteUnits)
	require.Equal(t, int64(n), repeat.Reads)
	require.Equal(t, int64(n), repeat.ReadUnits)
}
