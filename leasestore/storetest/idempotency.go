package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

var idempotencyCases = []conformanceCase{
	{"Idempotency/ClaimCompleteReplay", testKeyClaimCompleteReplay},
	{"Idempotency/DifferentRequestRefused", testKeyReused},
	{"Idempotency/ScopedPerPrincipal", testKeyPerPrincipal},
	{"Idempotency/WindowExpiry", testKeyExpiry},
	{"Idempotency/Release", testKeyRelease},
	{"Idempotency/TakeoverAfterHold", testKeyTakeover},
	{"Idempotency/CrashBeforePublish", testKeyCrashBeforePublish},
	{"Idempotency/CrashAfterPublish", testKeyCrashAfterPublish},
	{"Idempotency/NothingPublishedReleases", testKeyNothingPublished},
	{"Idempotency/RacingRepeats", testKeyRace},
	{"Idempotency/Limits", testKeyLimits},
	{"Idempotency/LargePlan", testKeyLargePlan},
}

// keyReq returns a request for a fresh key of a fresh principal, with
// fingerprint "fp-1" and plan "plan-1".
func keyReq() leasestore.KeyRequest {
	return leasestore.KeyRequest{
		Principal: "principal-" + uuid.NewString(), Key: "key-" + uuid.NewString(),
		Fingerprint: []byte("fp-1"), Plan: []byte("plan-1"),
	}
}

func (b *bundle) claimKey(t testing.TB, s *leasestore.Store, r leasestore.KeyRequest) *leasestore.KeyClaim {
	t.Helper()
	c, err := s.ClaimKey(b.ctx, r)
	require.NoError(t, err, "ClaimKey(%q, %q)", r.Principal, r.Key)
	return c
}

// fakeBroker records what keyed publishes sent: one plan per send.
type fakeBroker struct {
	mu   sync.Mutex
	sent []string
	// unbounded counts publishes whose context had no deadline within
	// the claim's hold (the suite's clock is not the real one, so a
	// deadline taken from the store's clock would be long past).
	unbounded int
}

func (f *fakeBroker) publish(result string) func(context.Context, []byte, bool) ([]byte, bool, error) {
	return func(ctx context.Context, plan []byte, _ bool) ([]byte, bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > leasestore.DefaultIdempotencyHold || ctx.Err() != nil {
			f.unbounded++
		}
		f.sent = append(f.sent, string(plan))
		return []byte(result), true, nil
	}
}

func (f *fakeBroker) sends() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

func testKeyClaimCompleteReplay(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	r := keyReq()
	t0 := b.clock.Now()
	c := b.claimKey(t, b.stores[0], r)
	require.Equal(t, leasestore.KeyClaimed, c.State)
	require.False(t, c.TakenOver)
	require.Equal(t, "plan-1", string(c.Plan))
	require.True(t, c.HoldUntil.Equal(t0.Add(leasestore.DefaultIdempotencyHold)), "HoldUntil %v", c.HoldUntil)
	require.True(t, c.Expires.Equal(t0.Add(leasestore.DefaultIdempotencyWindow)), "Expires %v", c.Expires)

	// A repeat on another client while the first is in progress: busy,
	// and told when the hold lapses.
	b.clock.Advance(10 * time.Second)
	r2 := r
	r2.Plan = []byte("plan-2") // a repeat plans its own ids; the first plan wins
	busy := b.claimKey(t, b.stores[1], r2)
	require.Equal(t, leasestore.KeyBusy, busy.State)
	require.True(t, busy.HoldUntil.Equal(c.HoldUntil))
	require.Equal(t, 20*time.Second, busy.RetryAfter(b.clock.Now()))

	require.NoError(t, b.stores[0].CompleteKey(b.ctx, c, []byte("result-1")))
	require.Equal(t, leasestore.KeyDone, c.State)
	for _, s := range b.stores {
		done := b.claimKey(t, s, r2)
		require.Equal(t, leasestore.KeyDone, done.State, "a repeat answers the first result")
		require.Equal(t, "result-1", string(done.Result))
		require.Equal(t, "plan-1", string(done.Plan))
	}
	// Still done long after any hold, until the window ends.
	b.clock.Advance(leasestore.DefaultIdempotencyWindow - time.Minute)
	require.Equal(t, leasestore.KeyDone, b.claimKey(t, b.store, r2).State)
	requireCode(t, herr.InvalidArgument, b.store.CompleteKey(b.ctx, c, []byte("again")))
	require.Equal(t, 1, countRecords(t, b, "i:"), "one record per key")
}

