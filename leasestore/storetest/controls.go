package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// The delivery controls: extending a lease, failing with a delay,
// rejecting to the dead-letter queue, and per-consumer retry and
// dead-letter policies.
var controlCases = []conformanceCase{
	{"Extend/KeepsTheLease", testExtendKeeps},
	{"Extend/AnHourByExtending", testExtendHour},
	{"Extend/LifeCapped", testExtendCap},
	{"Extend/Stale", testExtendStale},
	{"Extend/WhilePausedAndAfterExpiry", testExtendPaused},
	{"Extend/Shorter", testExtendShorter},
	{"Extend/WritesOnlyItsBlock", testExtendWrites},
	{"Fail/RetryAfterWaits", testFailRetryAfter},
	{"Fail/RetryAfterZeroIsAtOnce", testFailRetryAfterZero},
	{"Fail/RetryAfterRange", testFailRetryAfterRange},
	{"Fail/RetryAfterRepeatChangesNothing", testFailRetryAfterRepeat},
	{"Fail/OKWhileWaitingCommits", testFailOKWhileWaiting},
	{"Reject/DeadLettersAtOnce", testRejectLease},
	{"Policy/BackoffOnFailure", testPolicyBackoffFailed},
	{"Policy/BackoffOnExpiry", testPolicyBackoffExpiry},
	{"Policy/BackoffSurvivesTheSweep", testPolicyBackoffSweep},
	{"Policy/RetryAfterOverrides", testPolicyRetryAfterOverrides},
	{"Policy/MaxDeliveryAttempts", testPolicyMaxAttempts},
	{"Policy/SetAndValidate", testPolicySet},
	{"Policy/UpdatesCompose", testPolicyUpdatesCompose},
	{"Policy/QueueNackBacksOff", testPolicyQueueNack},
}

// extend extends l by vis and requires success.
func (b *bundle) extend(t testing.TB, l *leasestore.Lease, vis time.Duration) *leasestore.ExtendResult {
	t.Helper()
	r, err := b.tryExtend(l.ID, l.Generation, vis)
	require.NoError(t, err, "Extend(%s, gen %d, %v)", l.ID, l.Generation, vis)
	return r
}

func (b *bundle) tryExtend(id string, gen int64, vis time.Duration) (*leasestore.ExtendResult, error) {
	return b.store.Extend(b.ctx, leasestore.ExtendParams{Consumer: b.consumer, LeaseID: id, Generation: gen, Visibility: vis})
}

// failAfter fails l with a retryAfter and requires success.
func (b *bundle) failAfter(t testing.TB, l *leasestore.Lease, after time.Duration) *leasestore.AckResult {
	t.Helper()
	r, err := b.store.Acknowledge(b.ctx, leasestore.AckParams{
		Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusFailed, RetryAfter: &after,
	})
	require.NoError(t, err, "Acknowledge(%s, failed, retryAfter %v)", l.ID, after)
	return r
}

// withPolicies makes the bundle's consumer one with policies p.
func (b *bundle) withPolicies(t testing.TB, p leasestore.Policies) {
	t.Helper()
	_, err := b.store.SetPolicies(b.ctx, b.consumer, p)
	require.NoError(t, err, "SetPolicies")
}

func testExtendKeeps(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("x", 3)...)
	l := b.pull(t, "w1", 2, src) // 1–2, until now+30 s
	b.clock.Advance(20 * time.Second)
	r := b.extend(t, l, 60*time.Second)
	require.Equal(t, leasestore.OutcomeExtended, r.Outcome)
	require.True(t, r.ExpiresAt.Equal(b.clock.Now().Add(60*time.Second)), "ExpiresAt %v", r.ExpiresAt)

	// Past the first visibility, the lease is still the worker's.
	b.clock.Advance(50 * time.Second)
	requireLease(t, b.pull(t, "w2", 10, src), 3, []byte("x-0003"))
	same := b.pull(t, "w1", 10, src)
	require.Equal(t, l.ID, same.ID, "the holder's pull returns its extended lease")
	require.Equal(t, l.Generation, same.Generation)
	require.True(t, same.ExpiresAt.Equal(r.ExpiresAt))
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)

	// Past the extended visibility, it is anybody's again.
	l2 := b.pull(t, "w3", 10, NewScriptedSource())
	require.Nil(t, l2, "w2's lease is live and l is committed")
}

