package delivery_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/safedial"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

// sequences returns the sequence of each delivered event, in the order
// the receiver got them.
func sequences(t *testing.T, got []received) []string {
	t.Helper()
	out := make([]string, len(got))
	for i, r := range got {
		var ev struct{ Sequence string }
		require.NoError(t, json.Unmarshal(r.body, &ev))
		out[i] = ev.Sequence
	}
	return out
}

// TestWebhookOrdered: an ordered destination has one delivery in flight
// at a time, even with 10 workers configured, and a failed event holds
// back the ones behind it until its retry succeeds (they are delivered
// after it, in sequence). Without ordering, the events behind a failed
// one go on.
func TestWebhookOrdered(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		b := setupHooksN(t, "127.0.0.1/32", 10, 5*time.Second)
		b.recv.answer = func(n int) (int, http.Header) {
			if n == 1 {
				return http.StatusInternalServerError, nil
			}
			return http.StatusOK, nil
		}
		b.create(t, delivery.CreateWebhookParams{Ordered: ordered})
		b.publish(t, 4)
		rep := b.push(t)
		require.Equal(t, 1, rep.Failed, "ordered %v: %+v", ordered, rep)
		if !ordered {
			require.Equal(t, 3, rep.Delivered, "the events behind a failed one go on: %+v", rep)
			continue
		}
		require.Zero(t, rep.Delivered, "the events behind the failed one wait: %+v", rep)
		require.Len(t, b.recv.received(), 1)

		b.clock.Add(time.Second)
		require.Equal(t, delivery.PushReport{Destinations: 1}, *b.push(t), "nothing while the first waits for its retry")

		b.clock.Add(5 * time.Second)
		rep = b.push(t)
		require.Equal(t, 4, rep.Delivered, "%+v", rep)
		got := b.recv.received()
		seq := sequences(t, got)
		require.Len(t, seq, 5)
		require.Equal(t, seq[0], seq[1], "the retry comes first")
		require.IsIncreasing(t, seq[1:], "then the others, in sequence")
		b.recv.mu.Lock()
		require.Equal(t, 1, b.recv.maxInFlight, "one delivery in flight at a time")
		b.recv.mu.Unlock()
	}
}

// TestWebhookRateLimit: a destination's rate limit spaces its deliveries
// by 1/rate on the service's clock, whatever the concurrency, and a
// destination without one is not waited for.
func TestWebhookRateLimit(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		sleeps []time.Duration
	)
	b := setupHooksWith(t, "127.0.0.1/32", func(c *delivery.WebhookConfig, clock *hookClock) {
		c.Concurrency = 1
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			sleeps = append(sleeps, d)
			mu.Unlock()
			clock.Add(d)
			return ctx.Err()
		}
	})
	b.create(t, delivery.CreateWebhookParams{RateLimit: 2})
	b.publish(t, 4)
	require.Equal(t, 4, b.push(t).Delivered)
	got := b.recv.received()
	require.Len(t, got, 4)
	for i := 1; i < len(got); i++ {
		require.Equal(t, 500*time.Millisecond, got[i].at.Sub(got[i-1].at), "delivery %d comes 1/rate after the one before", i)
	}

	// A rate change by PATCH applies from the next run on.
	cs, err := b.svc.ListDestinations(t.Context(), hookAdmin)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	_, w, err := b.svc.UpdateWebhookDestination(t.Context(), hookAdmin, cs[0].ID, delivery.PolicyFields{}, delivery.WebhookChanges{RateLimit: new(0.25)})
	require.NoError(t, err)
	require.InDelta(t, 0.25, w.RateLimit, 1e-9)
	b.publish(t, 2)
	require.Equal(t, 2, b.push(t).Delivered)
	got = b.recv.received()
	require.Equal(t, 4*time.Second, got[5].at.Sub(got[4].at))

	mu.Lock()
	n := len(sleeps)
	mu.Unlock()
	_, _, err = b.svc.UpdateWebhookDestination(t.Context(), hookAdmin, cs[0].ID, delivery.PolicyFields{}, delivery.WebhookChanges{RateLimit: new(0.0)})
	require.NoError(t, err)
	b.publish(t, 3)
	require.Equal(t, 3, b.push(t).Delivered)
	mu.Lock()
	require.Equal(t, n, len(sleeps), "no limit, no wait")
	mu.Unlock()
}

