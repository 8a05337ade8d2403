package local_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/internal/safedial"
	"github.com/heraldevents/herald/local"
)

// hookSchedule is the retry schedule of TestWebhooksRealPairE2E: seconds
// instead of delivery.DefaultWebhookSchedule's minutes, so that the test
// waits on the wall clock without sleeping long.
var hookSchedule = []time.Duration{time.Second, 2 * time.Second}

// hookWait bounds each wait for a condition: generous for a loaded
// machine, never a delay the test expects.
const hookWait = 60 * time.Second

// hookArrival is one request the receiver took.
type hookArrival struct {
	at     time.Time // wall clock, on arrival
	id     string    // webhook-id
	body   []byte
	verify error // the Standard Webhooks library's verdict, timestamp included
	status int   // what the receiver answered; 0 when it hung up
}

// hookReceiver is a real HTTPS endpoint with a self-signed certificate
// that only the test (and, through local.Config.WebhookTransport, Herald)
// trusts. Each path is an endpoint of its own: it verifies every request
// with the Standard Webhooks reference library and the secret its
// destination was created with, and answers what its answer function says
// for the nth request (0: hang until the client gives up).
type hookReceiver struct {
	t       *testing.T
	srv     *httptest.Server
	stop    chan struct{} // closed when the test ends: hung requests return
	mu      sync.Mutex
	secret  map[string]string
	answer  map[string]func(n int) int
	arrived map[string][]hookArrival
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{t: t, stop: make(chan struct{}), secret: map[string]string{},
		answer: map[string]func(int) int{}, arrived: map[string][]hookArrival{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() { close(r.stop) }) // runs first: Close waits for hung handlers
	return r
}

// trust makes Herald's webhook client trust the receiver's certificate
// (local.Config.WebhookTransport).
func (r *hookReceiver) trust(tr *http.Transport) {
	tr.TLSClientConfig = r.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tr.TLSClientConfig.ServerName = "example.com" // a name httptest's certificate holds
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	path := req.URL.Path
	r.mu.Lock()
	a := hookArrival{at: time.Now(), id: req.Header.Get("webhook-id"), body: body}
	if wh, err := standardwebhooks.NewWebhook(r.secret[path]); err != nil {
		a.verify = err
	} else {
		a.verify = wh.Verify(body, req.Header)
	}
	answer := r.answer[path]
	n := len(r.arrived[path]) + 1
	status := http.StatusNoContent
	if answer != nil {
		status = answer(n)
	}
	a.status = status
	r.arrived[path] = append(r.arrived[path], a)
	r.mu.Unlock()
	if status == 0 {
		select {
		case <-req.Context().Done():
		case <-r.stop:
		}
		panic(http.ErrAbortHandler) // never an implicit 200
	}
	w.WriteHeader(status)
}

// set gives path its answers and its destination's secret.
func (r *hookReceiver) set(path, secret string, answer func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret[path], r.answer[path] = secret, answer
}

func (r *hookReceiver) got(path string) []hookArrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookArrival(nil), r.arrived[path]...)
}

// waitFor polls cond until it holds, failing the test after hookWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hookWait)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waited %s for: %s", hookWait, what)
		time.Sleep(20 * time.Millisecond)
	}
}

// hookDest is the part of a WEBHOOK destination's REST shape the test reads.
type hookDest struct {
	ID      string `json:"id"`
	Secret  string `json:"secret"`
	Webhook struct {
		URL                 string `json:"url"`
		ConsecutiveFailures int    `json:"consecutive_failures"`
		Disabled            string `json:"disabled"`
	} `json:"webhook"`
}

type hookAttempt struct {
	At        time.Time `json:"at"`
	WebhookID string    `json:"webhook_id"`
	Attempt   int64     `json:"attempt"`
	Status    int       `json:"status"`
	Error     string    `json:"error"`
}

// createHook makes a WEBHOOK destination for eventType at the receiver's
// path, with extra members, and tells the receiver its secret.
func createHook(t *testing.T, c *client, r *hookReceiver, path, eventType string, answer func(int) int, extra map[string]any) hookDest {
	t.Helper()
	body := map[string]any{"type": "WEBHOOK", "url": r.srv.URL + path,
		"filter_groups": []any{map[string]any{"event_type": eventType}}}
	for k, v := range extra {
		body[k] = v
	}
	var d hookDest
	c.expect(t, http.StatusCreated, "POST", "/v1/event-destinations", body).decode(t, &d)
	require.True(t, strings.HasPrefix(d.Secret, "whsec_"), "the create answer carries the signing secret")
	r.set(path, d.Secret, answer)
	return d
}

func getHook(t *testing.T, c *client, id string) hookDest {
	t.Helper()
	var d hookDest
	c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id, nil).decode(t, &d)
	return d
}