func testExtendHour(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("h", 1)...)
	l := b.pullFor(t, "w", 1, 60*time.Second, src)
	for range 12 {
		b.clock.Advance(5 * time.Minute)
		require.Equal(t, leasestore.OutcomeExtended, b.extend(t, l, 10*time.Minute).Outcome)
		require.Nil(t, b.pull(t, "other", 10, src), "nobody else is handed an extended lease")
	}
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome, "an hour later, the first hand-out still commits")
	require.Equal(t, int64(1), r.Committed)
}

func testExtendCap(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("c", 1)...)
	l := b.pull(t, "w", 1, src)
	handedOut := b.clock.Now()
	b.clock.Advance(leasestore.MaxLeaseLife - 100*time.Second)
	r := b.extend(t, l, 100*time.Second)
	require.Equal(t, leasestore.OutcomeExtended, r.Outcome, "up to the cap exactly")
	require.True(t, r.ExpiresAt.Equal(handedOut.Add(leasestore.MaxLeaseLife)))
	_, err := b.tryExtend(l.ID, l.Generation, 101*time.Second)
	requireCode(t, herr.OutOfRange, err)
	require.Equal(t, leasestore.OutcomeExtended, b.extend(t, l, 50*time.Second).Outcome, "a refused extension changes nothing")
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
}

func testExtendStale(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("s", 4)...)
	l1 := b.pull(t, "w1", 1, src)
	l2 := b.pull(t, "w2", 1, src)
	l3 := b.pull(t, "w3", 1, src)
	l4 := b.pull(t, "w4", 1, src)

	b.ack(t, l1, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeStale, b.extend(t, l1, time.Minute).Outcome, "acknowledged")
	b.ack(t, l2, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeStale, b.extend(t, l2, time.Minute).Outcome, "failed")
	again := b.pull(t, "w5", 1, src)
	require.Equal(t, l2.ID, again.ID)
	require.Equal(t, leasestore.OutcomeStale, b.extend(t, l2, time.Minute).Outcome, "handed to someone else")
	require.Equal(t, leasestore.OutcomeExtended, b.extend(t, again, time.Minute).Outcome, "the new holder may")
	r, err := b.tryExtend(l3.ID, l3.Generation+1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome, "not the current generation")
	r, err = b.tryExtend("3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40", 0, time.Minute)
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeStale, r.Outcome, "unknown lease")
	_, err = b.store.Reject(b.ctx, b.consumer, refs(l4), leasestore.ReasonRejected)
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeStale, b.extend(t, l4, time.Minute).Outcome, "dead-lettered")

	_, err = b.store.Extend(b.ctx, leasestore.ExtendParams{Consumer: b.consumer + "-none", LeaseID: l3.ID, Generation: l3.Generation, Visibility: time.Minute})
	requireCode(t, herr.NotFound, err)
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	_, err = b.store.Extend(b.ctx, leasestore.ExtendParams{Consumer: q, LeaseID: l3.ID, Generation: l3.Generation, Visibility: time.Minute, Type: leasestore.TypeDurableConsumer})
	requireCode(t, herr.Malformed, err)
}

func testExtendPaused(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("p", 1)...)
	l := b.pull(t, "w", 1, src)
	_, err := b.store.SetPaused(b.ctx, b.consumer, true)
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeExtended, b.extend(t, l, time.Minute).Outcome, "allowed while paused")
	_, err = b.store.SetPaused(b.ctx, b.consumer, false)
	require.NoError(t, err)
	// Expired, but nobody has been handed it: its holder may still extend.
	b.clock.Advance(2 * time.Minute)
	require.Equal(t, leasestore.OutcomeExtended, b.extend(t, l, time.Minute).Outcome)
	require.Nil(t, b.pull(t, "other", 1, src))
}

func testExtendShorter(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("e", 2)...)
	l := b.pullFor(t, "w1", 1, 10*time.Minute, src)
	r := b.extend(t, l, time.Second)
	require.True(t, r.ExpiresAt.Equal(b.clock.Now().Add(time.Second)), "an extension may shorten the lease")
	b.clock.Advance(time.Second)
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

