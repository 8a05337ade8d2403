package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// The stream delivery controls (the WebSocket extend frame and nack
// delay): ExtendEvents and SettleWith's NackDelay.
var streamControlCases = []conformanceCase{
	{"StreamControls/ExtendKeepsEvents", testStreamExtendKeeps},
	{"StreamControls/ExtendCapped", testStreamExtendCapped},
	{"StreamControls/NackDelayWaits", testStreamNackDelay},
	{"StreamControls/NackDelayOverridesPolicy", testStreamNackDelayPolicy},
	{"StreamControls/NackDelayRange", testStreamNackDelayRange},
}

// extendEvents extends refs on queue by vis and requires success.
func (b *bundle) extendEvents(t testing.TB, queue string, rs []leasestore.EventRef, vis time.Duration) leasestore.ExtendEventsResult {
	t.Helper()
	r, err := b.store.ExtendEvents(b.ctx, queue, rs, vis)
	require.NoError(t, err, "ExtendEvents(%v)", vis)
	return r
}

// nackAfter nacks refs on queue with delay and requires success.
func (b *bundle) nackAfter(t testing.TB, queue string, rs []leasestore.EventRef, delay time.Duration) leasestore.SettleResult {
	t.Helper()
	r, err := b.store.SettleWith(b.ctx, queue, leasestore.SettleParams{Nacks: rs, NackDelay: &delay})
	require.NoError(t, err, "SettleWith(nack, delay %v)", delay)
	return r
}

func testStreamExtendKeeps(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	long := func(session string) {
		require.NoError(t, b.store.Attach(b.ctx, q, session, time.Hour), "Attach(%s)", session)
	}
	long("s1")
	src := NewScriptedSource(bodies("e", 3)...)
	ls := b.pullEvents(t, q, "s1", 2, src) // e-0001, e-0002 until now+5 min
	require.Len(t, ls, 2)

	b.clock.Advance(4 * time.Minute)
	stale := leasestore.EventRef{LeaseID: ls[0].ID, Generation: ls[0].Generation + 1}
	r := b.extendEvents(t, q, []leasestore.EventRef{ref(ls[0]), ref(ls[0]), stale, {LeaseID: "nonsense"}}, 10*time.Minute)
	require.Equal(t, leasestore.ExtendEventsResult{Extended: 1, Skipped: 3}, r, "one current ref; a repeat, another generation and a bad id are skipped")

	// Past the ack timeout, the extended event is still s1's; the other
	// comes back to another session.
	b.clock.Advance(3 * time.Minute)
	long("s2")
	got := b.pullEvents(t, q, "s2", 5, src)
	require.ElementsMatch(t, []string{"e-0002", "e-0003"}, eventBodies(got), "the extended event is not handed out again")
	require.Equal(t, 1, b.settle(t, q, refs(ls[0]), nil).Acked, "the extended event still settles")

	// Past the extension, an extension is refused: the event was handed
	// to s2 (a higher generation) or nobody holds it.
	b.clock.Advance(11 * time.Minute)
	require.Equal(t, leasestore.ExtendEventsResult{Skipped: 2}, b.extendEvents(t, q, refs(ls...), time.Minute))
	_, err := b.store.ExtendEvents(b.ctx, q, refs(ls...), 0)
	requireCode(t, herr.OutOfRange, err)
	_, err = b.store.ExtendEvents(b.ctx, q+"-none", refs(ls...), time.Minute)
	requireCode(t, herr.NotFound, err)
}

func testStreamExtendCapped(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	require.NoError(t, b.store.Attach(b.ctx, q, "s", leasestore.MaxLeaseLife+time.Hour))
	src := NewScriptedSource(bodies("c", 1)...)
	ls, err := b.store.PullEvents(b.ctx, leasestore.PullParams{Consumer: q, Worker: "s", Limit: 1, Visibility: 10 * time.Minute, Source: src})
	require.NoError(t, err)
	require.Len(t, ls, 1)
	handedOut := b.clock.Now()
	b.clock.Advance(leasestore.MaxLeaseLife - 5*time.Minute)
	require.Equal(t, leasestore.ExtendEventsResult{Capped: 1}, b.extendEvents(t, q, refs(ls...), 10*time.Minute),
		"past the life cap the event is left as it was")
	require.Equal(t, leasestore.ExtendEventsResult{Extended: 1}, b.extendEvents(t, q, refs(ls...), 5*time.Minute),
		"up to the cap exactly is allowed")
	b.clock.Advance(handedOut.Add(leasestore.MaxLeaseLife - time.Millisecond).Sub(b.clock.Now()))
	require.Empty(t, b.pullEvents(t, q, "s", 5, src), "kept to the cap")
	require.Equal(t, 1, b.settle(t, q, refs(ls...), nil).Acked)
}

func testStreamNackDelay(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	b.attach(t, q, "s")
	src := NewScriptedSource(bodies("d", 2)...)
	ls := b.pullEvents(t, q, "s", 1, src)
	require.Equal(t, 1, b.nackAfter(t, q, refs(ls...), 30*time.Second).Nacked)
	require.Equal(t, 0, b.nackAfter(t, q, refs(ls...), 0).Nacked, "a nacked event is not nacked again")

	got := b.pullEvents(t, q, "s", 5, src)
	require.Equal(t, []string{"d-0002"}, eventBodies(got), "new work flows while the nacked event waits")
	require.Equal(t, 1, b.settle(t, q, refs(got...), nil).Acked)
	b.clock.Advance(30*time.Second - time.Millisecond)
	b.attach(t, q, "s")
	require.Empty(t, b.pullEvents(t, q, "s", 5, src), "not before the delay")
	b.clock.Advance(time.Millisecond)
	again := b.pullEvents(t, q, "s", 5, src)
	require.Equal(t, []string{"d-0001"}, eventBodies(again), "due after the delay")
	require.Equal(t, int64(2), again[0].Attempt)
	require.Greater(t, again[0].Generation, ls[0].Generation)
}

func testStreamNackDelayPolicy(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, func(c *leasestore.Consumer) {
		c.RetryPolicy = &leasestore.RetryPolicy{MinimumBackoff: time.Minute, MaximumBackoff: time.Minute}
	})
	b.attach(t, q, "s")
	src := NewScriptedSource(bodies("p", 1)...)
	ls := b.pullEvents(t, q, "s", 1, src)
	require.Equal(t, 1, b.nackAfter(t, q, refs(ls...), 0).Nacked)
	again := b.pullEvents(t, q, "s", 5, src)
	require.Equal(t, []string{"p-0001"}, eventBodies(again), "a delay of 0 is at once, whatever the retry policy")
	require.Equal(t, 1, b.nackAfter(t, q, refs(again...), 5*time.Second).Nacked)
	b.clock.Advance(5 * time.Second)
	b.attach(t, q, "s")
	require.Equal(t, []string{"p-0001"}, eventBodies(b.pullEvents(t, q, "s", 5, src)), "the delay replaces the policy's minute")
}

func testStreamNackDelayRange(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	b.attach(t, q, "s")
	src := NewScriptedSource(bodies("r", 1)...)
	ls := b.pullEvents(t, q, "s", 1, src)
	for _, d := range []time.Duration{-time.Second, leasestore.MaxRetryAfter + time.Second} {
		_, err := b.store.SettleWith(b.ctx, q, leasestore.SettleParams{Nacks: refs(ls...), NackDelay: &d})
		requireCode(t, herr.OutOfRange, err)
	}
	require.Equal(t, 1, b.nackAfter(t, q, refs(ls...), leasestore.MaxRetryAfter).Nacked, "the longest delay is allowed")
}