func testKeyReused(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	r := keyReq()
	c := b.claimKey(t, b.store, r)
	other := r
	other.Fingerprint = []byte("fp-2")
	_, err := b.store.ClaimKey(b.ctx, other)
	requireCode(t, herr.InvalidArgument, err)
	var reused *leasestore.KeyReusedError
	require.ErrorAs(t, err, &reused)
	require.NotContains(t, err.Error(), r.Key, "the key is not echoed")

	require.NoError(t, b.store.CompleteKey(b.ctx, c, []byte("result-1")))
	_, err = b.store.ClaimKey(b.ctx, other)
	require.ErrorAs(t, err, &reused, "a done key refuses another request too")
	done := b.claimKey(t, b.store, r)
	require.Equal(t, "result-1", string(done.Result), "the refusal changed nothing")
}

func testKeyPerPrincipal(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	key := "shared-" + uuid.NewString()
	// Pairs a naive concatenation of principal and key would confuse.
	for _, p := range [][2]string{{"ab", "c" + key}, {"a", "bc" + key}, {"abc", key}} {
		r := leasestore.KeyRequest{Principal: p[0], Key: p[1], Fingerprint: []byte(p[0]), Plan: []byte(p[0])}
		c := b.claimKey(t, b.store, r)
		require.Equal(t, leasestore.KeyClaimed, c.State, "principal %q key %q is its own", p[0], p[1])
		require.NoError(t, b.store.CompleteKey(b.ctx, c, []byte("result-"+p[0])))
	}
	for _, p := range [][2]string{{"ab", "c" + key}, {"a", "bc" + key}, {"abc", key}} {
		r := leasestore.KeyRequest{Principal: p[0], Key: p[1], Fingerprint: []byte(p[0])}
		c := b.claimKey(t, b.store, r)
		require.Equal(t, leasestore.KeyDone, c.State)
		require.Equal(t, "result-"+p[0], string(c.Result))
	}
	require.Equal(t, 3, countRecords(t, b, "i:"))
}