func testExtendWrites(t *testing.T, h Harness) {
	m := NewMeter()
	b := setup(t, meteredHarness{h, m}, setupOptions{})
	src := NewScriptedSource(bodies("m", 2)...)
	l := b.pull(t, "w", 2, src)
	m.Reset()
	b.extend(t, l, time.Minute)
	kinds := writtenKinds(m)
	require.Equal(t, map[string]int64{"l:": 1}, kinds, "a longer extension writes only its block")
}

func testFailRetryAfter(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("d", 5)
	src := NewScriptedSource(all[:2]...)
	l := b.pull(t, "w1", 2, src)
	require.Equal(t, leasestore.OutcomeRequeued, b.failAfter(t, l, 30*time.Second).Outcome)
	require.Equal(t, int64(2), b.get(t).Requeued, "a delayed lease waits for redelivery")

	// New work flows meanwhile, to any worker, the failing one included.
	src.Add(all[2])
	requireLease(t, b.pull(t, "w1", 10, src), 3, all[2])
	b.clock.Advance(29 * time.Second)
	src.Add(all[3])
	requireLease(t, b.pull(t, "w2", 10, src), 4, all[3])
	require.Nil(t, b.pull(t, "w3", 10, src), "not before 30 s")

	// When due it goes before new work, one generation and attempt up.
	b.clock.Advance(time.Second)
	src.Add(all[4])
	receives := src.Counts().Receives
	requireReclaimed(t, l, b.pull(t, "w3", 10, src), b.clock.Now().Add(visibility))
	require.Equal(t, receives, src.Counts().Receives, "a due lease goes before new work")
}

func testFailRetryAfterZero(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("z", 2)...)
	l := b.pull(t, "w1", 1, src)
	require.Equal(t, leasestore.OutcomeRequeued, b.failAfter(t, l, 0).Outcome)
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

func testFailRetryAfterRange(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("r", 1)...)
	l := b.pull(t, "w1", 1, src)
	for _, d := range []time.Duration{-time.Second, leasestore.MaxRetryAfter + time.Second} {
		_, err := b.store.Acknowledge(b.ctx, leasestore.AckParams{
			Consumer: b.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusFailed, RetryAfter: &d,
		})
		requireCode(t, herr.OutOfRange, err)
	}
	require.Equal(t, leasestore.OutcomeRequeued, b.failAfter(t, l, leasestore.MaxRetryAfter).Outcome, "12 hours is allowed")
	b.clock.Advance(leasestore.MaxRetryAfter - time.Second)
	require.Nil(t, b.pull(t, "w2", 1, src))
	b.clock.Advance(time.Second)
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

func testFailRetryAfterRepeat(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("t", 1)...)
	l := b.pull(t, "w1", 1, src)
	b.failAfter(t, l, 10*time.Second)
	require.Equal(t, leasestore.OutcomeRequeued, b.failAfter(t, l, time.Hour).Outcome, "a repeat reads requeued")
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l, leasestore.StatusFailed).Outcome)
	b.clock.Advance(10 * time.Second)
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

func testFailOKWhileWaiting(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("o", 1)...)
	l := b.pull(t, "w1", 1, src)
	b.failAfter(t, l, time.Minute)
	// As after a plain failed: nobody has been handed it since.
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(1), r.Committed)
	b.clock.Advance(time.Minute)
	require.Nil(t, b.pull(t, "w2", 1, src))
}

func testRejectLease(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("j", 3)
	src := NewScriptedSource(all...)
	l := b.pull(t, "w1", 2, src) // 1–2
	next := b.pull(t, "w2", 1, src)
	r := b.ack(t, l, leasestore.StatusRejected)
	require.Equal(t, leasestore.OutcomeDeadLettered, r.Outcome)
	require.Equal(t, int64(2), r.Committed, "the cursor passes the dead-lettered events at once")
	dls := b.deadLettersOf(t, b.consumer)
	require.Len(t, dls, 2, "every event of the lease, at once")
	for i, d := range dls {
		require.Equal(t, leasestore.ReasonRejected, d.Reason)
		require.Equal(t, int64(1), d.DeliveryCount)
		require.Equal(t, string(all[i]), string(d.Body))
	}
	require.Equal(t, leasestore.OutcomeStale, b.ack(t, l, leasestore.StatusOK).Outcome, "a rejected lease cannot be acknowledged")
	require.Equal(t, leasestore.OutcomeDeadLettered, b.ack(t, l, leasestore.StatusRejected).Outcome, "a repeated reject answers as the first")
	require.Len(t, b.deadLettersOf(t, b.consumer), 2, "and moves nothing again")
	r = b.ack(t, next, leasestore.StatusOK)
	require.Equal(t, int64(3), r.Committed, "the cursor passes dead-lettered events")
	require.Zero(t, b.get(t).InFlight)
	require.Nil(t, b.pull(t, "w1", 10, src))
}

