// Package destinations serves event-destination management, which the durable-consumer API
// leaves out and Herald adds:
//
//	POST   /v1/event-destinations              {"type":"DURABLE_CONSUMER","filter_groups":[…]} → 201 Destination
//	GET    /v1/event-destinations              → 200 {"destinations":[Destination]}
//	GET    /v1/event-destinations/{id}         → 200 Destination
//	DELETE /v1/event-destinations/{id}         → 204
//	POST   /v1/event-destinations/{id}/pause   → 200 Destination
//	POST   /v1/event-destinations/{id}/resume  → 200 Destination
//	PATCH  /v1/event-destinations/{id}         {"retry_policy"?, "dead_letter_policy"?, webhook members?} → 200 Destination
//	POST   /v1/event-destinations/{id}/rotate-secret  → 200 {"secret":"whsec_…"} (webhooks)
//	GET    /v1/event-destinations/{id}/attempts       → 200 {"attempts":[Attempt]} (webhooks)
//
// A WEBHOOK destination is created with {"type":"WEBHOOK","url":"https://…",
// "timeout"?: seconds 1–60 (15), "max_batch"?: 1–100 (1), "rate_limit"?:
// deliveries per second 0.001–1000 (none), "ordered"?: bool (false),
// "filter_groups"?, the policies?}; its 201 answer carries "webhook" {url,
// timeout, max_batch, rate_limit, ordered, consecutive_failures,
// circuit_opened_at, disabled} and "secret", the signing secret, which no
// later answer shows again (rotate-secret issues a new one, and the old
// one keeps signing for 24 hours). A PATCH changes the same webhook
// members (absent: unchanged; "rate_limit": null removes the limit); a
// new url closes the circuit breaker and clears a 410's disabling. A URL
// the address policy refuses, or a member out of range, is 422, and
// nothing is changed (docs/webhooks.md). The webhook members on another
// type are 400.
//
// Create and PATCH take the delivery policies (delivery.PolicyFields):
// retry_policy {"minimum_backoff", "maximum_backoff"} in seconds and
// dead_letter_policy {"max_delivery_attempts"}; in a PATCH an absent
// member leaves the policy as it is and null removes it.
//
// An unknown type is 400; invalid filter groups 422; a policy out of range
// 422; an unknown id 404.
package destinations

import (
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
	"github.com/heraldevents/herald/leasestore"
)

const maxBody = 256 << 10

// Destination is the REST shape of a durable consumer.
type Destination struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	FilterGroups filter.Groups `json:"filter_groups"`
	Paused       bool          `json:"paused"`
	CreatedAt    time.Time     `json:"created_at"`
	// Committed is the sequence of the committed cursor; before the first
	// commit the zero position, "001.00000000000000000000", as in the
	// acknowledge answer.
	Committed string `json:"committed"`
	// InFlight counts events leased and not acknowledged.
	InFlight int64 `json:"in_flight"`
	// Requeued counts the in-flight events waiting for redelivery (failed,
	// or expired and swept by the lease-expiry job).
	Requeued int64 `json:"requeued"`
	// LiveSessions counts the streams attached to a queue now (0 for a
	// durable consumer of the durable-consumer API, which has none).
	LiveSessions int `json:"live_sessions"`
	// RetryPolicy and DeadLetterPolicy are the delivery policies (null:
	// redeliver at once; the deployment's HERALD_DELIVERY_LIMIT).
	RetryPolicy      *delivery.RetryPolicyView      `json:"retry_policy"`
	DeadLetterPolicy *delivery.DeadLetterPolicyView `json:"dead_letter_policy"`
	// AckTimeout is a durable queue's own ack timeout in seconds; absent
	// when it has none (the deployment's applies).
	AckTimeout int64 `json:"ack_timeout,omitempty"`
	// Lag is what the consumer has not been handed yet, at the broker
	// (delivery.Lag); absent when the broker cannot tell, or, in a
	// listing, unless asked for with ?lag=true.
	Lag *LagView `json:"lag,omitempty"`
	// Webhook is a WEBHOOK destination's push configuration, in the
	// answers of create and get (absent in a listing and for other
	// types).
	Webhook *WebhookView `json:"webhook,omitempty"`
	// Secret is the signing secret, in the create answer only.
	Secret string `json:"secret,omitempty"`
}

