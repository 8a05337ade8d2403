package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/internal/faults"
	"github.com/heraldevents/herald/leasestore/internal/headcfg"
)

// The record layout's own risks (leasestore's package doc): what each
// operation writes, a reservation that fails half-way, a head whose hints
// are behind its blocks, records a deleted consumer leaves, and records of
// the earlier layout.
var layoutCases = []conformanceCase{
	{"Layout/AckWritesOnlyItsBlock", testLayoutAckWrites},
	{"Layout/HeadOncePerPull", testLayoutHeadOncePerPull},
	{"Layout/ReservationFails", testLayoutReservationFails},
	{"Layout/StaleHintRepaired", testLayoutStaleHint},
	{"Layout/DeletedConsumerLeavesNothing", testLayoutDelete},
	{"Layout/EarlierLayoutRefused", testLayoutEarlier},
	{"Layout/UnpackedHeadRead", testLayoutUnpacked},
	{"Layout/LookupBounds", testLayoutLookup},
	{"Events/RejectDeadLettersAtOnce", testReject},
}

// testReject: Reject moves current leases to the dead-letter queue at
// once, in the no-loss order, and skips refs that are not current.
func testReject(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	require.NoError(t, b.store.Attach(b.ctx, q, "s", sessionTTL))
	ls := b.pullEvents(t, q, "s", 3, NewScriptedSource(bodies("p", 3)...))
	require.Len(t, ls, 3)
	_, err := b.store.Reject(b.ctx, q, refs(ls[0]), "BORED")
	requireCode(t, herr.InvalidArgument, err)
	stale := leasestore.EventRef{LeaseID: ls[2].ID, Generation: ls[2].Generation + 1}
	n, err := b.store.Reject(b.ctx, q, append(refs(ls[0], ls[1]), stale), leasestore.ReasonDeliveryLimit)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the stale ref is skipped")
	dls := b.deadLettersOf(t, q)
	require.Len(t, dls, 2)
	for _, d := range dls {
		require.Equal(t, int64(1), d.DeliveryCount)
	}
	require.Equal(t, 0, b.settle(t, q, refs(ls[0]), nil).Acked, "a rejected lease cannot be acknowledged")
	r := b.settle(t, q, refs(ls[2]), nil)
	require.Equal(t, 1, r.Acked)
	require.Equal(t, int64(3), r.Committed, "the cursor passes dead-lettered events")
}

// testLayoutLookup: LookupConsumer reads the head alone; its figures are
// bounds of GetConsumer's.
func testLayoutLookup(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{})
	src := NewScriptedSource(bodies("k", 6)...)
	l1 := b.pull(t, "w1", 3, src)
	b.pull(t, "w2", 3, src)
	b.ackGen(t, l1.ID, l1.Generation, leasestore.StatusFailed)

	m.Reset()
	got, err := b.store.LookupConsumer(b.ctx, b.consumer)
	require.NoError(t, err)
	require.Equal(t, int64(1), m.Report().Reads, "one read: the head")
	exact := b.get(t)
	require.Equal(t, exact.ID, got.ID)
	require.Equal(t, exact.Type, got.Type)
	require.Equal(t, exact.Subscription, got.Subscription)
	require.Equal(t, exact.Paused, got.Paused)
	require.GreaterOrEqual(t, got.InFlight, exact.InFlight)
	require.Equal(t, int64(3), exact.Requeued)
	require.GreaterOrEqual(t, got.Requeued, exact.Requeued, "a failed lease shows as (maybe) waiting")
	require.LessOrEqual(t, got.Committed, exact.Committed)
	_, err = b.store.LookupConsumer(b.ctx, b.consumer+"-none")
	requireCode(t, herr.NotFound, err)
}

func blockKeyPrefix(id string) string { return "l:" + id + ":" }

// writtenKinds returns, per key prefix ("c:", "l:", "p:"), how many writes
// m counted.
func writtenKinds(m *Meter) map[string]int64 {
	out := map[string]int64{}
	for _, k := range m.TopKeys(1 << 20) {
		out[k.Key[:strings.IndexByte(k.Key, ':')+1]] += k.Writes
	}
	return out
}