func testPolicyBackoffFailed(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	b.withPolicies(t, leasestore.Policies{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: 10 * time.Second, MaximumBackoff: 30 * time.Second}})
	src := NewScriptedSource(bodies("b", 1)...)
	l := b.pull(t, "w", 1, src)
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second} {
		require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, l, leasestore.StatusFailed).Outcome)
		b.clock.Advance(wait - time.Second)
		require.Nil(t, b.pull(t, "w", 1, src), "attempt %d backs off %v", l.Attempt, wait)
		b.clock.Advance(time.Second)
		got := b.pull(t, "w", 1, src)
		requireReclaimed(t, l, got, b.clock.Now().Add(visibility))
		l = got
	}
}

func testPolicyBackoffExpiry(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	b.withPolicies(t, leasestore.Policies{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: 10 * time.Second, MaximumBackoff: time.Minute}})
	src := NewScriptedSource(bodies("x", 2)...)
	l := b.pull(t, "w1", 1, src)
	b.clock.Advance(visibility)
	requireLease(t, b.pull(t, "w2", 1, src), 2, []byte("x-0002"))
	b.clock.Advance(9 * time.Second)
	require.Nil(t, b.pull(t, "w3", 1, src), "an expired lease backs off from its expiry")
	b.clock.Advance(time.Second)
	requireReclaimed(t, l, b.pull(t, "w3", 1, src), b.clock.Now().Add(visibility))
}

func testPolicyBackoffSweep(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	b.withPolicies(t, leasestore.Policies{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: 20 * time.Second, MaximumBackoff: time.Minute}})
	src := NewScriptedSource(bodies("y", 1)...)
	l := b.pull(t, "w1", 1, src)
	b.clock.Advance(visibility + time.Second)
	ex, err := b.store.ExpireLeases(b.ctx, b.consumer)
	require.NoError(t, err)
	require.Equal(t, 1, ex.Leases)
	require.Nil(t, b.pull(t, "w2", 1, src), "swept, still backing off")
	b.clock.Advance(19 * time.Second)
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

func testPolicyRetryAfterOverrides(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	b.withPolicies(t, leasestore.Policies{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: time.Minute, MaximumBackoff: time.Minute}})
	src := NewScriptedSource(bodies("o", 1)...)
	l := b.pull(t, "w1", 1, src)
	b.failAfter(t, l, 0)
	requireReclaimed(t, l, b.pull(t, "w2", 1, src), b.clock.Now().Add(visibility))
}

func testPolicyMaxAttempts(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	b.withPolicies(t, leasestore.Policies{
		MaxDeliveryAttempts: 3,
		RetryPolicy:         &leasestore.RetryPolicy{MinimumBackoff: time.Second, MaximumBackoff: time.Second},
	})
	src := NewScriptedSource(bodies("m", 2)...)
	l := b.pull(t, "w", 1, src)
	for range 2 {
		b.ack(t, l, leasestore.StatusFailed)
		b.clock.Advance(time.Second)
		got := b.pull(t, "w", 1, src)
		requireReclaimed(t, l, got, b.clock.Now().Add(visibility))
		l = got
	}
	require.Equal(t, int64(3), l.Attempt)
	b.ack(t, l, leasestore.StatusFailed) // the third failure: no backoff, no fourth delivery
	requireLease(t, b.pull(t, "w", 1, src), 2, []byte("m-0002"))
	dls := b.deadLettersOf(t, b.consumer)
	require.Len(t, dls, 1)
	require.Equal(t, leasestore.ReasonDeliveryLimit, dls[0].Reason)
	require.Equal(t, int64(3), dls[0].DeliveryCount)
}