// TestWebhookCircuitBreaker: on a fake clock, the threshold-th failure in
// a row opens the endpoint's breaker: the run stops, and later runs make
// no attempt (the events wait, none is dead-lettered or counted) until
// the cool-down ends; then one probe goes through. A failed probe opens
// the breaker for another cool-down; a successful one closes it and
// every waiting event is delivered. Two runs at once probe once. A new
// URL closes the breaker.
func TestWebhookCircuitBreaker(t *testing.T) {
	t.Parallel()
	b := setupHooksWith(t, "127.0.0.1/32", func(c *delivery.WebhookConfig, _ *hookClock) {
		c.Concurrency, c.Schedule = 1, []time.Duration{time.Second}
		c.BreakerThreshold, c.BreakerCooldown = 3, time.Minute
	})
	var failing atomic.Bool
	failing.Store(true)
	b.recv.answer = func(int) (int, http.Header) {
		if failing.Load() {
			return http.StatusInternalServerError, nil
		}
		return http.StatusNoContent, nil
	}
	// Three attempts per event: had the breaker's waits counted, the
	// events would be dead-lettered by the end.
	c := b.create(t, delivery.CreateWebhookParams{Policies: leasestore.Policies{MaxDeliveryAttempts: 3}})
	id := c.Consumer.ID
	b.publish(t, 5)
	webhook := func() *leasestore.Webhook {
		w, err := b.svc.GetWebhook(t.Context(), hookAdmin, id)
		require.NoError(t, err)
		return w
	}

	rep := b.push(t)
	require.Equal(t, delivery.PushReport{Destinations: 1, Failed: 3, Open: 1}, *rep, "the third failure opens it")
	opened := b.clock.Now()
	w := webhook()
	require.Equal(t, 3, w.Failures)
	require.Equal(t, opened, w.OpenedAt)

	b.clock.Add(59 * time.Second) // every retry is due, the cool-down is not over
	require.Equal(t, delivery.PushReport{Open: 1}, *b.push(t))
	require.Len(t, b.recv.received(), 3, "no attempt while open")

	// After the cool-down two runs at once: one probe between them.
	b.clock.Add(2 * time.Second)
	var wg sync.WaitGroup
	reps := make([]*delivery.PushReport, 2)
	for i := range reps {
		wg.Go(func() {
			r, err := b.svc.PushWebhooks(t.Context(), hookAdmin, 0)
			require.NoError(t, err)
			reps[i] = r
		})
	}
	wg.Wait()
	require.Equal(t, 1, reps[0].Failed+reps[1].Failed, "one probe: %+v %+v", *reps[0], *reps[1])
	require.Len(t, b.recv.received(), 4)
	w = webhook()
	require.Equal(t, 4, w.Failures)
	require.Equal(t, b.clock.Now(), w.OpenedAt, "the failed probe opens it for another cool-down")
	require.Equal(t, delivery.PushReport{Open: 1}, *b.push(t))

	failing.Store(false)
	b.clock.Add(time.Minute)
	rep = b.push(t)
	require.Equal(t, 5, rep.Delivered, "the probe closes it and every waiting event goes: %+v", rep)
	require.Zero(t, rep.Failed+rep.Open)
	w = webhook()
	require.Zero(t, w.Failures)
	require.True(t, w.OpenedAt.IsZero())
	dls, _, err := b.svc.ListDeadLetters(t.Context(), hookAdmin, 10, "")
	require.NoError(t, err)
	require.Empty(t, dls, "no event was lost")
	d, err := b.svc.GetDestination(t.Context(), hookAdmin, id)
	require.NoError(t, err)
	require.EqualValues(t, 5, d.Committed)

	// Open it again, then a new URL closes it.
	failing.Store(true)
	b.publish(t, 3)
	require.Equal(t, 1, b.push(t).Open)
	require.False(t, webhook().OpenedAt.IsZero())
	url := b.recv.srv.URL + "/elsewhere"
	_, got, err := b.svc.UpdateWebhookDestination(t.Context(), hookAdmin, id, delivery.PolicyFields{}, delivery.WebhookChanges{URL: &url})
	require.NoError(t, err)
	require.Equal(t, url, got.URL)
	require.Zero(t, got.Failures)
	require.True(t, got.OpenedAt.IsZero())
}