func testLayoutAckWrites(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{})
	src := NewScriptedSource(bodies("a", 6)...)
	first := b.pull(t, "w1", 3, src)
	second := b.pull(t, "w2", 3, src)

	m.Reset()
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, second, leasestore.StatusOK).Outcome)
	require.Equal(t, map[string]int64{"l:": 1, "p:": 1}, writtenKinds(m),
		"an acknowledgement writes its block (remembering it; the payload goes once the block is empty), never the head")
	require.Zero(t, m.Report().FailedWrites)

	m.Reset()
	require.Equal(t, int64(6), b.ack(t, first, leasestore.StatusOK).Committed, "the cursor is walked, not written")
	require.Zero(t, writtenKinds(m)["c:"])
}

func testLayoutHeadOncePerPull(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{})
	const pulls = 8
	src := NewScriptedSource(bodies("h", pulls*5)...)
	m.Reset()
	var wg sync.WaitGroup
	leases := make([]*leasestore.Lease, pulls)
	for i := range pulls {
		wg.Go(func() { leases[i] = b.pull(t, "w"+string(rune('a'+i)), 5, src) })
	}
	wg.Wait()
	kinds := writtenKinds(m)
	require.Equal(t, int64(pulls), kinds["p:"], "one payload per pull")
	require.Equal(t, int64(pulls), kinds["l:"], "one block per pull")
	require.LessOrEqual(t, kinds["c:"], int64(pulls), "at most one head write per pull; concurrent pulls of one Store share one")
	starts := map[int64]bool{}
	for _, l := range leases {
		require.Len(t, l.Events, 5)
		require.False(t, starts[l.Start], "positions handed out twice")
		starts[l.Start] = true
	}
	require.Equal(t, int64(pulls*5), b.get(t).InFlight)
}

func testLayoutReservationFails(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("r", 3)...)
	stop := injectFault(t, faults.Reserve, b.consumer)
	_, err := b.tryPull(b.store, "w", 3, src)
	requireCode(t, herr.Unavailable, err)
	requireAllBack(t, b, src, 3, 0)
	require.Zero(t, countRecords(t, b, blockKeyPrefix(b.consumer)), "no block without its head entry")
	stop()
	l := b.pull(t, "w", 3, src)
	requireLease(t, l, 1, bodies("r", 3)...)
}

func testLayoutStaleHint(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("s", 2)...)
	l := b.pull(t, "w1", 2, src)
	stop := injectFault(t, faults.HintLower, b.consumer)
	_, err := b.store.Acknowledge(b.ctx, leasestore.AckParams{
		Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusFailed,
	})
	requireCode(t, herr.Unavailable, err)
	stop()
	// The lease is requeued in its block, the head does not say so yet: a
	// pull may miss it, but nothing is lost, and the sweep repairs the head.
	_, err = b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)
	got := b.pull(t, "w2", 2, src)
	requireReclaimed(t, l, got, b.clock.Now().Add(visibility))

	// A repeated failed acknowledgement repairs it too.
	stop = injectFault(t, faults.HintLower, b.consumer)
	_, err = b.store.Acknowledge(b.ctx, leasestore.AckParams{
		Consumer: b.consumer, LeaseID: got.ID, Generation: got.Generation, Status: leasestore.StatusFailed,
	})
	requireCode(t, herr.Unavailable, err)
	stop()
	require.Equal(t, leasestore.OutcomeRequeued, b.ackGen(t, got.ID, got.Generation, leasestore.StatusFailed).Outcome)
	again := b.pull(t, "w3", 2, src)
	requireReclaimed(t, got, again, b.clock.Now().Add(visibility))
}

func testLayoutDelete(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("d", 9)...)
	b.pull(t, "w1", 3, src)
	done := b.pull(t, "w2", 3, src)
	b.pull(t, "w3", 3, src)
	b.ack(t, done, leasestore.StatusOK)
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	require.NoError(t, b.store.Attach(b.ctx, q, "s", sessionTTL))
	_, err := b.store.PullEvents(b.ctx, leasestore.PullParams{Consumer: q, Worker: "s", Limit: 5, Visibility: streamVisibility, Source: NewScriptedSource(bodies("e", 4)...)})
	require.NoError(t, err)

	for _, id := range []string{b.consumer, q} {
		_, err := b.store.DeleteConsumer(b.ctx, id)
		require.NoError(t, err)
		require.Zero(t, countRecords(t, b, blockKeyPrefix(id)), "blocks of a deleted consumer")
		require.Zero(t, countRecords(t, b, payloadKeyPrefix(id)), "payloads of a deleted consumer")
		require.Zero(t, countRecords(t, b, consumerKey(id)), "its head")
	}
	// The jobs meet nothing of it.
	_, err = b.store.ExpireLeases(b.ctx, b.consumer)
	requireCode(t, herr.NotFound, err)
	reaped, err := b.store.ReapIdle(b.ctx, 0, 0)
	require.NoError(t, err)
	for _, c := range reaped {
		require.NotEqual(t, q, c.ID)
	}
}

