package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// intakeCases hold the rule that a queue's maximum length counts the
// broker's backlog: Intake takes the backlog in and dead-letters the
// oldest events past MaxLength (the notifications API, REASON_MAXLEN).
var intakeCases = []conformanceCase{
	{"Intake/BacklogPastMaxLength", testIntakeBacklog},
	{"Intake/EvictsOldestWaitingFirst", testIntakeEvictsWaiting},
	{"Intake/NeverEvictsLeased", testIntakeKeepsLeased},
	{"Intake/InSmallSteps", testIntakeSmallSteps},
	{"Intake/FullWindow", testIntakeFullWindow},
	{"Intake/ExpiredDoNotCount", testIntakeExpired},
	{"Intake/NoLossOnFailure", testIntakeNoLoss},
	{"Intake/Errors", testIntakeErrors},
}

// intake runs Intake on queue with max and requires success.
func (b *bundle) intake(t testing.TB, queue string, src leasestore.Source, max int) leasestore.IntakeResult {
	t.Helper()
	r, err := b.store.Intake(b.ctx, leasestore.IntakeParams{Consumer: queue, Source: src, Max: max})
	require.NoError(t, err, "Intake(%s, max %d)", queue, max)
	return r
}

// maxLenQueue makes a durable queue with MaxLength n.
func (b *bundle) maxLenQueue(t testing.TB, n int) string {
	return b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) { c.MaxLength = n })
}

// testIntakeBacklog: the notifications API's case. A queue of maximum
// length 5 that nobody consumes receives 8 events; once its backlog is
// taken in, the 3 oldest are dead-lettered MAXLEN (never delivered) and a
// consumer that attaches later gets the newest 5, in order, each as its
// first delivery.
func testIntakeBacklog(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.maxLenQueue(t, 5)
	all := bodies("m", 8)
	scripted := NewScriptedSource(all...)
	var atAck []string
	src := &settleProbe{ScriptedSource: scripted, before: func() { atAck = dlBodies(b.deadLettersOf(t, q)) }}

	r := b.intake(t, q, src, 100)
	require.Equal(t, []string{"m-0001", "m-0002", "m-0003"}, atAck, "the dead letters are written before the source is acked")
	require.Equal(t, leasestore.IntakeResult{Received: 8, TakenIn: 8, Evicted: 3}, r)
	cnt := scripted.Counts()
	require.Equal(t, []int{8, 0, 0}, []int{cnt.Acked, cnt.Available, cnt.Outstanding}, "every event is acked at the source once the queue holds it")
	dls := b.deadLettersOf(t, q)
	require.Equal(t, []string{"m-0001", "m-0002", "m-0003"}, dlBodies(dls))
	for _, d := range dls {
		require.Equal(t, leasestore.ReasonMaxLen, d.Reason)
		require.Zero(t, d.DeliveryCount, "evicted before any delivery")
		require.Equal(t, q, d.OriginQueue)
	}
	c := b.getC(t, q)
	require.Equal(t, int64(5), c.InFlight, "the queue holds MaxLength events")
	require.Equal(t, int64(5), c.Requeued, "all waiting for their first delivery")
	require.Equal(t, int64(3), c.Committed, "the cursor passed the evicted events")

	// Nothing more at the broker: a second intake changes nothing.
	require.Equal(t, leasestore.IntakeResult{}, b.intake(t, q, src, 100))

	b.attach(t, q, "s1")
	got := b.pullEvents(t, q, "s1", 100, src)
	require.Equal(t, []string{"m-0004", "m-0005", "m-0006", "m-0007", "m-0008"}, eventBodies(got))
	for _, l := range got {
		require.Equal(t, int64(1), l.Attempt, "a first delivery")
	}
	require.Equal(t, int64(8), b.settle(t, q, refs(got...), nil).Committed)
	requireSourceSane(t, scripted)
}

// settleProbe is a ScriptedSource that runs before at the start of every
// Settle: to look at the store at the moment of the broker ack.
type settleProbe struct {
	*ScriptedSource
	before func()
}

