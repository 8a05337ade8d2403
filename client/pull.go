package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Pull limits of the durable-consumer API.
const (
	DefaultPullLimit  = 20
	MaxPullLimit      = 100
	DefaultVisibility = 60 * time.Second
	MaxVisibility     = 600 * time.Second
	MaxWorkerIDLength = 200
)

// PullOptions are a pull's parameters. Zero fields take Herald's defaults.
type PullOptions struct {
	// Limit is the most events in the batch, 1–100 (default 20).
	Limit int
	// Visibility is the lease's visibility timeout, whole seconds from 1 s
	// to 600 s (default 60 s): the lease stays with this worker that long
	// before it is redelivered.
	Visibility time.Duration
	// WorkerID names the worker, at most 200 characters. Give every worker
	// its own; pulls without one share one identity.
	WorkerID string
}

// Lease is a leased batch.
type Lease struct {
	ID         string `json:"leaseId"`
	Generation int64  `json:"generation"`
	Attempt    int64  `json:"attempt"`
	// ExpiresAt is when the visibility timeout ends.
	ExpiresAt time.Time `json:"expiresAt"`
	// Events are CloudEvents 1.0 with the sequence extension ("sequence",
	// the event's position in this consumer's delivery order), and
	// "publishedat" and "principalidentity".
	Events []event.Event `json:"events"`
}

// Pull leases the next batch of destinationID
// (POST /v1/event-destinations/{id}/pull). It answers nil, nil when the
// consumer is caught up (204). A paused consumer (409) and a full
// in-flight window (429, with RetryAfter and InFlight set) are *Errors,
// not retried here. A worker that still holds a live lease gets that same
// lease back.
func (c *Client) Pull(ctx context.Context, destinationID string, opts PullOptions) (*Lease, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Visibility != 0 {
		if opts.Visibility%time.Second != 0 {
			return nil, fmt.Errorf("herald client: PullOptions.Visibility %v is not whole seconds", opts.Visibility)
		}
		q.Set("visibility", strconv.Itoa(int(opts.Visibility/time.Second)))
	}
	if opts.WorkerID != "" {
		q.Set("workerId", opts.WorkerID)
	}
	res, err := c.do(ctx, request{method: http.MethodPost, path: consumerPath(destinationID, "pull"), query: q,
		noRetry: []int{http.StatusTooManyRequests}}, nil)
	if err != nil {
		return nil, err
	}
	if res.status == http.StatusNoContent || len(res.body) == 0 {
		return nil, nil
	}
	var l Lease
	if err := json.Unmarshal(res.body, &l); err != nil {
		return nil, fmt.Errorf("herald client: pull: decode lease: %w", err)
	}
	return &l, nil
}

// AckStatus is what a worker reports for a lease.
type AckStatus string

// Acknowledgement statuses.
const (
	AckOK     AckStatus = "ok"     // processed: commit the batch
	AckFailed AckStatus = "failed" // not processed: redeliver it, with a higher attempt
)

// Ack outcomes.
const (
	OutcomeCommitted = "committed" // the batch is done
	OutcomeRequeued  = "requeued"  // failed: it comes again
	OutcomeStale     = "stale"     // the lease was handed to another worker: nothing committed
)

// AckResult is Herald's answer to an acknowledgement.
type AckResult struct {
	// Outcome is OutcomeCommitted, OutcomeRequeued or OutcomeStale.
	Outcome string `json:"status"`
	// Committed is the committed cursor after the call; nil before the
	// first commit.
	Committed *string `json:"committed"`
}

// Acknowledge reports a lease's outcome
// (POST /v1/event-destinations/{id}/acknowledge). It works while the
// consumer is paused. A retried ok whose first attempt was applied
// answers stale: the batch was committed all the same.
func (c *Client) Acknowledge(ctx context.Context, destinationID string, l *Lease, status AckStatus) (AckResult, error) {
	var out AckResult
	_, err := c.do(ctx, request{method: http.MethodPost, path: consumerPath(destinationID, "acknowledge"),
		body: map[string]any{"leaseId": l.ID, "generation": l.Generation, "status": status}}, &out)
	return out, err
}
