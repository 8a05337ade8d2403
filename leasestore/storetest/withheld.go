package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Events a caller may not be shown (PullParams.Withhold): the notifications
// API and the durable-consumer API deliver an event only to a principal
// that may read it, and one that may not must change nothing for the
// others, however often it pulls: no delivery count, generation, due time,
// cursor or in-flight window moves for it, and nothing is dead-lettered on
// its behalf.
var withheldCases = []conformanceCase{
	{"Withheld/PullNewEventsGoBackUnleased", testWithheldPullNew},
	{"Withheld/PullWaitingLeaseUntouched", testWithheldPullWaiting},
	{"Withheld/PullCutsBeforeWithheld", testWithheldPullCut},
	{"Withheld/PullLiveLeaseStaysWithHolder", testWithheldPullLive},
	{"Withheld/EventsPassedOverUntouched", testWithheldEvents},
	{"Withheld/EventsNotAgedOutForOthers", testWithheldEventsTTL},
}

// withheldPulls is how often the suite's withholding callers pull: past
// the delivery limits the cases set (withheldLimit), so that a store that
// counted withheld pulls as deliveries would dead-letter the events.
const (
	withheldPulls = 20
	withheldLimit = 3
)

// withholding returns a Withhold that hides the bodies starting with
// prefix.
func withholding(prefix string) func([]byte) bool {
	return func(e []byte) bool { return bytes.HasPrefix(e, []byte(prefix)) }
}

// pullAs pulls for worker as a caller that may not be shown the bodies
// starting with hidden ("" hides none).
func (b *bundle) pullAs(worker, hidden string, limit int, src leasestore.Source) (*leasestore.Lease, error) {
	p := leasestore.PullParams{Consumer: b.consumer, Worker: worker, Limit: limit, Visibility: visibility, Source: src}
	if hidden != "" {
		p.Withhold = withholding(hidden)
	}
	return b.store.Pull(b.ctx, p)
}

// requireWithheld checks that err is Pull's *WithheldError for want.
func requireWithheld(t testing.TB, err error, want string) {
	t.Helper()
	requireCode(t, herr.PermissionDenied, err)
	var w *leasestore.WithheldError
	require.True(t, errors.As(err, &w), "a *leasestore.WithheldError, got %T: %v", err, err)
	require.Equal(t, want, string(w.Event), "the withheld event")
}

// requireNoWrites checks that m counted no write since its last Reset.
func requireNoWrites(t testing.TB, m *Meter, what string) {
	t.Helper()
	r := m.Report()
	require.Zero(t, r.Writes, "%s wrote %d records", what, r.Writes)
}

// testWithheldPullNew: new events whose first is withheld go back to the
// source unleased, every time: nothing is written, no position is taken,
// and a caller that may read them gets them as a first delivery at the
// first positions.
func testWithheldPullNew(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{opts: leasestore.Options{DeliveryLimit: withheldLimit}})
	all := [][]byte{[]byte("alice-1"), []byte("alice-2"), []byte("bob-3")}
	src := NewScriptedSource(all...)
	m.Reset()
	for range withheldPulls {
		_, err := b.pullAs("bob", "alice-", 10, src)
		requireWithheld(t, err, "alice-1")
	}
	requireNoWrites(t, m, "withheld pulls")
	require.Equal(t, Counts{Acked: 0, Nacked: withheldPulls * 3, Receives: withheldPulls, Available: 3}, src.Counts(),
		"every received event went back to the source")
	c := b.get(t)
	require.Zero(t, c.InFlight, "the in-flight window did not move")
	require.Zero(t, c.Committed)

	l, err := b.pullAs("alice", "bob-", 10, src)
	require.NoError(t, err)
	requireLease(t, l, 1, all[:2]...)
	require.Equal(t, int64(1), l.Attempt, "a first delivery")
	require.Zero(t, l.Generation)
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	require.Empty(t, b.deadLetters(t))
	requireSourceSane(t, src)
}

