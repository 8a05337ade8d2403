package delivery_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/safedial"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
)

var hookAdmin = &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}

// hookClock is a clock the test moves; the store and the service share it,
// so retry waits pass without sleeping.
type hookClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *hookClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *hookClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// receiver is a real HTTPS endpoint that verifies every delivery with the
// Standard Webhooks reference library and answers what answer says.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret []string // verifies with any of these
	got    []received
	answer func(n int) (status int, header http.Header)
	hang   chan struct{}
	now    func() time.Time // the test's clock, for received.at
	text   string           // the answers' body
	// inFlight and maxInFlight count the requests being answered.
	inFlight, maxInFlight int
}

type received struct {
	id, contentType string
	body            []byte
	signatures      int
	verifiedBy      []int     // indexes into secret
	at              time.Time // on the test's clock
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, answer: func(int) (int, http.Header) { return http.StatusNoContent, nil }}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	require.NoError(r.t, err)
	r.mu.Lock()
	rec := received{id: req.Header.Get("webhook-id"), contentType: req.Header.Get("Content-Type"), body: body,
		signatures: len(strings.Fields(req.Header.Get("webhook-signature")))}
	for i, s := range r.secret {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(r.t, err)
		// The test's clock is not the wall clock: check the signature,
		// not the timestamp's tolerance.
		if wh.VerifyIgnoringTimestamp(body, req.Header) == nil {
			rec.verifiedBy = append(rec.verifiedBy, i)
		}
	}
	if r.now != nil {
		rec.at = r.now()
	}
	r.got = append(r.got, rec)
	n := len(r.got)
	hang := r.hang
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	if hang != nil {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
		// A hung endpoint never answers: abort the connection rather
		// than let net/http write an implicit 200 that a client still
		// reading could take for a success.
		panic(http.ErrAbortHandler)
	}
	status, h := r.answer(n)
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	r.mu.Lock()
	text := r.text
	r.mu.Unlock()
	_, _ = io.WriteString(w, text)
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *receiver) trust(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = secrets
}

type hookBundle struct {
	svc   *inmem.Service
	clock *hookClock
	recv  *receiver
	logs  *bytes.Buffer
}

func setupHooks(t *testing.T, allow string, schedule ...time.Duration) *hookBundle {
	t.Helper()
	return setupHooksN(t, allow, 1, schedule...)
}

func setupHooksN(t *testing.T, allow string, concurrency int, schedule ...time.Duration) *hookBundle {
	t.Helper()
	return setupHooksWith(t, allow, func(c *delivery.WebhookConfig, _ *hookClock) {
		c.Concurrency, c.Schedule = concurrency, schedule
	})
}