func testLayoutEarlier(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := b.consumer + "-old"
	// A consumer record as Herald stored it before the block layout: the
	// whole lease table in one record.
	old := map[string]any{
		"key": consumerKey(id), "kind": "consumer", "id": id, "type": leasestore.TypeDurableConsumer,
		"filters": "null", "subscription": "sub", "paused": false, "next": int64(4), "committed": int64(1),
		"leases": []byte{2, 1, 5, 'l', 'e', 'a', 's', 'e'}, "acked": []byte{1, 0}, "incarnation": "abc",
	}
	require.NoError(t, b.colls[0].Put(b.ctx, old))
	_, err := b.store.GetConsumer(b.ctx, id)
	requireCode(t, herr.FailedPrecondition, err)
	require.Contains(t, err.Error(), "delete it")
	_, err = b.store.Pull(b.ctx, leasestore.PullParams{Consumer: id, Worker: "w", Limit: 1, Visibility: visibility, Source: NewScriptedSource(bodies("o", 1)...)})
	requireCode(t, herr.FailedPrecondition, err)
	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	for _, c := range list {
		require.NotEqual(t, id, c.ID, "never listed as if it were readable")
	}
	_, err = b.store.DeleteConsumer(b.ctx, id)
	require.NoError(t, err)
	_, err = b.store.GetConsumer(b.ctx, id)
	requireCode(t, herr.NotFound, err)
}

// testLayoutUnpacked: a head as the block layout stored it before its
// descriptive fields were packed into one attribute (layout 2, each field
// an attribute of its own) reads as it did, works, and is stored packed
// at its next write.
func testLayoutUnpacked(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) {
		c.MessageTTL, c.MaxLength = time.Hour, 50
		c.Policies = leasestore.Policies{MaxDeliveryAttempts: 7}
	})
	require.NoError(t, b.store.Attach(b.ctx, q, "s", sessionTTL))
	src := NewScriptedSource(bodies("u", 3)...)
	ls := b.pullEvents(t, q, "s", 2, src)
	require.Len(t, ls, 2)
	want := b.getC(t, q)

	raw := map[string]any{"key": consumerKey(q)}
	require.NoError(t, b.colls[0].Get(b.ctx, raw))
	packed, ok := raw["cfg"].([]byte)
	require.True(t, ok, "the head keeps its description in cfg: %v", raw)
	var cfg headcfg.Config
	require.NoError(t, cfg.UnmarshalBinary(packed))
	delete(raw, "cfg")
	delete(raw, "DocstoreRevision")
	raw["layout"] = int64(2)
	for k, v := range map[string]any{"id": cfg.ID, "type": cfg.Type, "filters": cfg.Filters, "sub": cfg.Subscription,
		"paused": cfg.Paused, "created": cfg.CreatedAt, "ttl_ms": cfg.MessageTTL, "max_len": cfg.MaxLength,
		"max_tries": cfg.MaxAttempts, "inc": cfg.Incarnation} {
		raw[k] = v
	}
	require.NoError(t, b.colls[0].Put(b.ctx, raw))

	got := b.getC(t, q)
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created %v, read back %v", want.CreatedAt, got.CreatedAt)
	got.CreatedAt = want.CreatedAt
	require.Equal(t, want, got, "the unpacked head reads as the packed one did")
	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	listed := false
	for _, c := range list {
		if c.ID == q {
			listed = true
			require.Equal(t, want.Subscription, c.Subscription)
			require.Equal(t, want.MaxLength, c.MaxLength)
			require.Equal(t, want.Policies, c.Policies)
		}
	}
	require.True(t, listed, "an unpacked head is listed")
	require.Equal(t, 1, b.settle(t, q, refs(ls[0]), nil).Acked, "its leases are still its own")
	more := b.pullEvents(t, q, "s", 5, src)
	require.Len(t, more, 1, "its blocks are found through its incarnation")

	after := map[string]any{"key": consumerKey(q)}
	require.NoError(t, b.colls[0].Get(b.ctx, after))
	require.Contains(t, after, "cfg", "the next write packs it")
	require.NotContains(t, after, "type")
	require.NotContains(t, after, "inc")
	require.EqualValues(t, 3, after["layout"])
	require.Equal(t, 2, b.settle(t, q, refs(ls[1], more[0]), nil).Acked)
}