// testWithheldPullWaiting: a failed lease whose first event is withheld is
// left exactly as it was (no write), so the delivery limit never takes it
// and the caller that may read it gets it one attempt and one generation
// higher than its last delivery.
func testWithheldPullWaiting(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{opts: leasestore.Options{DeliveryLimit: withheldLimit}})
	src := NewScriptedSource([]byte("alice-1"), []byte("alice-2"))
	l := b.pull(t, "alice", 10, src)
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l, leasestore.StatusFailed).Outcome)

	m.Reset()
	for range withheldPulls {
		_, err := b.pullAs("bob", "alice-", 10, src)
		requireWithheld(t, err, "alice-1")
	}
	requireNoWrites(t, m, "withheld pulls")
	c := b.get(t)
	require.Equal(t, int64(2), c.InFlight)
	require.Equal(t, int64(2), c.Requeued, "still waiting for redelivery")
	require.Empty(t, b.deadLetters(t), "withheld pulls are not deliveries")

	got, err := b.pullAs("alice", "bob-", 10, src)
	require.NoError(t, err)
	requireReclaimed(t, l, got, b.clock.Now().Add(visibility))
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, got, leasestore.StatusOK).Outcome)
	require.Equal(t, int64(2), b.get(t).Committed)
}

// testWithheldPullCut: a batch is cut before the first withheld event, new
// (the rest goes back to the source) or redelivered (the rest waits under a
// new lease id); each caller gets its run of events, in position order.
func testWithheldPullCut(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: withheldLimit}})
	src := NewScriptedSource([]byte("bob-1"), []byte("bob-2"), []byte("alice-3"), []byte("bob-4"))
	l, err := b.pullAs("bob", "alice-", 10, src)
	require.NoError(t, err)
	requireLease(t, l, 1, []byte("bob-1"), []byte("bob-2"))
	require.Equal(t, Counts{Acked: 2, Nacked: 2, Receives: 1, Available: 2}, src.Counts(), "the rest went back to the source")
	b.ack(t, l, leasestore.StatusOK)
	_, err = b.pullAs("bob2", "alice-", 10, src)
	requireWithheld(t, err, "alice-3")
	l, err = b.pullAs("alice", "bob-", 10, src)
	require.NoError(t, err)
	requireLease(t, l, 3, []byte("alice-3"))
	b.ack(t, l, leasestore.StatusOK)
	l, err = b.pullAs("bob3", "alice-", 10, src)
	require.NoError(t, err)
	requireLease(t, l, 4, []byte("bob-4"))
	b.ack(t, l, leasestore.StatusOK)

	// A redelivered lease of mixed events, split at each withheld run.
	src.Add([]byte("bob-5"), []byte("alice-6"), []byte("bob-7"))
	mixed := b.pull(t, "admin", 10, src)
	requireLease(t, mixed, 5, []byte("bob-5"), []byte("alice-6"), []byte("bob-7"))
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, mixed, leasestore.StatusFailed).Outcome)
	first, err := b.pullAs("bob4", "alice-", 10, src)
	require.NoError(t, err)
	requireReclaimedPart(t, mixed, first, 1, b.clock.Now().Add(visibility))
	for range withheldPulls {
		_, err = b.pullAs("bob5", "alice-", 10, src)
		requireWithheld(t, err, "alice-6")
	}
	second, err := b.pullAs("alice2", "bob-", 10, src)
	require.NoError(t, err)
	requireLease(t, second, 6, []byte("alice-6"))
	require.Equal(t, mixed.Attempt+1, second.Attempt, "one delivery more than the lease it came from")
	third, err := b.pullAs("bob6", "alice-", 10, src)
	require.NoError(t, err)
	requireLease(t, third, 7, []byte("bob-7"))
	require.Equal(t, mixed.Attempt+1, third.Attempt)
	for _, x := range []*leasestore.Lease{first, second, third} {
		require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, x, leasestore.StatusOK).Outcome)
	}
	require.Equal(t, int64(7), b.get(t).Committed)
	require.Empty(t, b.deadLetters(t))
	requireSourceSane(t, src)
}

// testWithheldPullLive: a caller that shares a worker id with the holder
// of a live lease, and may not read it, gets nothing: the lease stays with
// its holder, whose acknowledgement commits it.
func testWithheldPullLive(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{})
	src := NewScriptedSource([]byte("alice-1"), []byte("alice-2"))
	l := b.pull(t, "", 10, src) // the shared identity
	m.Reset()
	for range withheldPulls {
		_, err := b.pullAs("", "alice-", 10, src)
		requireWithheld(t, err, "alice-1")
	}
	requireNoWrites(t, m, "withheld pulls")
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome, "the holder's lease is untouched")
	require.Equal(t, int64(2), r.Committed)
}

