package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var eventCases = []conformanceCase{
	{"Events/QueueConsumers", testEventsQueueConsumers},
	{"Events/SetFilters", testEventsSetFilters},
	{"Events/SingleEventLeasesSharePayload", testEventsSingleEventLeases},
	{"Events/SettleAcksFirstAndSkips", testEventsSettle},
	{"Events/NackRedeliveredFirst", testEventsNackFirst},
	{"Events/PayloadGoesWithLastEvent", testEventsPayloadLifetime},
	{"Events/DeliveryCountEveryPath", testEventsDeliveryCount},
	{"Events/SessionKeepsItsLeases", testEventsSessionKeeps},
	{"Events/Paused", testEventsPaused},
}

func testEventsQueueConsumers(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	groups := filter.Groups{{EventType: "a.b"}}
	dq := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) {
		c.Filters, c.MessageTTL, c.MaxLength = groups, 90*time.Second, 50
	})
	nd := b.newQueue(t, leasestore.TypeNonDurableQueue, nil)
	c := b.getC(t, dq)
	require.Equal(t, leasestore.TypeDurableQueue, c.Type)
	require.True(t, groups.Equal(c.Filters), "filters %+v, want %+v", c.Filters, groups)
	require.Equal(t, 90*time.Second, c.MessageTTL)
	require.Equal(t, 50, c.MaxLength)
	require.True(t, c.CreatedAt.Equal(b.clock.Now()))
	c = b.getC(t, nd)
	require.Equal(t, leasestore.TypeNonDurableQueue, c.Type)
	require.Zero(t, c.MessageTTL)
	require.Zero(t, c.MaxLength)

	// One namespace for every type.
	_, err := b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: dq, Type: leasestore.TypeNonDurableQueue, Subscription: "x"})
	requireCode(t, herr.AlreadyExists, err)
	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 3, "the durable consumer and both queues")

	for _, bad := range []leasestore.Consumer{
		{MessageTTL: -time.Second},
		{MaxLength: -1},
		{MaxLength: leasestore.MaxInFlight + 1},
	} {
		bad.ID, bad.Type, bad.Subscription = "storetest-bad-"+uuid.NewString(), leasestore.TypeDurableQueue, "s"
		_, err := b.store.CreateConsumer(b.ctx, bad)
		requireCode(t, herr.InvalidArgument, err)
	}
}

func testEventsSetFilters(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) {
		c.Filters = filter.Groups{{EventType: "old.type"}}
	})
	next := filter.Groups{{EventType: "new.type", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithGreedy, ResourceID: "/x/"}}}}
	c, err := b.store.SetFilters(b.ctx, q, next)
	require.NoError(t, err)
	require.True(t, next.Equal(c.Filters), "filters %+v, want %+v", c.Filters, next)
	require.True(t, next.Equal(b.getC(t, q).Filters))
	c, err = b.store.SetFilters(b.ctx, q, nil)
	require.NoError(t, err)
	require.Empty(t, c.Filters)
	_, err = b.store.SetFilters(b.ctx, "storetest-missing-"+uuid.NewString(), next)
	requireCode(t, herr.NotFound, err)
}

func testEventsSingleEventLeases(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	all := bodies("s", 5)
	src := NewScriptedSource(all...)
	b.attach(t, q, "s1")
	got := b.pullEvents(t, q, "s1", 3, src)
	require.Equal(t, []int64{1, 2, 3}, starts(got))
	require.Equal(t, asStrings(all[:3]), eventBodies(got))
	ids := map[string]bool{}
	for _, l := range got {
		ids[l.ID] = true
		require.Zero(t, l.Generation)
		require.Equal(t, int64(1), l.Attempt, "a first delivery")
		require.True(t, l.ExpiresAt.Equal(b.clock.Now().Add(streamVisibility)))
	}
	require.Len(t, ids, 3, "one lease id per event")
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(q)), "events received together share one payload record")
	require.Equal(t, Counts{Acked: 3, Receives: 1, Available: 2}, src.Counts())

	more := b.pullEvents(t, q, "s1", 3, src)
	require.Equal(t, []int64{4, 5}, starts(more), "a session that pulls again gets more, not its unsettled events")
	require.Equal(t, 2, countRecords(t, b, payloadKeyPrefix(q)))
	none := b.pullEvents(t, q, "s1", 3, src)
	require.Empty(t, none, "caught up")
	c := b.getC(t, q)
	require.Equal(t, int64(5), c.InFlight)
	require.Zero(t, c.Committed)
	requireSourceSane(t, src)
}

func testEventsSettle(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("t", 6)...)
	b.attach(t, q, "s1")
	ls := b.pullEvents(t, q, "s1", 4, src)
	l1, l2, l3, l4 := ls[0], ls[1], ls[2], ls[3]

	r := b.settle(t, q,
		[]leasestore.EventRef{ref(l1), ref(l2), ref(l1)},
		[]leasestore.EventRef{ref(l2), ref(l3), {LeaseID: uuid.NewString()}, {LeaseID: l4.ID, Generation: 7}},
	)
	require.Equal(t, leasestore.SettleResult{
		Acked: 2, Nacked: 1,
		// l1 twice, l2 in both (acks first), an unknown lease, a wrong generation.
		Skipped:   4,
		Committed: 2,
	}, r)
	c := b.getC(t, q)
	require.Equal(t, int64(2), c.Committed)
	require.Equal(t, int64(2), c.InFlight)
	require.Equal(t, int64(1), c.Requeued)

	// A nack of an event already requeued is skipped, and nothing is written.
	require.Equal(t, leasestore.SettleResult{Skipped: 1, Committed: 2}, b.settle(t, q, nil, refs(l3)))
	require.Equal(t, leasestore.SettleResult{Committed: 2}, b.settle(t, q, nil, nil))

	// The cursor waits for l3.
	require.Equal(t, leasestore.SettleResult{Acked: 1, Committed: 2}, b.settle(t, q, refs(l4), nil))
	again := b.pullEvents(t, q, "s1", 1, src)
	require.Equal(t, l3.ID, again[0].ID)
	require.Equal(t, leasestore.SettleResult{Skipped: 1, Committed: 2}, b.settle(t, q, refs(l3), nil), "the nacked generation is stale once redelivered")
	require.Equal(t, leasestore.SettleResult{Acked: 1, Committed: 4}, b.settle(t, q, refs(again...), nil))
}

