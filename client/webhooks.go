package client

import (
	"context"
	"net/http"
	"time"
)

// Webhook is the destination type whose events Herald POSTs to a URL,
// signed per the Standard Webhooks specification (docs/webhooks.md).
const Webhook = "WEBHOOK"

// WebhookConfig is a webhook destination's push configuration, as GET
// and the create and update answers show it (Destination.Webhook). It
// never holds the signing secret.
type WebhookConfig struct {
	URL string `json:"url"`
	// TimeoutSeconds bounds one delivery attempt (1–60).
	TimeoutSeconds int64 `json:"timeout"`
	// MaxBatch is the most events per request (1–100).
	MaxBatch int `json:"max_batch"`
	// RateLimit is the most deliveries per second; 0 is none.
	RateLimit float64 `json:"rate_limit"`
	// Ordered: one delivery in flight at a time, in sequence.
	Ordered bool `json:"ordered"`
	// ConsecutiveFailures counts the endpoint's failed attempts since its
	// last success (the circuit breaker's count).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// CircuitOpenedAt is when the circuit breaker opened; nil while it is
	// closed.
	CircuitOpenedAt *time.Time `json:"circuit_opened_at"`
	// Disabled says why pushes stopped (the endpoint answered 410 Gone);
	// "" while they go on. ResumeConsumer enables the destination again.
	Disabled string `json:"disabled"`
}

// WebhookOptions are CreateWebhook's parameters.
type WebhookOptions struct {
	// URL is the endpoint, https (Herald refuses loopback, private,
	// link-local and metadata addresses unless its deployment allows
	// them: an *Error, 422).
	URL string
	// FilterGroups select the events (nil: every event).
	FilterGroups []FilterGroup
	// Timeout bounds one attempt, whole seconds 1–60 (0: Herald's 15 s).
	Timeout time.Duration
	// MaxBatch is the most events per request, 1–100 (0: one each).
	MaxBatch int
	// RateLimit is the most deliveries per second, 0.001–1000 (0: none).
	RateLimit float64
	// Ordered asks for one delivery in flight at a time, in sequence.
	Ordered bool
	// RetryPolicy replaces Herald's retry schedule; DeadLetterPolicy sets
	// the number of attempts (nil: the schedule's 8).
	RetryPolicy      *ConsumerRetryPolicy
	DeadLetterPolicy *DeadLetterPolicy
}

// CreateWebhook creates a webhook destination (POST
// /v1/event-destinations with type WEBHOOK; needs manage:destinations)
// and returns it with its signing secret ("whsec_…"), which no later
// answer shows: keep it where the receiver can read it. A URL Herald
// refuses or a value out of range is an *Error (422).
func (c *Client) CreateWebhook(ctx context.Context, opts WebhookOptions) (d *Destination, secret string, err error) {
	body := map[string]any{"type": Webhook, "url": opts.URL, "filter_groups": nonNil(opts.FilterGroups)}
	if opts.Timeout != 0 {
		body["timeout"] = int64(opts.Timeout / time.Second)
	}
	if opts.MaxBatch != 0 {
		body["max_batch"] = opts.MaxBatch
	}
	if opts.RateLimit != 0 {
		body["rate_limit"] = opts.RateLimit
	}
	if opts.Ordered {
		body["ordered"] = true
	}
	if opts.RetryPolicy != nil {
		body["retry_policy"] = opts.RetryPolicy
	}
	if opts.DeadLetterPolicy != nil {
		body["dead_letter_policy"] = opts.DeadLetterPolicy
	}
	var out struct {
		Destination
		Secret string `json:"secret"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/event-destinations", body: body}, &out); err != nil {
		return nil, "", err
	}
	return &out.Destination, out.Secret, nil
}

// WebhookUpdate is UpdateWebhook's change: a nil member stays as it is.
// RemoveRateLimit removes the rate limit and wins over RateLimit.
type WebhookUpdate struct {
	// URL is the new endpoint; a new URL closes the circuit breaker and
	// enables a destination disabled by a 410.
	URL             *string
	Timeout         *time.Duration
	MaxBatch        *int
	RateLimit       *float64
	RemoveRateLimit bool
	Ordered         *bool
	// Policies change the delivery policies as UpdateConsumer does.
	Policies PolicyUpdate
}

// UpdateWebhook changes a webhook destination (PATCH
// /v1/event-destinations/{id}) and returns it. Every member is checked
// before anything changes: a value out of range or a refused URL is an
// *Error (422) and changes nothing.
func (c *Client) UpdateWebhook(ctx context.Context, id string, u WebhookUpdate) (*Destination, error) {
	body := policyBody(u.Policies)
	if u.URL != nil {
		body["url"] = *u.URL
	}
	if u.Timeout != nil {
		body["timeout"] = int64(*u.Timeout / time.Second)
	}
	if u.MaxBatch != nil {
		body["max_batch"] = *u.MaxBatch
	}
	switch {
	case u.RemoveRateLimit:
		body["rate_limit"] = nil
	case u.RateLimit != nil:
		body["rate_limit"] = *u.RateLimit
	}
	if u.Ordered != nil {
		body["ordered"] = *u.Ordered
	}
	var d Destination
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: consumerPath(id), body: body}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// RotateWebhookSecret gives a webhook destination a new signing secret
// and returns it (POST /v1/event-destinations/{id}/rotate-secret): for
// the next 24 hours deliveries carry the old secret's signature too.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (string, error) {
	var out struct {
		Secret string `json:"secret"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: consumerPath(id, "rotate-secret")}, &out); err != nil {
		return "", err
	}
	return out.Secret, nil
}

// WebhookAttempt is one delivery attempt of a webhook destination.
type WebhookAttempt struct {
	At        time.Time `json:"at"`
	WebhookID string    `json:"webhook_id"`
	// Attempt is the delivery's attempt number, 1 for the first.
	Attempt int64 `json:"attempt"`
	Events  int   `json:"events"`
	// Status is the answer's HTTP status; 0 when there was none.
	Status    int   `json:"status"`
	LatencyMs int64 `json:"latency_ms"`
	// ResponseBody is the first 1,024 bytes of the answer's body.
	ResponseBody string `json:"response_body"`
	// Error says why an attempt without an answer failed.
	Error string `json:"error"`
}

// WebhookAttempts returns a webhook destination's recent delivery
// attempts, newest first: the last 100, none older than 24 hours (GET
// /v1/event-destinations/{id}/attempts). An attempt shows once the push
// run that made it has left the destination.
func (c *Client) WebhookAttempts(ctx context.Context, id string) ([]WebhookAttempt, error) {
	var out struct {
		Attempts []WebhookAttempt `json:"attempts"`
	}
	if _, err := c.do(ctx, request{method: http.MethodGet, path: consumerPath(id, "attempts")}, &out); err != nil {
		return nil, err
	}
	return out.Attempts, nil
}
