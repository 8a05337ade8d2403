package leasestore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"
)

// listSource hands out its bodies in order and acks whatever is taken.
type listSource struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *listSource) Receive(_ context.Context, max int) ([]Incoming, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(max, len(s.bodies))
	out := make([]Incoming, n)
	for i := range out {
		out[i] = Incoming{Body: s.bodies[i]}
	}
	s.bodies = s.bodies[n:]
	return out, nil
}

func (s *listSource) Settle(_ context.Context, in []Incoming, taken int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range in[taken:] {
		s.bodies = append([][]byte{e.Body}, s.bodies...)
	}
	return nil
}

// TestConcurrentSettlementsShareOneWrite holds the first coalesced write
// until every other acknowledgement and settle has queued behind it, then
// checks that the queued ones were written together, in one more read and
// write, and that each call got the outcome a serial run gives it: its own
// lease committed, a repeated ack stale, and the cursor over them all.
func TestConcurrentSettlementsShareOneWrite(t *testing.T) {
	ctx := t.Context()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = coll.Close() })
	s := New(coll, Options{})
	_, err = s.CreateConsumer(ctx, Consumer{ID: "c", Type: TypeDurableConsumer, Subscription: "sub"})
	require.NoError(t, err)
	const n = 8
	src := &listSource{}
	for i := range n {
		src.bodies = append(src.bodies, fmt.Appendf(nil, "e%d", i))
	}
	var leases []*Lease
	for i := range n {
		l, err := s.Pull(ctx, PullParams{Consumer: "c", Worker: fmt.Sprint("w", i), Limit: 1, Visibility: time.Minute, Source: src})
		assert.NoError(t, err)
		leases = append(leases, l)
	}

	queued := func() int {
		s.settler.mu.Lock()
		defer s.settler.mu.Unlock()
		if q := s.settler.queues["c"]; q != nil {
			return len(q.waiting)
		}
		return 0
	}
	var reads atomic.Int32
	release := make(chan struct{})
	restore := SetTestHook(func(point, consumer string) {
		if point != hookSettleRead || consumer != "c" {
			return
		}
		if reads.Add(1) == 1 {
			<-release
		}
	})
	t.Cleanup(restore)

	// The first ack takes the writer and blocks in it.
	first := make(chan *AckResult, 1)
	go func() {
		r, err := s.Acknowledge(ctx, AckParams{Consumer: "c", LeaseID: leases[0].ID, Status: StatusOK})
		assert.NoError(t, err)
		first <- r
	}()
	require.Eventually(t, func() bool { return reads.Load() == 1 }, 10*time.Second, time.Millisecond)

	// The others queue behind it: acks of leases 1–6, a settle of lease 7
	// that acks it twice (the second is skipped), and a repeated ack of
	// lease 0, stale once the first is written.
	var wg sync.WaitGroup
	acks := make([]*AckResult, n)
	for i := 1; i < n-1; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Acknowledge(ctx, AckParams{Consumer: "c", LeaseID: leases[i].ID, Status: StatusOK})
			assert.NoError(t, err)
			acks[i] = r
		}()
	}
	var settled SettleResult
	wg.Add(2)
	go func() {
		defer wg.Done()
		ref := EventRef{LeaseID: leases[n-1].ID}
		r, err := s.Settle(ctx, "c", []EventRef{ref, ref}, nil)
		assert.NoError(t, err)
		settled = r
	}()
	var again *AckResult
	go func() {
		defer wg.Done()
		for queued() < n-1 {
			time.Sleep(time.Millisecond)
		}
		r, err := s.Acknowledge(ctx, AckParams{Consumer: "c", LeaseID: leases[0].ID, Status: StatusOK})
		assert.NoError(t, err)
		again = r
	}()
	require.Eventually(t, func() bool { return queued() == n }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()

	require.Equal(t, OutcomeCommitted, (<-first).Outcome)
	require.Equal(t, int32(2), reads.Load(), "the %d queued settlements were applied to one read", n)
	for i := 1; i < n-1; i++ {
		require.Equal(t, OutcomeCommitted, acks[i].Outcome, "ack %d", i)
	}
	require.Equal(t, SettleResult{Acked: 1, Skipped: 1, Committed: settled.Committed}, settled)
	require.Equal(t, OutcomeStale, again.Outcome)
	require.Equal(t, int64(n), again.Committed, "the last call in the batch sees every lease committed")
	c, err := s.GetConsumer(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(n), c.Committed)
	require.Zero(t, c.InFlight)
}

// TestSettlementLeavesQueueWhenItsContextEnds: a call whose context ends
// while it waits behind a write returns the context's error and is not
// applied afterwards.
func TestSettlementLeavesQueueWhenItsContextEnds(t *testing.T) {
	ctx := t.Context()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = coll.Close() })
	s := New(coll, Options{})
	_, err = s.CreateConsumer(ctx, Consumer{ID: "c", Type: TypeDurableConsumer, Subscription: "sub"})
	require.NoError(t, err)
	src := &listSource{bodies: [][]byte{[]byte("a"), []byte("b")}}
	l1, err := s.Pull(ctx, PullParams{Consumer: "c", Worker: "w1", Limit: 1, Visibility: time.Minute, Source: src})
	require.NoError(t, err)
	l2, err := s.Pull(ctx, PullParams{Consumer: "c", Worker: "w2", Limit: 1, Visibility: time.Minute, Source: src})
	require.NoError(t, err)

	var reads atomic.Int32
	release := make(chan struct{})
	t.Cleanup(SetTestHook(func(point, _ string) {
		if point == hookSettleRead && reads.Add(1) == 1 {
			<-release
		}
	}))
	done := make(chan error, 1)
	go func() {
		_, err := s.Acknowledge(ctx, AckParams{Consumer: "c", LeaseID: l1.ID, Status: StatusOK})
		done <- err
	}()
	require.Eventually(t, func() bool { return reads.Load() == 1 }, 10*time.Second, time.Millisecond)
	cctx, cancel := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() {
		_, err := s.Acknowledge(cctx, AckParams{Consumer: "c", LeaseID: l2.ID, Status: StatusOK})
		waiting <- err
	}()
	require.Eventually(t, func() bool {
		s.settler.mu.Lock()
		defer s.settler.mu.Unlock()
		q := s.settler.queues["c"]
		return q != nil && len(q.waiting) == 1
	}, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-waiting, context.Canceled)
	close(release)
	require.NoError(t, <-done)
	c, err := s.GetConsumer(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Committed, "the cancelled ack was not applied")
	require.Equal(t, int64(1), c.InFlight)
}