// LagView is the REST shape of delivery.Lag.
type LagView struct {
	// Events counts the events ready at the broker for the consumer.
	Events int64 `json:"events"`
	// OldestPublishedAt is when the oldest of them was published; absent
	// when the broker does not tell or there is none.
	OldestPublishedAt *time.Time `json:"oldest_published_at,omitempty"`
}

// withLag sets d.Lag from l (nil: unknown).
func withLag(d Destination, l *delivery.Lag) Destination {
	if l == nil {
		return d
	}
	d.Lag = &LagView{Events: l.Events}
	if !l.Oldest.IsZero() {
		t := l.Oldest.UTC()
		d.Lag.OldestPublishedAt = &t
	}
	return d
}

// WebhookView is the REST shape of a webhook's configuration, without
// its secrets.
type WebhookView struct {
	URL      string `json:"url"`
	Timeout  int64  `json:"timeout"`
	MaxBatch int    `json:"max_batch"`
	// RateLimit is the most deliveries per second; absent when there is
	// no limit.
	RateLimit float64 `json:"rate_limit,omitempty"`
	// Ordered: one delivery in flight at a time, in sequence.
	Ordered bool `json:"ordered"`
	// ConsecutiveFailures counts the endpoint's failed attempts since its
	// last success (the circuit breaker's count).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// CircuitOpenedAt is when the circuit breaker opened; absent while
	// it is closed.
	CircuitOpenedAt *time.Time `json:"circuit_opened_at,omitempty"`
	// Disabled says why pushes stopped (the endpoint answered 410 Gone);
	// absent while they go on. Resume enables the destination again.
	Disabled string `json:"disabled,omitempty"`
}

func webhookView(w *leasestore.Webhook) *WebhookView {
	v := &WebhookView{
		URL: w.URL, Timeout: int64(w.Timeout / time.Second), MaxBatch: max(w.MaxBatch, 1), Disabled: w.Disabled,
		RateLimit: w.RateLimit, Ordered: w.Ordered, ConsecutiveFailures: w.Failures,
	}
	if !w.OpenedAt.IsZero() {
		t := w.OpenedAt.UTC()
		v.CircuitOpenedAt = &t
	}
	return v
}

// FromConsumer converts a stored consumer.
func FromConsumer(c *leasestore.Consumer) Destination {
	gs := c.Filters
	if gs == nil {
		gs = filter.Groups{}
	}
	rp, dp := delivery.PolicyViews(c)
	return Destination{
		ID: c.ID, Type: c.Type, FilterGroups: gs, Paused: c.Paused,
		CreatedAt: c.CreatedAt.UTC(), Committed: cloudevent.FormatSequence(c.Committed), InFlight: c.InFlight,
		Requeued: c.Requeued, LiveSessions: c.LiveSessions,
		RetryPolicy: rp, DeadLetterPolicy: dp, AckTimeout: int64(c.AckTimeout / time.Second),
	}
}

// Handler serves the endpoints above.
type Handler struct {
	Service *delivery.Service
}

// Create serves POST /v1/event-destinations.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.create)(w, r) }

// List serves GET /v1/event-destinations.
func (h *Handler) List(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.list)(w, r) }

// Get serves GET /v1/event-destinations/{id}.
func (h *Handler) Get(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.get)(w, r) }

// Delete serves DELETE /v1/event-destinations/{id}.
func (h *Handler) Delete(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.delete)(w, r) }

// Pause serves POST /v1/event-destinations/{id}/pause.
func (h *Handler) Pause(w http.ResponseWriter, r *http.Request) {
	httpx.Endpoint(h.setPaused(true))(w, r)
}

// Resume serves POST /v1/event-destinations/{id}/resume.
func (h *Handler) Resume(w http.ResponseWriter, r *http.Request) {
	httpx.Endpoint(h.setPaused(false))(w, r)
}

// Update serves PATCH /v1/event-destinations/{id}: the delivery policies.
func (h *Handler) Update(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.update)(w, r) }