func testEventsNackFirst(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	all := bodies("n", 4)
	src := NewScriptedSource(all...)
	b.attach(t, q, "s1")
	b.attach(t, q, "s2")
	ls := b.pullEvents(t, q, "s1", 2, src)
	b.settle(t, q, nil, refs(ls[1]))

	// Requeued for immediate redelivery, ahead of new work, possibly to
	// another session.
	got := b.pullEvents(t, q, "s2", 2, src)
	require.Equal(t, []int64{2, 3}, starts(got))
	require.Equal(t, ls[1].ID, got[0].ID)
	require.Equal(t, ls[1].Generation+1, got[0].Generation)
	require.Equal(t, int64(2), got[0].Attempt)
	require.Equal(t, int64(1), got[1].Attempt)
	requireSourceSane(t, src)
}

func testEventsPayloadLifetime(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("p", 3)...)
	b.attach(t, q, "s1")
	ls := b.pullEvents(t, q, "s1", 3, src)
	b.settle(t, q, refs(ls[0], ls[2]), nil)
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(q)), "the payload stays while an event in it is unsettled")
	// The nacked event is redelivered from the shared payload.
	b.settle(t, q, nil, refs(ls[1]))
	again := b.pullEvents(t, q, "s1", 3, src)
	require.Equal(t, []string{"p-0002"}, eventBodies(again))
	r := b.settle(t, q, refs(again...), nil)
	require.Equal(t, int64(3), r.Committed)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)), "the payload goes with its last event")
}

func testEventsDeliveryCount(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource([]byte("only"))
	var seen []*leasestore.Lease
	pull := func(session string) {
		t.Helper()
		ls := b.pullEvents(t, q, session, 1, src)
		require.Len(t, ls, 1, "session %s", session)
		seen = append(seen, ls[0])
	}
	const longTTL = time.Hour
	attach := func(session string, ttl time.Duration) {
		t.Helper()
		require.NoError(t, b.store.Attach(b.ctx, q, session, ttl))
	}

	attach("s1", longTTL)
	pull("s1") // 1: first delivery
	b.settle(t, q, nil, refs(seen[0]))
	pull("s1") // 2: after a nack
	require.NoError(t, b.store.Detach(b.ctx, q, "s1"))
	attach("s2", longTTL)
	pull("s2") // 3: after a detach
	b.clock.Advance(streamVisibility)
	pull("s2") // 4: after its visibility passed (s2 is still attached)
	attach("s3", sessionTTL)
	b.clock.Advance(streamVisibility) // s2 is attached for an hour, s3 lapses
	require.NoError(t, b.store.Attach(b.ctx, q, "s2", longTTL))
	pull("s2") // 5: after the visibility passed again
	attach("s4", longTTL)
	_, err := b.store.EvictSessions(b.ctx, q, "s2")
	require.NoError(t, err)
	pull("s4") // 6: after an eviction
	attach("s5", sessionTTL)
	require.NoError(t, b.store.Detach(b.ctx, q, "s4"))
	pull("s5") // 7: after a detach, again
	b.clock.Advance(sessionTTL)
	attach("s6", longTTL)
	pull("s6") // 8: after s5's TTL lapsed

	for i, l := range seen {
		require.Equal(t, seen[0].ID, l.ID, "one event, one lease id")
		require.Equal(t, int64(i+1), l.Attempt, "delivery %d: the count grows on every redelivery path and never resets", i+1)
		require.Equal(t, int64(i), l.Generation)
	}
	require.Equal(t, 1, src.Counts().Receives, "always the same event, never new work")
}

func testEventsSessionKeeps(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("k", 2)...)
	b.attach(t, q, "s1")
	b.attach(t, q, "s2")
	mine := b.pullEvents(t, q, "s1", 1, src)
	b.attach(t, q, "s1") // heartbeats do not release anything
	theirs := b.pullEvents(t, q, "s2", 5, src)
	require.Equal(t, []int64{2}, starts(theirs), "a live session's leases are not handed to others")
	require.Empty(t, b.pullEvents(t, q, "s2", 5, src))
	require.Equal(t, leasestore.SettleResult{Acked: 2, Committed: 2}, b.settle(t, q, refs(mine[0], theirs[0]), nil))
}

func testEventsPaused(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("z", 2)...)
	b.attach(t, q, "s1")
	ls := b.pullEvents(t, q, "s1", 1, src)
	_, err := b.store.SetPaused(b.ctx, q, true)
	require.NoError(t, err)
	_, err = b.tryPullEvents(b.store, q, "s1", 1, src)
	requireCode(t, herr.FailedPrecondition, err)
	require.Equal(t, leasestore.SettleResult{Acked: 1, Committed: 1}, b.settle(t, q, refs(ls...), nil), "settling works while paused")
}
