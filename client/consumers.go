package client

import (
	"context"
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
	var d Destination
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/event-destinations",
		body: map[string]any{"type": DurableConsumer, "filter_groups": nonNil(filters)}}, &d)
	if err != nil {
		return nil, err
	}
	return &d, nil
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
