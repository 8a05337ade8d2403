package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/safedial"
	"github.com/heraldevents/herald/internal/whsign"
	"github.com/heraldevents/herald/leasestore"
)

// Webhook limits and defaults (docs/webhooks.md).
const (
	// DefaultWebhookTimeout bounds one delivery attempt, from connect to
	// the answer's status line.
	DefaultWebhookTimeout = 15 * time.Second
	// MinWebhookTimeout and MaxWebhookTimeout bound a destination's own
	// timeout.
	MinWebhookTimeout = time.Second
	MaxWebhookTimeout = 60 * time.Second
	// MaxWebhookBatch bounds max_batch, the events of one delivery.
	MaxWebhookBatch = 100
	// DefaultWebhookConcurrency is WebhookConfig.Concurrency's default:
	// deliveries in flight per destination.
	DefaultWebhookConcurrency = 10
	// MaxWebhookRate bounds a destination's rate_limit, in deliveries
	// per second (the least is a thousandth).
	MaxWebhookRate = 1000
	// DefaultSecretOverlap is how long a rotated-out secret keeps signing.
	DefaultSecretOverlap = 24 * time.Hour
	// webhookDrain is the most bytes of an answer read (and dropped), so
	// that the connection can be reused without a receiver holding the
	// worker with an endless body.
	webhookDrain = 64 << 10
)

// DefaultWebhookSchedule is the wait after each failed delivery attempt,
// the schedule Svix documents: attempts at once, then 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h and 10 h later, 8 in all. Each wait is stretched by up to
// a tenth at random (jitter), so that deliveries failed together do not
// all come back at once. A destination with a retry_policy uses that
// policy's backoff instead; one with a dead_letter_policy makes that many
// attempts (past the schedule's end the last wait repeats).
var DefaultWebhookSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// WebhookConfig tunes webhook delivery. The zero value delivers to public
// addresses only, on DefaultWebhookSchedule.
type WebhookConfig struct {
	// Policy decides which addresses a webhook may reach
	// (HERALD_WEBHOOK_ALLOW; see package safedial). The zero Policy
	// allows public addresses only, over https.
	Policy safedial.Policy
	// Transport, when set, adjusts the HTTP transport (a test trusts its
	// receiver's CA); see safedial.ClientOptions.
	Transport func(*http.Transport)
	// Schedule replaces DefaultWebhookSchedule (tests).
	Schedule []time.Duration
	// Concurrency is how many deliveries one push runs at once per
	// destination (HERALD_WEBHOOK_CONCURRENCY; default
	// DefaultWebhookConcurrency). Deliveries of one destination are then
	// not in order; 1 keeps them in order.
	Concurrency int
	// BreakerThreshold is how many consecutive failed attempts open an
	// endpoint's circuit breaker (default DefaultBreakerThreshold).
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker stops every attempt
	// before it lets one probe through (default DefaultBreakerCooldown).
	BreakerCooldown time.Duration
	// Sleep waits d or until ctx ends (its error then); it spaces the
	// deliveries of a destination with a rate limit. nil sleeps on a
	// timer; a test moves its clock instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (c *WebhookConfig) setDefaults() {
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultWebhookSchedule
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultWebhookConcurrency
	}
	if c.BreakerThreshold <= 0 {
		c.BreakerThreshold = DefaultBreakerThreshold
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	if c.Sleep == nil {
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			if d <= 0 {
				return ctx.Err()
			}
			return sleep(ctx, d)
		}
	}
}

// webhookClients holds one HTTP client per timeout, built on first use:
// a client's connection pool is what makes repeated deliveries cheap.
type webhookClients struct {
	mu sync.Mutex
	m  map[time.Duration]*http.Client
}

func (s *Service) webhookClient(timeout time.Duration) *http.Client {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	if c := s.hooks.m[timeout]; c != nil {
		return c
	}
	if s.hooks.m == nil {
		s.hooks.m = map[time.Duration]*http.Client{}
	}
	c := s.cfg.Webhooks.Policy.Client(safedial.ClientOptions{Timeout: timeout, Transport: s.cfg.Webhooks.Transport})
	s.hooks.m[timeout] = c
	return c
}