// TestWebhookAttemptLog: every attempt of a run is in the destination's
// attempt log once the run is over, newest first, with its status,
// latency, the first 1 KiB of the answer's body, or the error of an
// attempt without an answer; never the secret or the URL's query. It is
// bounded to the last 100, and a principal without manage:destinations
// may not read it.
func TestWebhookAttemptLog(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32", time.Second)
	b.recv.answer = func(n int) (int, http.Header) {
		if n == 1 {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, nil
	}
	c := b.create(t, delivery.CreateWebhookParams{})
	id := c.Consumer.ID
	as, err := b.svc.WebhookAttempts(t.Context(), hookAdmin, id)
	require.NoError(t, err)
	require.Empty(t, as)

	b.publish(t, 1)
	require.Equal(t, 1, b.push(t).Failed)
	b.clock.Add(2 * time.Second)
	require.Equal(t, 1, b.push(t).Delivered)
	as, err = b.svc.WebhookAttempts(t.Context(), hookAdmin, id)
	require.NoError(t, err)
	require.Len(t, as, 2)
	got := b.recv.received()
	require.Equal(t, 200, as[0].Status, "newest first")
	require.EqualValues(t, 2, as[0].Attempt)
	require.Equal(t, 500, as[1].Status)
	require.EqualValues(t, 1, as[1].Attempt)
	require.Equal(t, got[0].id, as[0].WebhookID)
	require.Equal(t, got[0].id, as[1].WebhookID)
	require.Equal(t, b.clock.Now(), as[0].At)
	require.Equal(t, 1, as[0].Events)
	require.GreaterOrEqual(t, as[0].Latency, time.Duration(0))

	// A long answer is cut to 1 KiB; a refused connection has its error.
	long := strings.Repeat("é", 700) // 1,400 bytes
	b2 := setupHooks(t, "")
	port := b2.recv.srv.URL[strings.LastIndex(b2.recv.srv.URL, ":")+1:]
	refused := b2.create(t, delivery.CreateWebhookParams{URL: "https://localhost:" + port + "/hook?token=receiver-token"})
	b2.publish(t, 1)
	require.Equal(t, 1, b2.push(t).Failed)
	as, err = b2.svc.WebhookAttempts(t.Context(), hookAdmin, refused.Consumer.ID)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Zero(t, as[0].Status)
	require.Contains(t, as[0].Error, "loopback")

	b.recv.mu.Lock()
	b.recv.text = long
	b.recv.answer = func(int) (int, http.Header) { return http.StatusBadRequest, nil }
	b.recv.mu.Unlock()
	b.publish(t, 1)
	require.Equal(t, 1, b.push(t).Failed)
	as, err = b.svc.WebhookAttempts(t.Context(), hookAdmin, id)
	require.NoError(t, err)
	require.Equal(t, 400, as[0].Status)
	require.LessOrEqual(t, len(as[0].Body), leasestore.MaxWebhookAttemptBody)
	require.True(t, strings.HasPrefix(long, strings.TrimSuffix(as[0].Body, "\uFFFD")), "the body's start")
	require.True(t, utf8.ValidString(as[0].Body))
	for _, a := range append(as, must(b2.svc.WebhookAttempts(t.Context(), hookAdmin, refused.Consumer.ID))...) {
		for _, text := range []string{a.Body, a.Error, a.WebhookID} {
			require.NotContains(t, text, "receiver-token", "never the URL's query")
			require.NotContains(t, text, "whsec_", "never the secret")
		}
	}

	_, err = b.svc.WebhookAttempts(t.Context(), &auth.Principal{ID: "reader", Permissions: []string{auth.PermReadEvents}}, id)
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err))
	_, err = b.svc.WebhookAttempts(t.Context(), hookAdmin, "no-such-destination")
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
}

