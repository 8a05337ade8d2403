package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// DurableConsumer is the destination type of the durable-consumer API.
const DurableConsumer = "DURABLE_CONSUMER"

// Destination is an event destination: a durable consumer, or (read by
// GetConsumer) a durable or non-durable queue.
type Destination struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	FilterGroups []FilterGroup `json:"filter_groups"`
	// Paused destinations hand out no leases (acknowledging still works).
	Paused    bool      `json:"paused"`
	CreatedAt time.Time `json:"created_at"`
	// Committed is the committed cursor, the sequence of the last event of
	// the contiguous run of acknowledged leases; nil before the first
	// commit.
	Committed *string `json:"committed"`
	// InFlight counts events leased and not acknowledged.
	InFlight int64 `json:"in_flight"`
	// Requeued counts in-flight events waiting for redelivery.
	Requeued int64 `json:"requeued"`
	// LiveSessions counts the streams attached to a queue now.
	LiveSessions int `json:"live_sessions"`
	// RetryPolicy is the consumer's backoff for failed and expired leases
	// (nil: none, redelivered at once).
	RetryPolicy *ConsumerRetryPolicy `json:"retry_policy"`
	// DeadLetterPolicy is the consumer's delivery limit (nil: the
	// deployment's HERALD_DELIVERY_LIMIT, 20).
	DeadLetterPolicy *DeadLetterPolicy `json:"dead_letter_policy"`
	// Webhook is a webhook destination's push configuration (nil for
	// other types, and in a listing).
	Webhook *WebhookConfig `json:"webhook,omitempty"`
}

// ConsumerRetryPolicy is a destination's retry_policy: a failed lease
// without a retry delay waits MinimumBackoff·2^(attempt−1), at most
// MaximumBackoff, before it is handed out again; an expired lease waits as
// long after its expiry. Both are whole seconds from 0 to 600 s,
// MinimumBackoff at most MaximumBackoff; both are always sent (Herald's
// defaults for an absent member, 10 s and 600 s, are not used). It is not
// the client's own RetryPolicy, which retries REST calls.
type ConsumerRetryPolicy struct {
	MinimumBackoff time.Duration
	MaximumBackoff time.Duration
}

// retryPolicyJSON is ConsumerRetryPolicy on the wire, in seconds.
type retryPolicyJSON struct {
	MinimumBackoff int64 `json:"minimum_backoff"`
	MaximumBackoff int64 `json:"maximum_backoff"`
}

// MarshalJSON encodes the backoffs as whole seconds (rounded down).
func (p ConsumerRetryPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(retryPolicyJSON{int64(p.MinimumBackoff / time.Second), int64(p.MaximumBackoff / time.Second)})
}

// UnmarshalJSON decodes the backoffs from seconds.
func (p *ConsumerRetryPolicy) UnmarshalJSON(b []byte) error {
	var v retryPolicyJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p.MinimumBackoff, p.MaximumBackoff = time.Duration(v.MinimumBackoff)*time.Second, time.Duration(v.MaximumBackoff)*time.Second
	return nil
}

// DeadLetterPolicy is a destination's dead_letter_policy: its events are
// dead-lettered instead of a delivery past MaxDeliveryAttempts (1–1,000).
type DeadLetterPolicy struct {
	MaxDeliveryAttempts int `json:"max_delivery_attempts"`
}

// ConsumerOptions are CreateConsumerWith's parameters.
type ConsumerOptions struct {
	// FilterGroups select the events (nil: every event).
	FilterGroups []FilterGroup
	// RetryPolicy and DeadLetterPolicy are the delivery policies (nil:
	// none; see Destination).
	RetryPolicy      *ConsumerRetryPolicy
	DeadLetterPolicy *DeadLetterPolicy
}

// PolicyUpdate is UpdateConsumer's change. A nil policy without its Remove
// flag stays as it is; a Remove flag removes the policy (sent as null) and
// wins over a value.
type PolicyUpdate struct {
	RetryPolicy            *ConsumerRetryPolicy
	RemoveRetryPolicy      bool
	DeadLetterPolicy       *DeadLetterPolicy
	RemoveDeadLetterPolicy bool
}