// CreateWebhookParams is what CreateWebhook is asked for.
type CreateWebhookParams struct {
	// URL is the endpoint: https (http only for an allow-listed host), no
	// user information or fragment, and not an address of a refused kind
	// (herr.InvalidArgument otherwise, see package safedial).
	URL string
	// FilterGroups select the events (none = every event).
	FilterGroups filter.Groups
	// Policies are the delivery policies: retry_policy replaces the
	// schedule, dead_letter_policy the number of attempts (default 8).
	Policies leasestore.Policies
	// Timeout bounds each attempt: MinWebhookTimeout–MaxWebhookTimeout;
	// 0 is DefaultWebhookTimeout.
	Timeout time.Duration
	// MaxBatch is the most events per request, 1–MaxWebhookBatch; 0 or
	// 1 sends each event alone.
	MaxBatch int
	// RateLimit is the most deliveries per second, 0.001–MaxWebhookRate;
	// 0 is no limit.
	RateLimit float64
	// Ordered asks for one delivery in flight at a time, in sequence.
	Ordered bool
}

// CreatedWebhook is CreateWebhook's answer.
type CreatedWebhook struct {
	Consumer *leasestore.Consumer
	Webhook  *leasestore.Webhook
	// Secret is the signing secret, "whsec_…". It is shown to the caller
	// this once: GetWebhook does not return it.
	Secret string
}

// CreateWebhook creates a webhook destination: a consumer of type
// leasestore.TypeWebhook at the head of the stream (its subscription
// first, as CreateDestination), then its webhook record with a new
// signing secret. A failure undoes what was made.
func (s *Service) CreateWebhook(ctx context.Context, p *auth.Principal, d CreateWebhookParams) (*CreatedWebhook, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	if err := s.checkWebhookURL(d.URL); err != nil {
		return nil, err
	}
	if err := d.FilterGroups.Validate("filter_groups"); err != nil {
		return nil, err
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultWebhookTimeout
	}
	if err := checkWebhookTimeout(d.Timeout); err != nil {
		return nil, err
	}
	if d.MaxBatch < 0 || d.MaxBatch > MaxWebhookBatch {
		return nil, herr.New(herr.InvalidArgument, "max_batch must be between 1 and %d", MaxWebhookBatch)
	}
	if err := checkWebhookRate(d.RateLimit); err != nil {
		return nil, err
	}
	pol := d.Policies
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	if pol.AckTimeout != 0 {
		return nil, herr.New(herr.Malformed, "ack_timeout is only for durable queues")
	}
	if pol.MaxDeliveryAttempts == 0 {
		pol.MaxDeliveryAttempts = len(s.cfg.Webhooks.Schedule) + 1
	}
	id := uuid.NewString()
	sub := "herald-wh-" + id
	if err := s.cfg.Broker.CreateSubscription(ctx, sub, d.FilterGroups); err != nil {
		return nil, brokerErr(err)
	}
	undo := context.WithoutCancel(ctx)
	c, err := s.cfg.Store.CreateConsumer(ctx, leasestore.Consumer{
		ID: id, Type: leasestore.TypeWebhook, Filters: d.FilterGroups, Subscription: sub, CreatedAt: s.cfg.Now(), Policies: pol,
	})
	if err != nil {
		_ = s.cfg.Broker.DeleteSubscription(undo, sub)
		return nil, err
	}
	secret := whsign.NewSecret().Reveal()
	w, err := s.cfg.Store.CreateWebhook(ctx, leasestore.Webhook{
		Consumer: id, URL: d.URL, Secrets: []leasestore.WebhookSecret{{Secret: secret}}, Timeout: d.Timeout, MaxBatch: max(d.MaxBatch, 1),
		RateLimit: d.RateLimit, Ordered: d.Ordered,
	})
	if err != nil {
		_ = s.DeleteDestination(undo, p, id)
		return nil, err
	}
	return &CreatedWebhook{Consumer: c, Webhook: w, Secret: secret}, nil
}

// checkWebhookURL applies the address policy to a URL before any lookup.
func (s *Service) checkWebhookURL(raw string) error {
	if len(raw) > leasestore.MaxWebhookURLLength {
		return herr.New(herr.InvalidArgument, "url must be at most %d bytes", leasestore.MaxWebhookURLLength)
	}
	if _, err := s.cfg.Webhooks.Policy.CheckURL(raw); err != nil {
		return herr.New(herr.InvalidArgument, "url: %s", err.Error())
	}
	return nil
}

