package client

import (
	"context"
	"net/http"
	"net/url"
)

// Queue is a durable queue of the notifications API.
type Queue struct {
	ID string `json:"queue_id"`
	// Created is true when this call created the queue.
	Created bool `json:"created"`
	// FilterGroups are the queue's own filters (for an existing queue,
	// whatever the call sent).
	FilterGroups []FilterGroup `json:"filter_groups"`
}

// EnsureQueue makes sure the durable queue id exists
// (POST /api/v1beta/queues/durable; needs create-durable-queues): a new
// queue over filters, or the existing one with its own filters and
// Created false. An empty id makes Herald generate one. The id must match
// ^[A-Za-z0-9._-]{1,200}$; one that does not, or invalid filters, is an
// *Error (422). Queues without an attached stream for the idle window (24 h
// by default) are deleted with what they hold.
func (c *Client) EnsureQueue(ctx context.Context, id string, filters []FilterGroup) (*Queue, error) {
	body := map[string]any{"filter_groups": nonNil(filters)}
	if id != "" {
		body["queue_id"] = id
	}
	var q Queue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1beta/queues/durable", body: body}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// UpdateQueue moves a durable queue's filters from current (which must be
// the filters it has, in any order, else an *Error 422 and nothing
// changes) to next (PATCH /api/v1beta/queues/durable). Repeating an
// applied update succeeds, so a retry is safe.
func (c *Client) UpdateQueue(ctx context.Context, id string, current, next []FilterGroup) error {
	_, err := c.do(ctx, request{method: http.MethodPatch, path: "/api/v1beta/queues/durable", body: map[string]any{
		"queue_id": id, "current_filter_groups": nonNil(current), "new_filter_groups": nonNil(next),
	}}, nil)
	return err
}

// DeleteQueue deletes a durable queue and what it holds
// (DELETE /api/v1beta/queues/durable; needs delete-durable-queues). An
// unknown queue is an *Error for which IsNotFound is true.
func (c *Client) DeleteQueue(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1beta/queues/durable", query: url.Values{"queue_id": {id}}}, nil)
	return err
}