func testPolicySet(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	p := leasestore.Policies{
		RetryPolicy:         &leasestore.RetryPolicy{MinimumBackoff: 5 * time.Second, MaximumBackoff: 10 * time.Minute},
		MaxDeliveryAttempts: 7,
	}
	c, err := b.store.SetPolicies(b.ctx, b.consumer, p)
	require.NoError(t, err)
	require.Equal(t, p, c.Policies)
	require.Equal(t, p, b.get(t).Policies)
	c, err = b.store.SetPolicies(b.ctx, b.consumer, leasestore.Policies{})
	require.NoError(t, err)
	require.Equal(t, leasestore.Policies{}, c.Policies, "absent policies are removed")

	for _, bad := range []leasestore.Policies{
		{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: -time.Second, MaximumBackoff: time.Second}},
		{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: time.Second, MaximumBackoff: leasestore.MaxBackoff + time.Second}},
		{RetryPolicy: &leasestore.RetryPolicy{MinimumBackoff: time.Minute, MaximumBackoff: time.Second}},
		{MaxDeliveryAttempts: leasestore.MaxDeliveryAttempts + 1},
		{MaxDeliveryAttempts: -1},
		{AckTimeout: time.Millisecond},
	} {
		_, err := b.store.SetPolicies(b.ctx, b.consumer, bad)
		requireCode(t, herr.InvalidArgument, err)
		_, err = b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: b.consumer + "-bad", Type: leasestore.TypeDurableConsumer, Subscription: "s", Policies: bad})
		requireCode(t, herr.InvalidArgument, err)
	}
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) { c.Policies = p; c.AckTimeout = time.Minute })
	got := b.getC(t, q)
	require.Equal(t, time.Minute, got.AckTimeout)
	require.Equal(t, p.RetryPolicy, got.RetryPolicy)
	_, err = b.store.SetPolicies(b.ctx, b.consumer+"-none", p)
	requireCode(t, herr.NotFound, err)
}

// testPolicyUpdatesCompose: an update whose write clashes with another
// runs its change again on the other's result, so two updates of
// different members both land (two PATCH requests at once).
func testPolicyUpdatesCompose(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	retry := &leasestore.RetryPolicy{MinimumBackoff: 2 * time.Second, MaximumBackoff: time.Minute}
	calls := 0
	c, err := b.store.UpdatePolicies(b.ctx, b.consumer, func(cur leasestore.Policies) (leasestore.Policies, error) {
		calls++
		if calls == 1 {
			// Another update lands between this one's read and its write.
			_, err := b.store.UpdatePolicies(b.ctx, b.consumer, func(cur leasestore.Policies) (leasestore.Policies, error) {
				cur.RetryPolicy = retry
				return cur, nil
			})
			require.NoError(t, err)
		}
		cur.MaxDeliveryAttempts = 4
		return cur, nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls, "the clashing update ran its change again on the fresh policies")
	want := leasestore.Policies{RetryPolicy: retry, MaxDeliveryAttempts: 4}
	require.Equal(t, want, c.Policies)
	require.Equal(t, want, b.get(t).Policies)

	refused := herr.New(herr.InvalidArgument, "refused by the change")
	_, err = b.store.UpdatePolicies(b.ctx, b.consumer, func(leasestore.Policies) (leasestore.Policies, error) {
		return leasestore.Policies{}, refused
	})
	require.ErrorIs(t, err, refused)
	require.Equal(t, want, b.get(t).Policies, "a refused change writes nothing")
}

func testPolicyQueueNack(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) {
		c.RetryPolicy = &leasestore.RetryPolicy{MinimumBackoff: 15 * time.Second, MaximumBackoff: time.Minute}
	})
	b.attach(t, q, "s")
	src := NewScriptedSource(bodies("n", 2)...)
	ls := b.pullEvents(t, q, "s", 1, src)
	require.Equal(t, 1, b.settle(t, q, nil, refs(ls[0])).Nacked)
	got := b.pullEvents(t, q, "s", 5, src)
	require.Equal(t, []string{"n-0002"}, eventBodies(got), "a nacked event backs off; new work flows")
	b.clock.Advance(15 * time.Second)
	b.attach(t, q, "s")
	again := b.pullEvents(t, q, "s", 5, src)
	require.Equal(t, []string{"n-0001"}, eventBodies(again))
	require.Equal(t, int64(2), again[0].Attempt)
}