func (p *settleProbe) Settle(ctx context.Context, in []leasestore.Incoming, taken int) error {
	p.before()
	return p.ScriptedSource.Settle(ctx, in, taken)
}

// testIntakeEvictsWaiting: events already waiting in the queue are older
// than anything at the broker, so they go first.
func testIntakeEvictsWaiting(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.maxLenQueue(t, 3)
	all := bodies("m", 5)
	src := NewScriptedSource(all[:3]...)
	require.Equal(t, leasestore.IntakeResult{Received: 3, TakenIn: 3}, b.intake(t, q, src, 100))
	require.Empty(t, b.deadLettersOf(t, q))

	src.Add(all[3:]...)
	require.Equal(t, leasestore.IntakeResult{Received: 2, TakenIn: 2, Evicted: 2}, b.intake(t, q, src, 100))
	require.Equal(t, []string{"m-0001", "m-0002"}, dlBodies(b.deadLettersOf(t, q)))
	b.attach(t, q, "s1")
	got := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"m-0003", "m-0004", "m-0005"}, eventBodies(got))
	requireSourceSane(t, src)
}

// testIntakeKeepsLeased: a session's leased events count towards the
// length but are never evicted: what does not fit beside them is the
// oldest of what arrives.
func testIntakeKeepsLeased(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.maxLenQueue(t, 3)
	all := bodies("m", 6)
	src := NewScriptedSource(all[:2]...)
	b.attach(t, q, "s1")
	leased := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"m-0001", "m-0002"}, eventBodies(leased))

	src.Add(all[2:]...)
	require.Equal(t, leasestore.IntakeResult{Received: 4, TakenIn: 4, Evicted: 3}, b.intake(t, q, src, 100))
	require.Equal(t, []string{"m-0003", "m-0004", "m-0005"}, dlBodies(b.deadLettersOf(t, q)))
	c := b.getC(t, q)
	require.Equal(t, int64(3), c.InFlight, "two leased and the newest waiting")

	// The leases are still the session's to settle.
	r := b.settle(t, q, refs(leased...), nil)
	require.Equal(t, 2, r.Acked)
	got := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"m-0006"}, eventBodies(got))
	require.Equal(t, int64(6), b.settle(t, q, refs(got...), nil).Committed)
	requireSourceSane(t, src)
}

// testIntakeSmallSteps: a backlog taken in a few events at a time ends as
// one taken in at once: the newest MaxLength wait, the rest are dead
// letters, in order.
func testIntakeSmallSteps(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.maxLenQueue(t, 4)
	src := NewScriptedSource(bodies("m", 11)...)
	evicted := 0
	for range 20 {
		r := b.intake(t, q, src, 3)
		evicted += r.Evicted
		if r.Received < 3 {
			break
		}
	}
	require.Equal(t, 7, evicted)
	require.Equal(t, []string{"m-0001", "m-0002", "m-0003", "m-0004", "m-0005", "m-0006", "m-0007"}, dlBodies(b.deadLettersOf(t, q)))
	b.attach(t, q, "s1")
	got := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"m-0008", "m-0009", "m-0010", "m-0011"}, eventBodies(got))
	requireSourceSane(t, src)
}

// testIntakeFullWindow: a queue whose maximum length is the whole
// in-flight window, and full: evicting makes the room the new events
// need.
func testIntakeFullWindow(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.maxLenQueue(t, leasestore.MaxInFlight)
	all := bodies("m", leasestore.MaxInFlight+5)
	src := NewScriptedSource(all[:leasestore.MaxInFlight]...)
	require.Equal(t, leasestore.IntakeResult{Received: leasestore.MaxInFlight, TakenIn: leasestore.MaxInFlight}, b.intake(t, q, src, leasestore.MaxInFlight))
	src.Add(all[leasestore.MaxInFlight:]...)
	require.Equal(t, leasestore.IntakeResult{Received: 5, TakenIn: 5, Evicted: 5}, b.intake(t, q, src, 100))
	require.Equal(t, []string{"m-0001", "m-0002", "m-0003", "m-0004", "m-0005"}, dlBodies(b.deadLettersOf(t, q)))
	c := b.getC(t, q)
	require.Equal(t, int64(leasestore.MaxInFlight), c.InFlight)
	b.attach(t, q, "s1")
	got := b.pullEvents(t, q, "s1", 1, src)
	require.Equal(t, []string{"m-0006"}, eventBodies(got))
	requireSourceSane(t, src)
}