func (h *Handler) update(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	var wh *leasestore.Webhook
	c, err := pathID(r, func(id string) (*leasestore.Consumer, error) {
		req, err := httpx.Decode[patchRequest](r, maxBody)
		if err != nil {
			return nil, err
		}
		ch, err := req.changes()
		if err != nil {
			return nil, err
		}
		c, w, err := h.Service.UpdateWebhookDestination(r.Context(), p, id, req.PolicyFields, ch)
		wh = w
		return c, err
	})
	if err != nil {
		return httpx.Answer{}, err
	}
	out := FromConsumer(c)
	if wh != nil {
		out.Webhook = webhookView(wh)
	}
	return httpx.Answer{Status: http.StatusOK, Body: out}, nil
}

// patchRequest is the body of PATCH /v1/event-destinations/{id}: the
// policies, and for a WEBHOOK its members (absent: unchanged).
type patchRequest struct {
	delivery.PolicyFields
	URL      *string `json:"url"`
	Timeout  *int64  `json:"timeout"`
	MaxBatch *int    `json:"max_batch"`
	// RateLimit is a number of deliveries per second, or null (or 0) to
	// remove the limit.
	RateLimit jsontext.Value `json:"rate_limit,omitzero"`
	Ordered   *bool          `json:"ordered"`
}

// changes converts the webhook members, checking their shapes (the
// service checks their ranges).
func (q *patchRequest) changes() (delivery.WebhookChanges, error) {
	ch := delivery.WebhookChanges{URL: q.URL, MaxBatch: q.MaxBatch, Ordered: q.Ordered}
	if q.Timeout != nil {
		if err := checkTimeout(*q.Timeout); err != nil {
			return ch, err
		}
		d := time.Duration(*q.Timeout) * time.Second
		ch.Timeout = &d
	}
	if len(q.RateLimit) > 0 {
		r, err := rateLimit(q.RateLimit)
		if err != nil {
			return ch, err
		}
		ch.RateLimit = &r
	}
	return ch, nil
}

// rateLimit reads a rate_limit member: a number, or null for none.
func rateLimit(v jsontext.Value) (float64, error) {
	if v.Kind() == 'n' {
		return 0, nil
	}
	var r float64
	if err := strictjson.Unmarshal(v, &r); err != nil {
		return 0, herr.New(herr.Malformed, "rate_limit must be a number of deliveries per second, or null")
	}
	return r, nil
}

// checkTimeout checks a timeout in whole seconds before it is converted
// (a huge one must not overflow into range).
func checkTimeout(s int64) error {
	if s < 1 || s > int64(delivery.MaxWebhookTimeout/time.Second) {
		return herr.New(herr.InvalidArgument, "timeout must be between 1 and %d seconds", int(delivery.MaxWebhookTimeout/time.Second))
	}
	return nil
}

// createRequest is the body of POST /v1/event-destinations.
type createRequest struct {
	Type         string        `json:"type"`
	FilterGroups filter.Groups `json:"filter_groups"`
	delivery.PolicyFields
	// URL, Timeout (seconds), MaxBatch, RateLimit (deliveries per
	// second) and Ordered are for WEBHOOK only.
	URL       *string        `json:"url"`
	Timeout   *int64         `json:"timeout"`
	MaxBatch  *int           `json:"max_batch"`
	RateLimit jsontext.Value `json:"rate_limit,omitzero"`
	Ordered   *bool          `json:"ordered"`
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	req, err := httpx.Decode[createRequest](r, maxBody)
	if err != nil {
		return httpx.Answer{}, err
	}
	pol, err := req.PolicyFields.Apply(leasestore.Policies{}, leasestore.TypeDurableConsumer)
	if err != nil {
		return httpx.Answer{}, err
	}
	if req.Type == leasestore.TypeWebhook {
		return h.createWebhook(w, r, p, req, pol)
	}
	if req.URL != nil || req.Timeout != nil || req.MaxBatch != nil || len(req.RateLimit) > 0 || req.Ordered != nil {
		return httpx.Answer{}, herr.New(herr.Malformed, "url, timeout, max_batch, rate_limit and ordered are only for destinations of type %s", leasestore.TypeWebhook)
	}
	c, err := h.Service.CreateDestination(r.Context(), p, delivery.CreateDestinationParams{Type: req.Type, FilterGroups: req.FilterGroups, Policies: pol})
	if err != nil {
		return httpx.Answer{}, err
	}
	w.Header().Set("Location", "/v1/event-destinations/"+c.ID)
	return httpx.Answer{Status: http.StatusCreated, Body: FromConsumer(c)}, nil
}