// checkWebhookRate checks a rate_limit: 0 (none) or 0.001–MaxWebhookRate
// deliveries per second.
func checkWebhookRate(r float64) error {
	if r != 0 && !(r >= 0.001 && r <= MaxWebhookRate) {
		return herr.New(herr.InvalidArgument, "rate_limit must be between 0.001 and %d deliveries per second (0 or null: no limit)", MaxWebhookRate)
	}
	return nil
}

// checkWebhookTimeout checks a timeout: MinWebhookTimeout–MaxWebhookTimeout.
func checkWebhookTimeout(d time.Duration) error {
	if d < MinWebhookTimeout || d > MaxWebhookTimeout {
		return herr.New(herr.InvalidArgument, "timeout must be between %d and %d seconds", int(MinWebhookTimeout/time.Second), int(MaxWebhookTimeout/time.Second))
	}
	return nil
}

// WebhookChanges are the webhook members of a PATCH of a webhook
// destination; a nil member stays as it is.
type WebhookChanges struct {
	// URL replaces the endpoint, checked as CreateWebhookParams.URL. A new
	// URL is a new endpoint: the circuit breaker closes, and a destination
	// disabled by a 410 Gone is enabled again.
	URL *string
	// Timeout: MinWebhookTimeout–MaxWebhookTimeout.
	Timeout *time.Duration
	// MaxBatch: 1–MaxWebhookBatch.
	MaxBatch *int
	// RateLimit: 0.001–MaxWebhookRate deliveries per second; 0 removes it.
	RateLimit *float64
	// Ordered: one delivery in flight at a time, in sequence.
	Ordered *bool
}

// Any reports whether c changes anything.
func (c WebhookChanges) Any() bool {
	return c.URL != nil || c.Timeout != nil || c.MaxBatch != nil || c.RateLimit != nil || c.Ordered != nil
}

// check validates c's members before anything is written.
func (s *Service) checkChanges(c WebhookChanges) error {
	if c.URL != nil {
		if err := s.checkWebhookURL(*c.URL); err != nil {
			return err
		}
	}
	if c.Timeout != nil {
		if err := checkWebhookTimeout(*c.Timeout); err != nil {
			return err
		}
	}
	if c.MaxBatch != nil && (*c.MaxBatch < 1 || *c.MaxBatch > MaxWebhookBatch) {
		return herr.New(herr.InvalidArgument, "max_batch must be between 1 and %d", MaxWebhookBatch)
	}
	if c.RateLimit != nil {
		return checkWebhookRate(*c.RateLimit)
	}
	return nil
}

// UpdateWebhookDestination is PATCH /v1/event-destinations/{id}: the
// delivery policies (as UpdateDestination) and, for a webhook
// destination, the changes ch. Every member is checked before anything
// is written, so a bad one changes nothing: a value out of range or a URL
// the address policy refuses is herr.InvalidArgument; webhook members on
// a destination of another type are herr.Malformed. For a webhook, a
// dead_letter_policy of null restores the default number of attempts
// (the schedule's). It needs manage:destinations; an unknown id is
// herr.NotFound. The webhook record is returned for a webhook
// destination (its secrets cleared), nil for another type.
func (s *Service) UpdateWebhookDestination(ctx context.Context, p *auth.Principal, id string, f PolicyFields, ch WebhookChanges) (*leasestore.Consumer, *leasestore.Webhook, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, nil, err
	}
	if err := CheckText("the event destination id", id); err != nil {
		return nil, nil, err
	}
	if _, err := f.Apply(leasestore.Policies{}, leasestore.TypeDurableConsumer); err != nil {
		return nil, nil, err
	}
	if err := s.checkChanges(ch); err != nil {
		return nil, nil, err
	}
	c, err := s.cfg.Store.LookupConsumer(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if c.Type != leasestore.TypeWebhook {
		if ch.Any() {
			return nil, nil, herr.New(herr.Malformed, "url, timeout, max_batch, rate_limit and ordered are only for destinations of type %s", leasestore.TypeWebhook)
		}
		c, err := s.setPolicies(ctx, id, f, leasestore.TypeDurableConsumer)
		return c, nil, err
	}
	if f.Any() {
		c, err = s.cfg.Store.UpdatePolicies(ctx, id, func(cur leasestore.Policies) (leasestore.Policies, error) {
			out, err := f.Apply(cur, leasestore.TypeDurableConsumer)
			if err == nil && out.MaxDeliveryAttempts == 0 {
				out.MaxDeliveryAttempts = len(s.cfg.Webhooks.Schedule) + 1
			}
			return out, err
		})
	} else {
		c, err = s.cfg.Store.GetConsumer(ctx, id) // exact counts, as the other answers give
	}
	if err != nil {
		return nil, nil, err
	}
	change := func(w *leasestore.Webhook) error {
		if ch.URL != nil && *ch.URL != w.URL {
			w.URL, w.Failures, w.OpenedAt, w.Disabled = *ch.URL, 0, time.Time{}, ""
		}
		if ch.Timeout != nil {
			w.Timeout = *ch.Timeout
		}
		if ch.MaxBatch != nil {
			w.MaxBatch = *ch.MaxBatch
		}
		if ch.RateLimit != nil {
			w.RateLimit = *ch.RateLimit
		}
		if ch.Ordered != nil {
			w.Ordered = *ch.Ordered
		}
		return nil
	}
	var w *leasestore.Webhook
	if ch.Any() {
		w, err = s.cfg.Store.UpdateWebhook(ctx, id, change)
	} else {
		w, err = s.cfg.Store.GetWebhook(ctx, id)
	}
	if err != nil {
		return nil, nil, err
	}
	w.Secrets = nil
	return c, w, nil
}

