package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var reapCases = []conformanceCase{
	{"Reap/IdleQueues", testReapIdle},
	{"Reap/WhatTheyHold", testReapHoldings},
}

const (
	reapGrace = 20 * time.Second
	reapIdle  = 24 * time.Hour
)

// reap runs ReapIdle and returns the ids it reaped, requiring each
// returned consumer to carry its subscription.
func (b *bundle) reap(t testing.TB) []string {
	t.Helper()
	cs, err := b.store.ReapIdle(b.ctx, reapGrace, reapIdle)
	require.NoError(t, err)
	var ids []string
	for _, c := range cs {
		require.Equal(t, "sub-"+c.ID, c.Subscription, "a reaped queue comes back with its subscription")
		ids = append(ids, c.ID)
	}
	return ids
}

func testReapIdle(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	fresh := b.newQueue(t, leasestore.TypeNonDurableQueue, nil) // never attached
	left := b.newQueue(t, leasestore.TypeNonDurableQueue, nil)  // attached, then detached
	live := b.newQueue(t, leasestore.TypeNonDurableQueue, nil)  // attached
	durable := b.newQueue(t, leasestore.TypeDurableQueue, nil)  // never attached
	kept := b.newQueue(t, leasestore.TypeDurableQueue, nil)     // attached for two days
	b.attach(t, left, "s")
	require.NoError(t, b.store.Detach(b.ctx, left, "s"))
	b.attach(t, live, "s")
	require.NoError(t, b.store.Attach(b.ctx, kept, "s", 48*time.Hour))

	b.clock.Advance(reapGrace - time.Millisecond)
	require.Empty(t, b.reap(t), "nothing is idle for its window yet")

	b.clock.Advance(time.Millisecond)
	require.ElementsMatch(t, []string{fresh, left}, b.reap(t), "non-durable queues go after the grace window")
	for _, id := range []string{fresh, left} {
		_, err := b.store.GetConsumer(b.ctx, id)
		requireCode(t, herr.NotFound, err)
	}

	// live's session lapses at 30 s; it goes 20 s later.
	b.clock.Advance(sessionTTL - reapGrace)
	require.Zero(t, b.getC(t, live).LiveSessions)
	require.Empty(t, b.reap(t))
	b.clock.Advance(reapGrace - time.Millisecond)
	require.Empty(t, b.reap(t))
	b.clock.Advance(time.Millisecond)
	require.Equal(t, []string{live}, b.reap(t))

	// A durable queue counts from its creation when no session ever came.
	b.clock.Advance(reapIdle - b.clock.Now().Sub(b.getC(t, durable).CreatedAt) - time.Millisecond)
	require.Empty(t, b.reap(t))
	b.clock.Advance(time.Millisecond)
	require.Equal(t, []string{durable}, b.reap(t))

	// A queue with a live session is never reaped, however long ago it
	// was created; once the session lapses (at 48 h), its idle window runs
	// from the lapse.
	b.clock.Advance(12 * time.Hour)
	require.Equal(t, 1, b.getC(t, kept).LiveSessions)
	require.Empty(t, b.reap(t))
	b.clock.Advance(12 * time.Hour)
	require.Zero(t, b.getC(t, kept).LiveSessions)
	b.clock.Advance(reapIdle - time.Millisecond)
	require.Empty(t, b.reap(t))
	b.clock.Advance(time.Millisecond)
	require.Equal(t, []string{kept}, b.reap(t))
	// A durable consumer is never reaped.
	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "only the durable consumer is left")
	require.Equal(t, leasestore.TypeDurableConsumer, list[0].Type)
}

func testReapHoldings(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 1}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	other := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("h", 4)...)
	b.attach(t, q, "s")
	ls := b.pullEvents(t, q, "s", 1, src)
	b.settle(t, q, nil, refs(ls...))
	require.Len(t, b.pullEvents(t, q, "s", 2, src), 2) // dead-letters h-0001
	require.Len(t, b.deadLettersOf(t, q), 1)
	require.NoError(t, b.store.Detach(b.ctx, q, "s"))
	b.attach(t, other, "s")
	b.pullEvents(t, other, "s", 1, src)
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(q)), "q holds two events")

	b.clock.Advance(reapIdle)
	b.attach(t, other, "s2")
	require.Equal(t, []string{q}, b.reap(t))
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(q)), "a reaped queue's events go with it")
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(other)), "another queue's payloads stay")
	dls := b.deadLettersOf(t, q)
	require.Len(t, dls, 1, "a reaped queue's dead letters stay")
	out, err := b.store.ReplayDeadLetter(b.ctx, dls[0].ID)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReplayOriginQueueDeleted, out)
}