func testKeyExpiry(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	r := keyReq()
	r.Window = leasestore.MinIdempotencyWindow
	c := b.claimKey(t, b.store, r)
	require.NoError(t, b.store.CompleteKey(b.ctx, c, []byte("result-1")))
	long := keyReq() // the default window: outlives r
	lc := b.claimKey(t, b.store, long)
	require.NoError(t, b.store.CompleteKey(b.ctx, lc, []byte("long")))

	b.clock.Advance(leasestore.MinIdempotencyWindow - time.Millisecond)
	require.Equal(t, leasestore.KeyDone, b.claimKey(t, b.store, r).State, "remembered until the window ends")
	n, err := b.store.ReapKeys(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	b.clock.Advance(time.Millisecond)
	// Expired, whether or not the store deleted it yet: a claim starts
	// afresh, even for another request.
	other := r
	other.Fingerprint, other.Plan = []byte("fp-2"), []byte("plan-2")
	fresh := b.claimKey(t, b.store, other)
	require.Equal(t, leasestore.KeyClaimed, fresh.State)
	require.False(t, fresh.TakenOver)
	require.Equal(t, "plan-2", string(fresh.Plan))
	require.NoError(t, b.store.CompleteKey(b.ctx, fresh, []byte("result-2")))

	// The sweep deletes what expired and nothing else.
	b.clock.Advance(leasestore.MinIdempotencyWindow)
	require.Equal(t, 2, countRecords(t, b, "i:"))
	n, err = b.store.ReapKeys(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, countRecords(t, b, "i:"))
	require.Equal(t, "long", string(b.claimKey(t, b.store, long).Result))
	_, err = b.store.GetConsumer(b.ctx, b.consumer)
	require.NoError(t, err, "the sweep leaves other record kinds")

	// A record carries its expiry for the stores' own TTL: epoch seconds
	// (DynamoDB) and a timestamp (Firestore).
	for _, m := range allRecords(t, b) {
		if k, _ := m["key"].(string); strings.HasPrefix(k, "i:") {
			require.Contains(t, m, "ttl")
			require.Contains(t, m, "expire_at")
		}
	}
}

func testKeyRelease(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	r := keyReq()
	c := b.claimKey(t, b.store, r)
	require.NoError(t, b.store.ReleaseKey(b.ctx, c))
	require.Zero(t, countRecords(t, b, "i:"))
	other := r
	other.Fingerprint = []byte("fp-2")
	c2 := b.claimKey(t, b.store, other)
	require.Equal(t, leasestore.KeyClaimed, c2.State, "a released key is new again, for any request")
	requireCode(t, herr.InvalidArgument, b.store.ReleaseKey(b.ctx, c)) // released already
	requireCode(t, herr.InvalidArgument, b.store.ReleaseKey(b.ctx, &leasestore.KeyClaim{}))
}

func testKeyTakeover(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	r := keyReq()
	r.Hold = 10 * time.Second
	first := b.claimKey(t, b.stores[0], r)
	b.clock.Advance(10*time.Second - time.Millisecond)
	require.Equal(t, leasestore.KeyBusy, b.claimKey(t, b.stores[1], r).State)
	b.clock.Advance(time.Millisecond)
	r2 := r
	r2.Plan = []byte("plan-2")
	second := b.claimKey(t, b.stores[1], r2)
	require.Equal(t, leasestore.KeyClaimed, second.State)
	require.True(t, second.TakenOver)
	require.Equal(t, "plan-1", string(second.Plan), "a takeover publishes the first plan")
	require.Equal(t, leasestore.KeyBusy, b.claimKey(t, b.stores[0], r).State, "the takeover holds the key")

	// The first holder comes back too late: its result is not recorded,
	// and its release does not undo the takeover.
	requireCode(t, herr.Aborted, b.stores[0].CompleteKey(b.ctx, first, []byte("late")))
	require.NoError(t, b.stores[0].ReleaseKey(b.ctx, first))
	require.NoError(t, b.stores[1].CompleteKey(b.ctx, second, []byte("result-2")))
	done := b.claimKey(t, b.stores[0], r)
	require.Equal(t, leasestore.KeyDone, done.State)
	require.Equal(t, "result-2", string(done.Result))
}

// crashAt makes PublishOnce fail at point for key until the returned
// function is called.
func crashAt(t testing.TB, point, key string) (stop func()) {
	return injectFault(t, point, key)
}

// testKeyCrashBeforePublish: a crash after the claim and before the
// publish loses nothing and publishes once: the repeat is refused while
// the hold runs, then takes the key over and publishes the first plan.
func testKeyCrashBeforePublish(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	var broker fakeBroker
	r := keyReq()
	stop := crashAt(t, faults.KeyPublish, r.Key)
	_, err := b.stores[0].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("result-1")})
	require.ErrorIs(t, err, errInjected)
	stop()
	require.Empty(t, broker.sends(), "the crash came before the publish")

	r2 := r
	r2.Plan = []byte("plan-2")
	_, err = b.stores[1].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r2, Publish: broker.publish("result-2")})
	requireCode(t, herr.Aborted, err)
	var busy *leasestore.KeyBusyError
	require.ErrorAs(t, err, &busy)
	ra, ok := herr.RetryAfterOf(err)
	require.True(t, ok)
	require.Equal(t, leasestore.DefaultIdempotencyHold, ra)
	require.Empty(t, broker.sends(), "a repeat in the hold publishes nothing")

	b.clock.Advance(leasestore.DefaultIdempotencyHold)
	o, err := b.stores[1].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r2, Publish: broker.publish("result-2")})
	require.NoError(t, err)
	require.True(t, o.TakenOver)
	require.False(t, o.Replayed)
	require.NoError(t, o.RecordErr)
	require.Equal(t, []string{"plan-1"}, broker.sends(), "the event is not lost, and is published once")
	require.Zero(t, broker.unbounded, "the publish is bounded by the claim's hold")

	for _, s := range b.stores {
		o, err = s.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("result-3")})
		require.NoError(t, err)
		require.True(t, o.Replayed)
		require.Equal(t, "result-2", string(o.Result))
	}
	require.Equal(t, []string{"plan-1"}, broker.sends())
}

// testKeyCrashAfterPublish: a crash after the publish and before its
// result is recorded loses nothing; the takeover publishes the same plan
// again (the same event ids: at least once, never a new event).
func testKeyCrashAfterPublish(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	var broker fakeBroker
	r := keyReq()
	stop := crashAt(t, faults.KeyComplete, r.Key)
	_, err := b.stores[0].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("result-1")})
	require.ErrorIs(t, err, errInjected)
	stop()
	require.Equal(t, []string{"plan-1"}, broker.sends())

	r2 := r
	r2.Plan = []byte("plan-2")
	_, err = b.stores[1].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r2, Publish: broker.publish("result-2")})
	requireCode(t, herr.Aborted, err)
	require.Len(t, broker.sends(), 1, "a repeat in the hold publishes nothing")

	b.clock.Advance(leasestore.DefaultIdempotencyHold)
	o, err := b.stores[1].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r2, Publish: broker.publish("result-2")})
	require.NoError(t, err)
	require.True(t, o.TakenOver)
	require.Equal(t, []string{"plan-1", "plan-1"}, broker.sends(), "the same plan again, never a second plan")

	o, err = b.stores[0].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("result-3")})
	require.NoError(t, err)
	require.True(t, o.Replayed)
	require.Equal(t, "result-2", string(o.Result))
	require.Len(t, broker.sends(), 2)
}