// setupHooksWith is setupHooks with the webhook configuration that tune
// makes (it may use the test's clock).
func setupHooksWith(t *testing.T, allow string, tune func(*delivery.WebhookConfig, *hookClock)) *hookBundle {
	t.Helper()
	policy, err := safedial.ParseAllowList(allow)
	require.NoError(t, err)
	recv := newReceiver(t)
	clock := &hookClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	logs := &bytes.Buffer{}
	var logMu sync.Mutex
	recv.now = clock.Now
	hooks := delivery.WebhookConfig{
		Policy: policy,
		Transport: func(tr *http.Transport) {
			tr.TLSClientConfig = recv.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			tr.TLSClientConfig.ServerName = "example.com"
		},
	}
	tune(&hooks, clock)
	svc := inmem.New(t, inmem.Options{AckDeadline: time.Hour, Config: delivery.Config{
		Now:      clock.Now,
		Logger:   slog.New(slog.NewTextHandler(lockedWriter{&logMu, logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Webhooks: hooks,
	}})
	return &hookBundle{svc: svc, clock: clock, recv: recv, logs: logs}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *hookBundle) create(t *testing.T, p delivery.CreateWebhookParams) *delivery.CreatedWebhook {
	t.Helper()
	if p.URL == "" {
		p.URL = b.recv.srv.URL + "/hook?token=receiver-token"
	}
	c, err := b.svc.CreateWebhook(t.Context(), hookAdmin, p)
	require.NoError(t, err)
	b.recv.trust(c.Secret)
	return c
}

func (b *hookBundle) publish(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		_, err := b.svc.Publish(t.Context(), hookAdmin, delivery.Event{EventType: "orders.created", Message: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`)})
		require.NoError(t, err)
	}
}

func (b *hookBundle) push(t *testing.T) *delivery.PushReport {
	t.Helper()
	rep, err := b.svc.PushWebhooks(t.Context(), hookAdmin, 0)
	require.NoError(t, err)
	return rep
}

// TestWebhookDelivers: each event is POSTed alone as a CloudEvent with its
// sequence, signed so that the reference library verifies it, with the
// event's id as webhook-id; the 2xx answers commit the cursor as ok
// acknowledgements do. A pull or acknowledge on the destination is 400
// (Malformed), as for any other non-durable-consumer type.
func TestWebhookDelivers(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32")
	c := b.create(t, delivery.CreateWebhookParams{})
	require.Equal(t, leasestore.TypeWebhook, c.Consumer.Type)
	require.True(t, strings.HasPrefix(c.Secret, "whsec_"))
	b.publish(t, 3)

	rep := b.push(t)
	require.Equal(t, delivery.PushReport{Destinations: 1, Delivered: 3, Events: 3}, *rep)
	got := b.recv.received()
	require.Len(t, got, 3)
	for i, r := range got {
		require.Equal(t, []int{0}, r.verifiedBy, "delivery %d verifies", i)
		require.Equal(t, "application/cloudevents+json", r.contentType)
		var ev struct{ ID, Type, Sequence string }
		require.NoError(t, json.Unmarshal(r.body, &ev))
		require.Equal(t, ev.ID, r.id)
		require.Equal(t, "orders.created", ev.Type)
		require.NotEmpty(t, ev.Sequence)
	}
	d, err := b.svc.GetDestination(t.Context(), hookAdmin, c.Consumer.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, d.Committed)
	require.Zero(t, d.InFlight)

	require.Equal(t, delivery.PushReport{Destinations: 1}, *b.push(t), "caught up: nothing more")

	_, err = b.svc.Pull(t.Context(), hookAdmin, delivery.PullRequest{Destination: c.Consumer.ID, Limit: 1, Visibility: time.Minute})
	require.Equal(t, herr.Malformed, herr.CodeOf(err))

	w, err := b.svc.GetWebhook(t.Context(), hookAdmin, c.Consumer.ID)
	require.NoError(t, err)
	require.Empty(t, w.Secrets, "the secret is shown once")
}

// TestWebhookConcurrentWorkers: with several workers per destination,
// one that finds the destination caught up does not cut off another's
// delivery under way: every event is delivered in one push.
func TestWebhookConcurrentWorkers(t *testing.T) {
	t.Parallel()
	b := setupHooksN(t, "127.0.0.1/32", 10)
	b.create(t, delivery.CreateWebhookParams{})
	b.publish(t, 3)
	rep := b.push(t)
	require.Equal(t, 3, rep.Delivered, "%+v", rep)
	require.Zero(t, rep.Failed)
	require.Len(t, b.recv.received(), 3)
}

// TestWebhookBatch: with max_batch the events go as one CloudEvents batch,
// webhook-id the lease's.
func TestWebhookBatch(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32")
	b.create(t, delivery.CreateWebhookParams{MaxBatch: 10})
	b.publish(t, 4)
	rep := b.push(t)
	require.Equal(t, 4, rep.Events)
	got := b.recv.received()
	require.NotEmpty(t, got)
	n := 0
	for _, r := range got {
		require.Equal(t, "application/cloudevents-batch+json", r.contentType)
		require.Equal(t, []int{0}, r.verifiedBy)
		var evs []map[string]any
		require.NoError(t, json.Unmarshal(r.body, &evs))
		n += len(evs)
	}
	require.Equal(t, 4, n)
}

// TestWebhookRetryScheduleAndDeadLetter: a failing endpoint is retried on
// the schedule, not before each wait (nor past its tenth of jitter), with
// the same webhook-id every time; after the last attempt the event is in
// the dead-letter queue, from where a replay delivers it again.
func TestWebhookRetryScheduleAndDeadLetter(t *testing.T) {
	t.Parallel()
	schedule := []time.Duration{5 * time.Second, 5 * time.Minute}
	b := setupHooks(t, "127.0.0.1/32", schedule...)
	var failing atomic.Bool
	failing.Store(true)
	b.recv.answer = func(int) (int, http.Header) {
		if failing.Load() {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, nil
	}
	c := b.create(t, delivery.CreateWebhookParams{})
	b.publish(t, 1)

	require.Equal(t, 1, b.push(t).Failed, "attempt 1 at once")
	for _, wait := range schedule {
		before := len(b.recv.received())
		b.clock.Add(wait - time.Millisecond)
		require.Zero(t, b.push(t).Failed, "not before the wait")
		require.Len(t, b.recv.received(), before)
		b.clock.Add(wait/10 + time.Second)
		require.Equal(t, 1, b.push(t).Failed, "after the wait")
	}
	got := b.recv.received()
	require.Len(t, got, 3)
	require.Equal(t, got[0].id, got[1].id)
	require.Equal(t, got[0].id, got[2].id)

	rep := b.push(t)
	require.Zero(t, rep.Failed+rep.Delivered, "the third attempt was the last")
	dls, _, err := b.svc.ListDeadLetters(t.Context(), hookAdmin, 10, "")
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Equal(t, c.Consumer.ID, dls[0].OriginQueue)
	require.Equal(t, leasestore.ReasonDeliveryLimit, dls[0].Reason)
	require.EqualValues(t, 3, dls[0].DeliveryCount)

	failing.Store(false)
	res, err := b.svc.ActOnDeadLetters(t.Context(), hookAdmin, []delivery.DeadLetterRequest{{ID: dls[0].ID, Action: delivery.ActionReplay}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, 1, b.push(t).Delivered, "a replayed event is delivered again")
}

// TestWebhookRetryAfter: 429 and 503 answers' Retry-After sets the wait.
func TestWebhookRetryAfter(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32", time.Second)
	b.recv.answer = func(n int) (int, http.Header) {
		if n == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}}
		}
		return http.StatusOK, nil
	}
	b.create(t, delivery.CreateWebhookParams{})
	b.publish(t, 1)
	require.Equal(t, 1, b.push(t).Failed)
	b.clock.Add(119 * time.Second)
	require.Zero(t, b.push(t).Delivered, "the schedule's 1 s does not apply")
	b.clock.Add(2 * time.Second)
	require.Equal(t, 1, b.push(t).Delivered)
}

// TestWebhookTimeout: an endpoint that does not answer within the
// destination's timeout fails the attempt; the push is not held.
func TestWebhookTimeout(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32")
	b.recv.hang = make(chan struct{})
	defer close(b.recv.hang)
	b.create(t, delivery.CreateWebhookParams{Timeout: time.Second})
	b.publish(t, 1)
	rep := b.push(t)
	require.Equal(t, 1, rep.Failed, "report %+v; log:\n%s", *rep, b.logs.String())
	require.Contains(t, b.logs.String(), "did not answer within the timeout")
}

// TestWebhookGone: 410 disables the destination; pushes skip it until it
// is enabled again, and its event waits, not lost.
func TestWebhookGone(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32")
	var gone atomic.Bool
	gone.Store(true)
	b.recv.answer = func(int) (int, http.Header) {
		if gone.Load() {
			return http.StatusGone, nil
		}
		return http.StatusOK, nil
	}
	c := b.create(t, delivery.CreateWebhookParams{})
	b.publish(t, 2)
	rep := b.push(t)
	require.Equal(t, 1, rep.Disabled)
	w, err := b.svc.GetWebhook(t.Context(), hookAdmin, c.Consumer.ID)
	require.NoError(t, err)
	require.Contains(t, w.Disabled, "410")
	require.Equal(t, delivery.PushReport{}, *b.push(t))
	require.Len(t, b.recv.received(), 1)

	gone.Store(false)
	require.NoError(t, b.svc.EnableWebhook(t.Context(), hookAdmin, c.Consumer.ID))
	require.Equal(t, 2, b.push(t).Delivered)
}

// TestWebhookSSRF: a URL of a refused kind is refused at creation; one
// whose name resolves to loopback passes creation (no lookup then) and
// is refused at connect time, every attempt, never reaching the receiver.
func TestWebhookSSRF(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "")
	for _, u := range []string{b.recv.srv.URL, "https://169.254.169.254/latest/meta-data", "https://[::1]/", "https://10.0.0.8/", "http://example.com/"} {
		_, err := b.svc.CreateWebhook(t.Context(), hookAdmin, delivery.CreateWebhookParams{URL: u})
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), u)
	}
	port := b.recv.srv.URL[strings.LastIndex(b.recv.srv.URL, ":")+1:]
	b.create(t, delivery.CreateWebhookParams{URL: "https://localhost:" + port + "/hook"})
	b.publish(t, 1)
	require.Equal(t, 1, b.push(t).Failed)
	require.Empty(t, b.recv.received())
	require.Contains(t, b.logs.String(), "loopback")
}

// TestWebhookRotation: after a rotation each delivery carries two
// signatures, the new secret's and the old one's, until the old one's
// overlap ends; then only the new one signs.
func TestWebhookRotation(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32")
	c := b.create(t, delivery.CreateWebhookParams{})
	old := c.Secret
	fresh, err := b.svc.RotateWebhookSecret(t.Context(), hookAdmin, c.Consumer.ID, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, old, fresh)
	b.recv.trust(old, fresh)
	b.publish(t, 1)
	b.push(t)
	got := b.recv.received()
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].signatures)
	require.Equal(t, []int{0, 1}, got[0].verifiedBy)

	b.clock.Add(time.Hour)
	b.publish(t, 1)
	b.push(t)
	got = b.recv.received()
	require.Len(t, got, 2)
	require.Equal(t, 1, got[1].signatures)
	require.Equal(t, []int{1}, got[1].verifiedBy, "the old secret no longer signs")
}

// TestWebhookSecretNeverLogged: through creation, rotation, failures,
// refusals and deletion, no log line holds a secret or the URL's query.
func TestWebhookSecretNeverLogged(t *testing.T) {
	t.Parallel()
	b := setupHooks(t, "127.0.0.1/32", time.Second)
	b.recv.answer = func(int) (int, http.Header) { return http.StatusBadGateway, nil }
	c := b.create(t, delivery.CreateWebhookParams{})
	fresh, err := b.svc.RotateWebhookSecret(t.Context(), hookAdmin, c.Consumer.ID, 0)
	require.NoError(t, err)
	b.publish(t, 2)
	require.Equal(t, 2, b.push(t).Failed)
	require.NoError(t, b.svc.DeleteDestination(t.Context(), hookAdmin, c.Consumer.ID))
	logs := b.logs.String()
	require.Contains(t, logs, "webhook delivery failed", "the test saw the failure lines")
	for _, s := range []string{c.Secret, fresh} {
		require.NotContains(t, logs, strings.TrimPrefix(s, "whsec_"))
	}
	require.NotContains(t, logs, "receiver-token")
}

// BenchmarkWebhookPush measures one dispatcher: b.N events published to
// one webhook destination on the in-memory stack, then pushed, one event
// per request, to a receiver on loopback that answers 204 at once. It
// reports deliveries per second.
func BenchmarkWebhookPush(b *testing.B) {
	policy, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(b, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	svc := inmem.New(b, inmem.Options{AckDeadline: time.Hour, Config: delivery.Config{
		Logger:   slog.New(slog.DiscardHandler),
		Webhooks: delivery.WebhookConfig{Policy: policy},
	}})
	_, err = svc.CreateWebhook(b.Context(), hookAdmin, delivery.CreateWebhookParams{URL: srv.URL})
	require.NoError(b, err)
	for range b.N {
		_, err := svc.Publish(b.Context(), hookAdmin, delivery.Event{EventType: "bench.push", Message: json.RawMessage(`{"n":1}`)})
		require.NoError(b, err)
	}
	b.ResetTimer()
	start := time.Now()
	rep, err := svc.PushWebhooks(b.Context(), hookAdmin, 0)
	require.NoError(b, err)
	elapsed := time.Since(start)
	require.Equal(b, b.N, rep.Delivered)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
}