// attempts returns a webhook's attempts, oldest first.
func attempts(t *testing.T, c *client, id string) []hookAttempt {
	t.Helper()
	var out struct {
		Attempts []hookAttempt `json:"attempts"`
	}
	c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id+"/attempts", nil).decode(t, &out)
	for i, j := 0, len(out.Attempts)-1; i < j; i, j = i+1, j-1 {
		out.Attempts[i], out.Attempts[j] = out.Attempts[j], out.Attempts[i]
	}
	return out.Attempts
}

// requireSigned: every arrival verifies with the Standard Webhooks
// library (signature and timestamp) and carries the published message.
func requireSigned(t *testing.T, as []hookArrival, message string) {
	t.Helper()
	for i, a := range as {
		require.NoError(t, a.verify, "arrival %d does not verify", i)
		require.NotEmpty(t, a.id, "arrival %d has no webhook-id", i)
		require.True(t, json.Valid(a.body), "arrival %d: %s", i, a.body)
		require.Contains(t, string(a.body), message, "arrival %d", i)
	}
}

// natsStream returns the topic URL of a JetStream stream of t's own on the
// machine's NATS server, deleted when t ends.
func natsStream(t *testing.T, prefix string) string {
	server := emulators.NATS(t)
	stream := prefix + strings.ToUpper(uuid.NewString()[:8])
	t.Cleanup(func() {
		nc, err := nats.Connect(server)
		if err != nil {
			return
		}
		defer nc.Close()
		if js, err := jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = js.DeleteStream(ctx, stream)
		}
	})
	return server + "/" + stream
}