func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request, p *auth.Principal, req createRequest, pol leasestore.Policies) (_ httpx.Answer, err error) {
	if req.URL == nil {
		return httpx.Answer{}, herr.New(herr.Malformed, "a %s destination needs a url", leasestore.TypeWebhook)
	}
	d := delivery.CreateWebhookParams{URL: *req.URL, FilterGroups: req.FilterGroups, Policies: pol, Ordered: req.Ordered != nil && *req.Ordered}
	if req.Timeout != nil {
		if err := checkTimeout(*req.Timeout); err != nil {
			return httpx.Answer{}, err
		}
		d.Timeout = time.Duration(*req.Timeout) * time.Second
	}
	if len(req.RateLimit) > 0 {
		if d.RateLimit, err = rateLimit(req.RateLimit); err != nil {
			return httpx.Answer{}, err
		}
	}
	if req.MaxBatch != nil {
		if *req.MaxBatch < 1 {
			return httpx.Answer{}, herr.New(herr.InvalidArgument, "max_batch must be between 1 and %d", delivery.MaxWebhookBatch)
		}
		d.MaxBatch = *req.MaxBatch
	}
	c, err := h.Service.CreateWebhook(r.Context(), p, d)
	if err != nil {
		return httpx.Answer{}, err
	}
	w.Header().Set("Location", "/v1/event-destinations/"+c.Consumer.ID)
	out := FromConsumer(c.Consumer)
	out.Webhook, out.Secret = webhookView(c.Webhook), c.Secret
	return httpx.Answer{Status: http.StatusCreated, Body: out}, nil
}

// RotateSecret serves POST /v1/event-destinations/{id}/rotate-secret.
func (h *Handler) RotateSecret(w http.ResponseWriter, r *http.Request) {
	httpx.Endpoint(h.rotateSecret)(w, r)
}

func (h *Handler) rotateSecret(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	var secret string
	_, err := pathID(r, func(id string) (*leasestore.Consumer, error) {
		var err error
		secret, err = h.Service.RotateWebhookSecret(r.Context(), p, id, 0)
		return nil, err
	})
	if err != nil {
		return httpx.Answer{}, err
	}
	return httpx.Answer{Status: http.StatusOK, Body: map[string]string{"secret": secret}}, nil
}

func (h *Handler) list(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	var withLags bool
	switch v := r.URL.Query().Get("lag"); v {
	case "", "false":
	case "true":
		withLags = true
	default:
		return httpx.Answer{}, herr.InField(herr.New(herr.InvalidArgument, "lag must be true or false"), "query", "lag")
	}
	cs, err := h.Service.ListDestinations(r.Context(), p)
	if err != nil {
		return httpx.Answer{}, err
	}
	var lags []*delivery.Lag
	if withLags {
		lags = h.Service.Lags(r.Context(), cs)
	}
	out := make([]Destination, len(cs))
	for i, c := range cs {
		out[i] = FromConsumer(c)
		if lags != nil {
			out[i] = withLag(out[i], lags[i])
		}
	}
	return httpx.Answer{Status: http.StatusOK, Body: map[string][]Destination{"destinations": out}}, nil
}

func (h *Handler) get(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	c, err := pathID(r, func(id string) (*leasestore.Consumer, error) {
		return h.Service.GetDestination(r.Context(), p, id)
	})
	if err != nil {
		return httpx.Answer{}, err
	}
	out := withLag(FromConsumer(c), h.Service.Lags(r.Context(), []*leasestore.Consumer{c})[0])
	if c.Type == leasestore.TypeWebhook {
		wh, err := h.Service.GetWebhook(r.Context(), p, c.ID)
		if err != nil {
			return httpx.Answer{}, err
		}
		out.Webhook = webhookView(wh)
	}
	return httpx.Answer{Status: http.StatusOK, Body: out}, nil
}

// Lease is the REST shape of one unsettled lease
// (leasestore.LeaseView): no lease id, which would let its reader settle
// another worker's events.
type Lease struct {
	// First is the sequence of its first event, as pulls report it.
	First   string `json:"first"`
	Count   int64  `json:"count"`
	Attempt int64  `json:"attempt"`
	// State is "held", "waiting" (for redelivery) or "dead_lettering".
	State string `json:"state"`
	// ExpiresAt is when a held lease comes back, or a delayed one is due;
	// absent when due now or dead-lettering.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Session marks a lease held by a stream rather than a pull.
	Session bool `json:"session"`
}