// TestWebhookAttemptLogBounded: a run of more than 100 attempts leaves
// the last 100.
func TestWebhookAttemptLogBounded(t *testing.T) {
	t.Parallel()
	b := setupHooksN(t, "127.0.0.1/32", 10)
	c := b.create(t, delivery.CreateWebhookParams{})
	for i := range leasestore.MaxWebhookAttempts + 20 {
		_, err := b.svc.Publish(t.Context(), hookAdmin, delivery.Event{EventType: "orders.created", Message: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)})
		require.NoError(t, err)
	}
	require.Equal(t, leasestore.MaxWebhookAttempts+20, b.push(t).Delivered)
	as, err := b.svc.WebhookAttempts(t.Context(), hookAdmin, c.Consumer.ID)
	require.NoError(t, err)
	require.Len(t, as, leasestore.MaxWebhookAttempts)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestWebhookPushStoreCost measures, with DynamoDB's billing rules
// (storetest.Meter), what one webhook delivery costs the lease store in
// a push run that delivers n events one per request, and holds it to the
// figures docs/webhooks.md gives: the lease (pull) and its commit
// (acknowledge), the read of the webhook record before each delivery, and
// the attempt log's one write per run.
func TestWebhookPushStoreCost(t *testing.T) {
	t.Parallel()
	const n = 50
	m := storetest.NewMeter()
	policy, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(t, err)
	recv := newReceiver(t)
	svc := inmem.New(t, inmem.Options{AckDeadline: time.Hour, WrapCollection: m.Wrap, Config: delivery.Config{
		Logger: slog.New(slog.DiscardHandler),
		Webhooks: delivery.WebhookConfig{Policy: policy, Concurrency: 1, Transport: func(tr *http.Transport) {
			tr.TLSClientConfig = recv.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			tr.TLSClientConfig.ServerName = "example.com"
		}},
	}})
	_, err = svc.CreateWebhook(t.Context(), hookAdmin, delivery.CreateWebhookParams{URL: recv.srv.URL})
	require.NoError(t, err)
	for i := range n {
		_, err := svc.Publish(t.Context(), hookAdmin, delivery.Event{EventType: "cost", Message: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)})
		require.NoError(t, err)
	}
	m.Reset()
	rep, err := svc.PushWebhooks(t.Context(), hookAdmin, 0)
	require.NoError(t, err)
	require.Equal(t, n, rep.Delivered)
	r := m.Report()
	per := func(v int64) float64 { return float64(v) / n }
	t.Logf("per delivery: %.2f writes (%.2f WU), %.2f reads (%.2f RU), %.2f queries; failed conditional writes %d",
		per(r.Writes), per(r.WriteUnits), per(r.Reads), per(r.ReadUnits), per(r.Queries), r.FailedWrites)
	// Measured: 5.02 writes (7.08 WU), 4.06 reads (4.06 RU) per delivery.
	require.LessOrEqual(t, per(r.Writes), 5.5, "%+v", r)
	require.LessOrEqual(t, per(r.WriteUnits), 8.0, "%+v", r)
	require.LessOrEqual(t, per(r.Reads), 4.5, "%+v", r)
}