func testKeyNothingPublished(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	r := keyReq()
	refused := func(context.Context, []byte, bool) ([]byte, bool, error) { return []byte("failed"), false, nil }
	o, err := b.store.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: refused})
	require.NoError(t, err)
	require.False(t, o.Replayed)
	require.Equal(t, "failed", string(o.Result))
	require.Zero(t, countRecords(t, b, "i:"), "nothing published: the key is released")

	broken := errors.New("broker down")
	_, err = b.store.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: func(context.Context, []byte, bool) ([]byte, bool, error) {
		return nil, false, broken
	}})
	require.ErrorIs(t, err, broken)
	require.Zero(t, countRecords(t, b, "i:"))

	var broker fakeBroker
	o, err = b.store.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("ok")})
	require.NoError(t, err)
	require.False(t, o.Replayed)
	require.Equal(t, []string{"plan-1"}, broker.sends(), "the retry publishes")
}

// testKeyRace: repeats of one key racing on two clients publish once; the
// others answer the first result or are told the key is busy.
func testKeyRace(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	var broker fakeBroker
	r := keyReq()
	const n = 8
	var (
		wg                  sync.WaitGroup
		mu                  sync.Mutex
		replayed, published int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := b.stores[i%2].PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("result")})
			mu.Lock()
			defer mu.Unlock()
			var busy *leasestore.KeyBusyError
			switch {
			case errors.As(err, &busy):
			case err != nil:
				t.Errorf("PublishOnce: %v", err)
			case o.Replayed:
				replayed++
			default:
				published++
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, published)
	require.Equal(t, []string{"plan-1"}, broker.sends())
	o, err := b.store.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: r, Publish: broker.publish("again")})
	require.NoError(t, err)
	require.True(t, o.Replayed)
	require.Equal(t, "result", string(o.Result))
}

func testKeyLimits(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	bad := func(mod func(*leasestore.KeyRequest)) {
		t.Helper()
		r := keyReq()
		mod(&r)
		_, err := b.store.ClaimKey(b.ctx, r)
		requireCode(t, herr.InvalidArgument, err)
	}
	bad(func(r *leasestore.KeyRequest) { r.Key = "" })
	bad(func(r *leasestore.KeyRequest) { r.Key = strings.Repeat("k", leasestore.MaxIdempotencyKeyLength+1) })
	bad(func(r *leasestore.KeyRequest) { r.Key = "tab\there" })
	bad(func(r *leasestore.KeyRequest) { r.Key = "clé" })
	bad(func(r *leasestore.KeyRequest) { r.Key = "del\x7f" })
	bad(func(r *leasestore.KeyRequest) { r.Principal = "" })
	bad(func(r *leasestore.KeyRequest) { r.Fingerprint = nil })
	bad(func(r *leasestore.KeyRequest) { r.Fingerprint = make([]byte, leasestore.MaxFingerprintBytes+1) })
	bad(func(r *leasestore.KeyRequest) { r.Window = leasestore.MinIdempotencyWindow - time.Second })
	bad(func(r *leasestore.KeyRequest) { r.Window = leasestore.MaxIdempotencyWindow + time.Second })
	bad(func(r *leasestore.KeyRequest) { r.Plan = make([]byte, leasestore.MaxIdempotencyRecordBytes+1) })
	require.Zero(t, countRecords(t, b, "i:"), "a refused claim writes nothing")

	// The edges are accepted: a 200-character key of every printable
	// character, windows of 1 minute and 7 days.
	var all []byte
	for c := byte(0x20); c <= 0x7e; c++ {
		all = append(all, c)
	}
	r := keyReq()
	r.Key = string(bytes.Repeat(all, 3)[:leasestore.MaxIdempotencyKeyLength])
	r.Window = leasestore.MaxIdempotencyWindow
	require.Equal(t, leasestore.KeyClaimed, b.claimKey(t, b.store, r).State)
	r = keyReq()
	r.Window = leasestore.MinIdempotencyWindow
	c := b.claimKey(t, b.store, r)
	requireCode(t, herr.InvalidArgument, b.store.CompleteKey(b.ctx, c, make([]byte, leasestore.MaxIdempotencyRecordBytes)))
	require.Equal(t, leasestore.KeyBusy, b.claimKey(t, b.store, r).State, "a refused completion writes nothing")
}

func testKeyLargePlan(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	r := keyReq()
	r.Plan = bytes.Repeat([]byte{0, 1, 0xfe, 0xff}, 200_000/4)
	result := bytes.Repeat([]byte{7}, leasestore.MaxIdempotencyRecordBytes-len(r.Plan))
	c := b.claimKey(t, b.store, r)
	require.NoError(t, b.store.CompleteKey(b.ctx, c, result))
	done := b.claimKey(t, b.store, r)
	require.Equal(t, leasestore.KeyDone, done.State)
	require.Equal(t, r.Plan, done.Plan)
	require.Equal(t, result, done.Result)
}