// Leases serves GET /v1/event-destinations/{id}/leases: the consumer's
// unsettled leases in sequence order (at most the in-flight window's
// 1,000 events' worth), for operators; needs manage:destinations.
func (h *Handler) Leases(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.leases)(w, r) }

func (h *Handler) leases(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	id := r.PathValue("id")
	if err := delivery.CheckText("the event destination id", id); err != nil {
		return httpx.Answer{}, err
	}
	views, err := h.Service.DestinationLeases(r.Context(), p, id)
	if err != nil {
		return httpx.Answer{}, err
	}
	out := make([]Lease, len(views))
	for i, v := range views {
		out[i] = Lease{First: cloudevent.FormatSequence(v.First), Count: v.Count, Attempt: v.Attempt, State: v.State, Session: v.Session}
		if !v.Expires.IsZero() {
			t := v.Expires.UTC()
			out[i].ExpiresAt = &t
		}
	}
	return httpx.Answer{Status: http.StatusOK, Body: map[string]any{"leases": out}}, nil
}

func (h *Handler) delete(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	_, err := pathID(r, func(id string) (*leasestore.Consumer, error) {
		return nil, h.Service.DeleteDestination(r.Context(), p, id)
	})
	return httpx.Answer{Status: http.StatusNoContent}, err
}

func (h *Handler) setPaused(paused bool) httpx.Call {
	return func(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
		return destination(pathID(r, func(id string) (*leasestore.Consumer, error) {
			return h.Service.SetPaused(r.Context(), p, id, paused)
		}))
	}
}

// pathID checks the {id} of r's path (delivery.CheckText: a %00 or %1B in
// a path is a client's mistake, not a destination to look up), then runs
// do with it.
func pathID(r *http.Request, do func(id string) (*leasestore.Consumer, error)) (*leasestore.Consumer, error) {
	id := r.PathValue("id")
	if err := delivery.CheckText("the event destination id", id); err != nil {
		return nil, err
	}
	return do(id)
}

// destination answers 200 with c.
func destination(c *leasestore.Consumer, err error) (httpx.Answer, error) {
	if err != nil {
		return httpx.Answer{}, err
	}
	return httpx.Answer{Status: http.StatusOK, Body: FromConsumer(c)}, nil
}

// AttemptView is the REST shape of one delivery attempt of a webhook
// (leasestore.WebhookAttempt).
type AttemptView struct {
	At        time.Time `json:"at"`
	WebhookID string    `json:"webhook_id"`
	// Attempt is the delivery's attempt number, 1 for the first.
	Attempt int64 `json:"attempt"`
	Events  int   `json:"events"`
	// Status is the answer's HTTP status; absent when there was none.
	Status    int   `json:"status,omitempty"`
	LatencyMs int64 `json:"latency_ms"`
	// ResponseBody is the answer body's first 1,024 bytes.
	ResponseBody string `json:"response_body,omitempty"`
	// Error says why an attempt without an answer failed.
	Error string `json:"error,omitempty"`
}

// Attempts serves GET /v1/event-destinations/{id}/attempts: a webhook's
// recent delivery attempts, newest first (delivery.Service.WebhookAttempts).
func (h *Handler) Attempts(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.attempts)(w, r) }

func (h *Handler) attempts(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	var as []leasestore.WebhookAttempt
	_, err := pathID(r, func(id string) (*leasestore.Consumer, error) {
		var err error
		as, err = h.Service.WebhookAttempts(r.Context(), p, id)
		return nil, err
	})
	if err != nil {
		return httpx.Answer{}, err
	}
	out := make([]AttemptView, len(as))
	for i, a := range as {
		out[i] = AttemptView{
			At: a.At.UTC(), WebhookID: a.WebhookID, Attempt: a.Attempt, Events: a.Events, Status: a.Status,
			LatencyMs: a.Latency.Milliseconds(), ResponseBody: a.Body, Error: a.Error,
		}
	}
	return httpx.Answer{Status: http.StatusOK, Body: map[string][]AttemptView{"attempts": out}}, nil
}