// testIntakeExpired: events that arrive past the queue's message TTL are
// dead-lettered EXPIRED and do not count towards the length, so they
// push nothing out.
func testIntakeExpired(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const ttl = time.Minute
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) { c.MaxLength, c.MessageTTL = 2, ttl })
	now := b.clock.Now()
	src := NewScriptedSource()
	src.AddAt(now.Add(-2*ttl), []byte("stale-1"), []byte("stale-2"))
	src.AddAt(now, []byte("fresh-1"), []byte("fresh-2"), []byte("fresh-3"))
	require.Equal(t, leasestore.IntakeResult{Received: 5, TakenIn: 5, Evicted: 1}, b.intake(t, q, src, 100))
	reasons := map[string]string{}
	for _, d := range b.deadLettersOf(t, q) {
		reasons[string(d.Body)] = d.Reason
	}
	require.Equal(t, map[string]string{
		"stale-1": leasestore.ReasonExpired, "stale-2": leasestore.ReasonExpired, "fresh-1": leasestore.ReasonMaxLen,
	}, reasons)
	b.attach(t, q, "s1")
	require.Equal(t, []string{"fresh-2", "fresh-3"}, eventBodies(b.pullEvents(t, q, "s1", 10, src)))
	requireSourceSane(t, src)
}

// testIntakeNoLoss: when the dead-letter write fails, the evicted events
// stay in the queue, marked, and nobody is handed them; the next
// operation on the queue finishes the move. An event is always in the
// queue, in the dead-letter queue, or still at the source.
func testIntakeNoLoss(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.maxLenQueue(t, 2)
	src := NewScriptedSource(bodies("m", 4)...)
	stop := injectFault(t, faults.DeadLetterWrite, q)
	r := b.intake(t, q, src, 100)
	require.Equal(t, 4, r.TakenIn)
	require.Equal(t, 4, src.Counts().Acked, "the queue holds all four, two of them marked")
	require.Empty(t, b.deadLettersOf(t, q))
	require.Equal(t, int64(4), b.getC(t, q).InFlight, "never in neither place")

	b.attach(t, q, "s1")
	stop()
	got := b.pullEvents(t, q, "s1", 10, src)
	require.Equal(t, []string{"m-0003", "m-0004"}, eventBodies(got), "the marked events are never handed out")
	require.Equal(t, []string{"m-0001", "m-0002"}, dlBodies(b.deadLettersOf(t, q)), "and their move is finished")

	// A failed receive keeps nothing: the broker still holds the events.
	src.Add(bodies("n", 2)...)
	src.FailReceive(herr.New(herr.Unavailable, "broker down"))
	_, err := b.store.Intake(b.ctx, leasestore.IntakeParams{Consumer: q, Source: src, Max: 10})
	require.Equal(t, herr.Unavailable, herr.CodeOf(err))
	src.FailReceive(nil)
	require.Equal(t, 2, src.Counts().Available)
	requireSourceSane(t, src)
}

// testIntakeErrors: the argument and state errors.
func testIntakeErrors(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("m", 2)...)
	q := b.maxLenQueue(t, 2)
	_, err := b.store.Intake(b.ctx, leasestore.IntakeParams{Consumer: q, Source: src, Max: 0})
	requireCode(t, herr.InvalidArgument, err)
	_, err = b.store.Intake(b.ctx, leasestore.IntakeParams{Consumer: "storetest-missing-" + time.Now().Format("150405.000000"), Source: src, Max: 1})
	requireCode(t, herr.NotFound, err)
	plain := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	_, err = b.store.Intake(b.ctx, leasestore.IntakeParams{Consumer: plain, Source: src, Max: 1})
	requireCode(t, herr.FailedPrecondition, err)
	require.Equal(t, 0, src.Counts().Receives, "refused before the source is asked")
}