// GetWebhook returns destination id's webhook record, its secrets
// cleared (they are shown once, at creation and rotation).
// herr.NotFound when id has none.
func (s *Service) GetWebhook(ctx context.Context, p *auth.Principal, id string) (*leasestore.Webhook, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	w, err := s.cfg.Store.GetWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	w.Secrets = nil
	return w, nil
}

// RotateWebhookSecret gives destination id a new signing secret and
// returns it (shown this once). The secret it replaces keeps signing,
// beside the new one, for overlap (0 = DefaultSecretOverlap; at most a
// week), so receivers can move to the new one without missing a delivery;
// older secrets past their expiry are dropped. herr.NotFound for a
// destination without a webhook.
func (s *Service) RotateWebhookSecret(ctx context.Context, p *auth.Principal, id string, overlap time.Duration) (string, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return "", err
	}
	if overlap == 0 {
		overlap = DefaultSecretOverlap
	}
	if overlap < 0 || overlap > 7*24*time.Hour {
		return "", herr.New(herr.InvalidArgument, "the old secret's overlap must be between 0 and 168 hours")
	}
	secret := whsign.NewSecret().Reveal()
	now := s.cfg.Now()
	_, err := s.cfg.Store.UpdateWebhook(ctx, id, func(w *leasestore.Webhook) error {
		keep := []leasestore.WebhookSecret{{Secret: secret}}
		for i, old := range w.Secrets {
			if i == 0 {
				old.ExpiresAt = now.Add(overlap)
			} else if !old.ExpiresAt.After(now) {
				continue
			}
			if len(keep) < leasestore.MaxWebhookSecrets {
				keep = append(keep, old)
			}
		}
		w.Secrets = keep
		return nil
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// EnableWebhook clears a webhook's disabled state (set when its endpoint
// answered 410 Gone), so that pushes to it start again.
func (s *Service) EnableWebhook(ctx context.Context, p *auth.Principal, id string) error {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return err
	}
	_, err := s.cfg.Store.UpdateWebhook(ctx, id, func(w *leasestore.Webhook) error {
		w.Disabled = ""
		return nil
	})
	return err
}

// retryAfter is the wait before a failed delivery's next attempt: the
// receiver's Retry-After (429, 503) when it gave one, else the
// destination's retry policy (nil: the store applies it), else the
// schedule with up to a tenth of jitter.
func (s *Service) retryAfter(c *leasestore.Consumer, attempt int64, asked time.Duration) *time.Duration {
	if asked > 0 {
		d := min(asked, leasestore.MaxRetryAfter)
		return &d
	}
	if c.RetryPolicy != nil {
		return nil
	}
	sched := s.cfg.Webhooks.Schedule
	max := c.MaxDeliveryAttempts
	if attempt >= int64(max) && max > 0 {
		// The last attempt: the next pull dead-letters the lease at once.
		return new(time.Duration)
	}
	d := sched[min(int(attempt), len(sched))-1]
	d += time.Duration(rand.Int64N(int64(d/10) + 1))
	d = min(d, leasestore.MaxRetryAfter)
	return &d
}

// attemptOutcome is what one POST came to.
type attemptOutcome struct {
	ok, gone   bool
	status     int
	retryAfter time.Duration
	err        error
	// id is the delivery's webhook-id; at when the attempt started (on
	// Config.Now), latency how long it took (wall clock), head the first
	// bytes of the answer's body (the attempt log's).
	id      string
	at      time.Time
	latency time.Duration
	head    []byte
}

// deliver POSTs lease l to w's URL, signed, and reads the answer's
// status.
func (s *Service) deliver(ctx context.Context, w *leasestore.Webhook, l *leasestore.Lease, timeout time.Duration) attemptOutcome {
	body, id, ctype := webhookBody(l)
	start := time.Now()
	out := attemptOutcome{id: id, at: s.cfg.Now()}
	failed := func(err error) attemptOutcome {
		out.err, out.latency = err, time.Since(start)
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return failed(errors.New("the webhook URL cannot be requested"))
	}
	secrets, err := signingSecrets(w, s.cfg.Now())
	if err != nil {
		return failed(err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("User-Agent", "Herald-Webhooks/1")
	whsign.Set(req.Header, id, s.cfg.Now(), body, secrets...)
	res, err := s.webhookClient(timeout).Do(req)
	if err != nil {
		return failed(attemptErr(err))
	}
	out.head, _ = io.ReadAll(io.LimitReader(res.Body, leasestore.MaxWebhookAttemptBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, webhookDrain-int64(len(out.head))))
	_ = res.Body.Close()
	out.latency = time.Since(start)
	out.status, out.ok, out.gone = res.StatusCode, res.StatusCode >= 200 && res.StatusCode < 300, res.StatusCode == http.StatusGone
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		out.retryAfter = parseRetryAfter(res.Header.Get("Retry-After"), s.cfg.Now())
	}
	return out
}

// attemptErr keeps what an operator needs of a failed request (refused
// by the address policy, timed out, or the connection failed) without
// the URL, whose query may hold a receiver's token.
func attemptErr(err error) error {
	switch {
	case errors.Is(err, safedial.ErrRefused):
		// The innermost error that wraps the sentinel is the policy's
		// own, which names the address and its kind.
		refusal := err
		for e := err; e != nil; e = errors.Unwrap(e) {
			if e != safedial.ErrRefused && errors.Is(e, safedial.ErrRefused) {
				refusal = e
			}
		}
		return refusal
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("the endpoint did not answer within the timeout")
	default:
		return errors.New("the request failed: " + rootCause(err).Error())
	}
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// parseRetryAfter reads a Retry-After value, seconds or an HTTP date;
// 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, int64(leasestore.MaxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// signingSecrets returns w's secrets that sign now: the current one and
// those being retired whose expiry has not passed.
func signingSecrets(w *leasestore.Webhook, now time.Time) ([]whsign.Secret, error) {
	var out []whsign.Secret
	for i, ws := range w.Secrets {
		if i > 0 && !ws.ExpiresAt.IsZero() && !ws.ExpiresAt.After(now) {
			continue
		}
		sec, err := whsign.ParseSecret(ws.Secret)
		if err != nil {
			return nil, errors.New("the webhook's stored signing secret is unreadable")
		}
		out = append(out, sec)
	}
	if len(out) == 0 {
		return nil, errors.New("the webhook has no signing secret")
	}
	return out, nil
}

// webhookBody is the request body of lease l: one event alone as a
// CloudEvent (application/cloudevents+json) with the event's id as
// webhook-id, several as a JSON array (application/cloudevents-batch+json)
// with the lease's id, which stays the same on every retry of it. Each
// event carries its sequence, as a pull hands it out.
func webhookBody(l *leasestore.Lease) (body []byte, id, contentType string) {
	if len(l.Events) == 1 {
		body = cloudevent.AppendWithSequence(nil, l.Events[0], l.Start)
		var ev struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &ev) == nil && ev.ID != "" {
			return body, ev.ID, "application/cloudevents+json"
		}
		return body, l.ID, "application/cloudevents+json"
	}
	body = append(body, '[')
	for i, e := range l.Events {
		if i > 0 {
			body = append(body, ',')
		}
		body = cloudevent.AppendWithSequence(body, e, l.Start+int64(i))
	}
	return append(body, ']'), l.ID, "application/cloudevents-batch+json"
}