// TestWebhooksRealPairE2E is the webhook end-to-end test of issue 37 on a
// real broker and store pair, NATS JetStream and PostgreSQL, driven only
// through the REST API and the local adapter's own push loop, against a
// real HTTPS receiver whose self-signed certificate Herald is made to
// trust. (delivery/webhooks_test.go proves the same on the in-memory
// stack with a test clock.) The retry schedule is hookSchedule.
func TestWebhooksRealPairE2E(t *testing.T) {
	t.Parallel()
	topic := natsStream(t, "HERALD_WH_")
	store := emulators.PostgreSQL(t) + "?table=herald"
	recv := newHookReceiver(t)
	allow, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(t, err)
	c := start(t, streamOpts(func(cfg *local.Config) {
		cfg.TopicURL, cfg.StoreURL = topic, store
		cfg.WebhookAllow = allow
		cfg.WebhookTransport = recv.trust
		cfg.WebhookSchedule = hookSchedule
	}))

	// A delivery arrives once, signed so that the reference library
	// verifies it, and the attempt is recorded as a success.
	t.Run("signed", func(t *testing.T) {
		t.Parallel()
		d := createHook(t, c, recv, "/signed", "wh.signed", nil, nil)
		c.publish(t, ev("wh.signed", "/r/1", map[string]any{"signed": 1}))
		waitFor(t, "the delivery", func() bool { return len(recv.got("/signed")) > 0 })
		requireSigned(t, recv.got("/signed"), `"signed":1`)
		waitFor(t, "the attempt's record", func() bool { return len(attempts(t, c, d.ID)) > 0 })
		as := attempts(t, c, d.ID)
		require.Len(t, as, 1)
		require.Equal(t, http.StatusNoContent, as[0].Status)
		require.Equal(t, recv.got("/signed")[0].id, as[0].WebhookID)
	})

	// A receiver that hangs past the destination's 1 s timeout, then
	// answers 500, then 204: three attempts of one webhook-id, each after
	// its wait of the schedule, and no dead letter.
	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		d := createHook(t, c, recv, "/retried", "wh.retried", func(n int) int {
			switch n {
			case 1:
				return 0
			case 2:
				return http.StatusInternalServerError
			}
			return http.StatusNoContent
		}, map[string]any{"timeout": 1, "dead_letter_policy": map[string]any{"max_delivery_attempts": 5}})
		c.publish(t, ev("wh.retried", "/r/2", map[string]any{"retried": 2}))
		waitFor(t, "three attempts recorded", func() bool { return len(attempts(t, c, d.ID)) >= 3 })
		as := attempts(t, c, d.ID)
		require.Len(t, as, 3, "%+v", as)
		require.Zero(t, as[0].Status, "the hung attempt had no answer")
		require.NotEmpty(t, as[0].Error)
		require.Equal(t, http.StatusInternalServerError, as[1].Status)
		require.Equal(t, http.StatusNoContent, as[2].Status)
		for i, a := range as {
			require.EqualValues(t, i+1, a.Attempt)
			require.Equal(t, as[0].WebhookID, a.WebhookID, "one webhook-id for every attempt")
		}
		got := recv.got("/retried")
		require.Len(t, got, 3)
		requireSigned(t, got, `"retried":2`)
		// Never before the schedule's wait (the jitter only stretches it).
		// Attempt 1 started at got[0].at and failed no sooner.
		require.GreaterOrEqual(t, got[1].at.Sub(got[0].at), hookSchedule[0], "the second attempt came early")
		require.GreaterOrEqual(t, got[2].at.Sub(got[1].at), hookSchedule[1], "the third attempt came early")
		waitFor(t, "the breaker's count to clear", func() bool { return getHook(t, c, d.ID).Webhook.ConsecutiveFailures == 0 })
		for _, dl := range c.listDeadLetters(t, url.Values{"limit": {"100"}}).DeadLetters {
			require.NotEqual(t, d.ID, dl.OriginQueue, "a delivered event was dead-lettered")
		}
	})

	// With max_delivery_attempts 2, two failed attempts put the event in
	// the dead-letter queue with its origin; a replay delivers it.
	t.Run("dead-lettered", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		failing := true
		d := createHook(t, c, recv, "/dead", "wh.dead", func(int) int {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}, map[string]any{"dead_letter_policy": map[string]any{"max_delivery_attempts": 2}})
		c.publish(t, ev("wh.dead", "/r/3", map[string]any{"dead": 3}))
		var dl deadLetterItem
		waitFor(t, "the dead letter", func() bool {
			for _, x := range c.listDeadLetters(t, url.Values{"limit": {"100"}}).DeadLetters {
				if x.OriginQueue == d.ID {
					dl = x
					return true
				}
			}
			return false
		})
		require.Equal(t, "DELIVERY_LIMIT", dl.Reason)
		require.EqualValues(t, 2, dl.DeliveryCount)
		require.JSONEq(t, `{"dead":3}`, string(dl.Event.Message))
		got := recv.got("/dead")
		require.Len(t, got, 2, "two attempts, then none")
		require.Equal(t, got[0].id, got[1].id)
		require.GreaterOrEqual(t, got[1].at.Sub(got[0].at), hookSchedule[0], "the second attempt came early")
		requireSigned(t, got, `"dead":3`)

		mu.Lock()
		failing = false
		mu.Unlock()
		out := c.act(t, map[string]string{"id": dl.ID, "action": "REPLAY"})
		require.Equal(t, "REPLAYED", out[0].Outcome, "%+v", out[0])
		waitFor(t, "the replayed delivery", func() bool { return len(recv.got("/dead")) >= 3 })
		got = recv.got("/dead")
		require.Len(t, got, 3)
		require.Equal(t, http.StatusOK, got[2].status)
		requireSigned(t, got[2:], `"dead":3`)
		for _, x := range c.listDeadLetters(t, url.Values{"limit": {"100"}}).DeadLetters {
			require.NotEqual(t, dl.ID, x.ID, "the replayed dead letter is still listed")
		}
	})

	// 410 Gone disables the destination: no more attempts while it is,
	// its events wait, and resume delivers them.
	t.Run("gone", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		gone := true
		d := createHook(t, c, recv, "/gone", "wh.gone", func(int) int {
			mu.Lock()
			defer mu.Unlock()
			if gone {
				return http.StatusGone
			}
			return http.StatusOK
		}, map[string]any{"ordered": true})
		c.publish(t, ev("wh.gone", "/r/4", map[string]any{"gone": 1}), ev("wh.gone", "/r/4", map[string]any{"gone": 2}))
		waitFor(t, "the destination disabled", func() bool { return getHook(t, c, d.ID).Webhook.Disabled != "" })
		require.Contains(t, getHook(t, c, d.ID).Webhook.Disabled, "410")
		require.Len(t, recv.got("/gone"), 1, "one attempt, then the destination is disabled")
		// The attempt is recorded after the disabling; the second event
		// is not attempted.
		waitFor(t, "the attempt's record", func() bool { return len(attempts(t, c, d.ID)) > 0 })
		as := attempts(t, c, d.ID)
		require.Len(t, as, 1)
		require.Equal(t, http.StatusGone, as[0].Status)

		mu.Lock()
		gone = false
		mu.Unlock()
		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+d.ID+"/resume", nil)
		require.Empty(t, getHook(t, c, d.ID).Webhook.Disabled, "resume enables it")
		waitFor(t, "both events delivered", func() bool { return len(recv.got("/gone")) >= 3 })
		got := recv.got("/gone")
		require.Len(t, got, 3)
		require.Equal(t, got[0].id, got[1].id, "the refused event is delivered first, with its webhook-id")
		require.Equal(t, []int{http.StatusGone, http.StatusOK, http.StatusOK}, []int{got[0].status, got[1].status, got[2].status})
		requireSigned(t, got[:2], `"gone":1`)
		requireSigned(t, got[2:], `"gone":2`)
	})
}