func consumerPath(id string, action ...string) string {
	p := "/v1/event-destinations/" + url.PathEscape(id)
	for _, a := range action {
		p += "/" + a
	}
	return p
}

// CreateConsumer creates a durable consumer over filters (nil: every
// event), starting at the head of the stream (POST /v1/event-destinations;
// needs manage:destinations). Invalid filters are an *Error (422).
func (c *Client) CreateConsumer(ctx context.Context, filters []FilterGroup) (*Destination, error) {
	return c.CreateConsumerWith(ctx, ConsumerOptions{FilterGroups: filters})
}

// CreateConsumerWith creates a durable consumer with delivery policies
// (POST /v1/event-destinations; needs manage:destinations). Invalid
// filters are an *Error (422); a policy out of its range an *Error (400
// or 422).
func (c *Client) CreateConsumerWith(ctx context.Context, opts ConsumerOptions) (*Destination, error) {
	body := map[string]any{"type": DurableConsumer, "filter_groups": nonNil(opts.FilterGroups)}
	if opts.RetryPolicy != nil {
		body["retry_policy"] = opts.RetryPolicy
	}
	if opts.DeadLetterPolicy != nil {
		body["dead_letter_policy"] = opts.DeadLetterPolicy
	}
	var d Destination
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/event-destinations", body: body}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// UpdateConsumer changes a durable consumer's delivery policies
// (PATCH /v1/event-destinations/{id}; needs manage:destinations) and
// returns the destination. An empty update changes nothing. A policy out
// of its range is an *Error (400 or 422); an unknown id one for which
// IsNotFound is true.
func (c *Client) UpdateConsumer(ctx context.Context, id string, u PolicyUpdate) (*Destination, error) {
	var d Destination
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: consumerPath(id), body: policyBody(u)}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// policyBody is u as the members of a PATCH body.
func policyBody(u PolicyUpdate) map[string]any {
	body := map[string]any{}
	switch {
	case u.RemoveRetryPolicy:
		body["retry_policy"] = nil
	case u.RetryPolicy != nil:
		body["retry_policy"] = u.RetryPolicy
	}
	switch {
	case u.RemoveDeadLetterPolicy:
		body["dead_letter_policy"] = nil
	case u.DeadLetterPolicy != nil:
		body["dead_letter_policy"] = u.DeadLetterPolicy
	}
	return body
}

// ListConsumers lists the destinations (GET /v1/event-destinations). A
// non-durable queue is listed with its id cut to a 7-character prefix,
// since its id is its reconnect token.
func (c *Client) ListConsumers(ctx context.Context) ([]Destination, error) {
	var out struct {
		Destinations []Destination `json:"destinations"`
	}
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/event-destinations"}, &out); err != nil {
		return nil, err
	}
	return out.Destinations, nil
}

// GetConsumer reads one destination: a durable consumer, or any queue by
// its id (GET /v1/event-destinations/{id}). An unknown id is an *Error for
// which IsNotFound is true.
func (c *Client) GetConsumer(ctx context.Context, id string) (*Destination, error) {
	var d Destination
	if _, err := c.do(ctx, request{method: http.MethodGet, path: consumerPath(id)}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// PauseConsumer stops id handing out leases; pulls answer 409 until
// ResumeConsumer.
func (c *Client) PauseConsumer(ctx context.Context, id string) (*Destination, error) {
	return c.setPaused(ctx, id, "pause")
}

// ResumeConsumer lets a paused consumer hand out leases again.
func (c *Client) ResumeConsumer(ctx context.Context, id string) (*Destination, error) {
	return c.setPaused(ctx, id, "resume")
}

func (c *Client) setPaused(ctx context.Context, id, action string) (*Destination, error) {
	var d Destination
	if _, err := c.do(ctx, request{method: http.MethodPost, path: consumerPath(id, action)}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeleteConsumer deletes a destination and its subscription (DELETE
// /v1/event-destinations/{id}).
func (c *Client) DeleteConsumer(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: consumerPath(id)}, nil)
	return err
}