// pullEventsAs pulls for session as a caller that may not be shown the
// bodies starting with hidden.
func (b *bundle) pullEventsAs(t testing.TB, queue, session, hidden string, limit int, src leasestore.Source) []*leasestore.Lease {
	t.Helper()
	ls, err := b.store.PullEvents(b.ctx, leasestore.PullParams{
		Consumer: queue, Worker: session, Limit: limit, Visibility: streamVisibility, Source: src,
		Withhold: withholding(hidden),
	})
	require.NoError(t, err, "PullEvents(%s, limit %d)", session, limit)
	return ls
}

// testWithheldEvents: a session is never handed an event it may not be
// shown. New ones wait for redelivery, never delivered; waiting ones are
// passed over without a write; neither gains a delivery count, and a
// session that may read them gets them as if the other had never pulled.
func testWithheldEvents(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{opts: leasestore.Options{DeliveryLimit: withheldLimit}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource([]byte("alice-1"), []byte("bob-2"), []byte("alice-3"), []byte("bob-4"))
	b.attach(t, q, "bob")
	b.attach(t, q, "alice")

	got := b.pullEventsAs(t, q, "bob", "alice-", 10, src)
	require.Equal(t, []string{"bob-2", "bob-4"}, eventBodies(got), "the events after a withheld one flow")
	require.Equal(t, []int64{2, 4}, starts(got))
	c := b.getC(t, q)
	require.Equal(t, int64(4), c.InFlight)
	require.Equal(t, int64(2), c.Requeued, "the withheld events wait for redelivery")

	m.Reset()
	for range withheldPulls {
		require.Empty(t, b.pullEventsAs(t, q, "bob", "alice-", 10, src))
	}
	requireNoWrites(t, m, "pulls that found only withheld events")
	require.Empty(t, b.deadLetters(t), "withheld pulls are not deliveries")

	mine := b.pullEventsAs(t, q, "alice", "bob-", 10, src)
	require.Equal(t, []string{"alice-1", "alice-3"}, eventBodies(mine))
	for _, l := range mine {
		require.Equal(t, int64(1), l.Attempt, "a first delivery")
	}
	// Nacked by their reader, they wait again; the other's pulls leave
	// them be, and they come back one delivery higher.
	b.settle(t, q, nil, refs(mine...))
	m.Reset()
	for range withheldPulls {
		require.Empty(t, b.pullEventsAs(t, q, "bob", "alice-", 10, src))
	}
	requireNoWrites(t, m, "pulls that found only withheld events")
	again := b.pullEventsAs(t, q, "alice", "bob-", 10, src)
	require.Equal(t, []string{"alice-1", "alice-3"}, eventBodies(again))
	for i, l := range again {
		require.Equal(t, mine[i].ID, l.ID)
		require.Equal(t, mine[i].Generation+1, l.Generation)
		require.Equal(t, int64(2), l.Attempt)
	}
	r := b.settle(t, q, refs(append(again, got...)...), nil)
	require.Equal(t, 4, r.Acked)
	require.Equal(t, int64(4), r.Committed)
	require.Empty(t, b.deadLetters(t))
	requireSourceSane(t, src)
}

// testWithheldEventsTTL: a session's pulls do not age out events it may
// not be shown (the queue's message TTL applies to events on their way to
// a session); the reader's own pull does.
func testWithheldEventsTTL(t *testing.T, h Harness) {
	const ttl = sessionTTL / 2 // the sessions stay attached
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) { c.MessageTTL = ttl })
	src := NewScriptedSource()
	src.AddAt(b.clock.Now(), []byte("alice-1"), []byte("bob-2"))
	b.attach(t, q, "bob")
	b.attach(t, q, "alice")
	require.Equal(t, []string{"bob-2"}, eventBodies(b.pullEventsAs(t, q, "bob", "alice-", 10, src)))

	b.clock.Advance(ttl)
	require.Empty(t, b.pullEventsAs(t, q, "bob", "alice-", 10, src))
	require.Empty(t, b.deadLetters(t), "not aged out on the other session's behalf")
	require.Empty(t, b.pullEventsAs(t, q, "alice", "bob-", 10, src))
	dls := b.deadLetters(t)
	require.Len(t, dls, 1, "aged out on the way to its reader")
	require.Equal(t, leasestore.ReasonExpired, dls[0].Reason)
}
