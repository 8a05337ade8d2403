package client

import (
	"context"
	"encoding/json"
	"errors"
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
	// MaxRetryAfter is the longest retry delay of a failed acknowledgement
	// (43,200 s, 12 hours).
	MaxRetryAfter = 12 * time.Hour
	// MaxLeaseLife is how long a lease can be kept by extending it, from
	// its hand-out (12 hours, SQS's cap of a visibility timeout); an
	// extension past it is an *Error (400).
	MaxLeaseLife = 12 * time.Hour
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
	// AckRejected gives up on the batch: its events go to the dead-letter
	// queue at once (reason REJECTED), whatever their delivery count, and
	// the cursor passes them.
	AckRejected AckStatus = "rejected"
)

// Ack outcomes.
const (
	OutcomeCommitted = "committed" // the batch is done
	OutcomeRequeued  = "requeued"  // failed: it comes again
	OutcomeStale     = "stale"     // the lease was handed to another worker: nothing committed
	// OutcomeDeadLettered answers AckRejected: the events are dead letters.
	OutcomeDeadLettered = "dead_lettered"
	// OutcomeExtended answers Extend: the lease is kept until ExpiresAt.
	OutcomeExtended = "extended"
)

// AckResult is Herald's answer to an acknowledgement.
type AckResult struct {
	// Outcome is OutcomeCommitted, OutcomeRequeued, OutcomeDeadLettered or
	// OutcomeStale.
	Outcome string `json:"status"`
	// Committed is the committed cursor after the call; nil before the
	// first commit.
	Committed *string `json:"committed"`
}

// Ack is an acknowledgement with its options, for AcknowledgeWith.
type Ack struct {
	// Status is AckOK, AckFailed or AckRejected.
	Status AckStatus
	// RetryAfter, only with AckFailed, keeps the lease from being handed
	// out again before it passes, while other leases and new events flow;
	// then it is redelivered before new work. Whole seconds, 0–12 h
	// (MaxRetryAfter). Zero sends no retryAfter: the consumer's retry
	// policy applies (at once when it has none).
	RetryAfter time.Duration
}

// Acknowledge reports a lease's outcome
// (POST /v1/event-destinations/{id}/acknowledge). It works while the
// consumer is paused. A retried ok or rejected whose first attempt was
// applied (its answer lost) answers as the first did, OutcomeCommitted or
// OutcomeDeadLettered: Herald remembers an applied acknowledgement for at
// least 10 minutes, unless 128 batches settled since push it out first
// (docs/api.md, "Delivery guarantees"); a later repeat answers
// OutcomeStale. It is
// AcknowledgeWith without a retry delay.
func (c *Client) Acknowledge(ctx context.Context, destinationID string, l *Lease, status AckStatus) (AckResult, error) {
	return c.AcknowledgeWith(ctx, destinationID, l, Ack{Status: status})
}

// AcknowledgeWith reports a lease's outcome with its options
// (POST /v1/event-destinations/{id}/acknowledge): AckOK answers
// OutcomeCommitted, AckFailed OutcomeRequeued (redelivered after
// a.RetryAfter, or as the retry policy says), AckRejected
// OutcomeDeadLettered; a lease that is no longer this worker's answers
// OutcomeStale, not an error. A RetryAfter that is not whole seconds, is
// negative or above MaxRetryAfter, or comes without AckFailed is an error
// before any call.
func (c *Client) AcknowledgeWith(ctx context.Context, destinationID string, l *Lease, a Ack) (AckResult, error) {
	body := map[string]any{"leaseId": l.ID, "generation": l.Generation, "status": a.Status}
	if a.RetryAfter != 0 {
		switch {
		case a.Status != AckFailed:
			return AckResult{}, errors.New("herald client: Ack.RetryAfter goes only with AckFailed")
		case a.RetryAfter < 0 || a.RetryAfter > MaxRetryAfter || a.RetryAfter%time.Second != 0:
			return AckResult{}, fmt.Errorf("herald client: Ack.RetryAfter %v is not whole seconds from 0 to %v", a.RetryAfter, MaxRetryAfter)
		}
		body["retryAfter"] = int64(a.RetryAfter / time.Second)
	}
	var out AckResult
	_, err := c.do(ctx, request{method: http.MethodPost, path: consumerPath(destinationID, "acknowledge"), body: body}, &out)
	return out, err
}

// ExtendResult is Herald's answer to Extend.
type ExtendResult struct {
	// Outcome is OutcomeExtended, or OutcomeStale when the lease is no
	// longer this worker's (not the current generation, acknowledged, or
	// handed to someone else), as for AckResult: a stale extension is an
	// answer, not an error.
	Outcome string `json:"status"`
	// ExpiresAt is the lease's new expiry, on Herald's clock; zero when
	// stale.
	ExpiresAt time.Time `json:"expiresAt"`
}

// Extend keeps a lease: it now expires visibility from now
// (POST /v1/event-destinations/{id}/extend). visibility is whole seconds
// from 1 s to 600 s (MaxVisibility), else an error before any call. It
// works while the consumer is paused. A stale lease answers OutcomeStale;
// an extension past the lease's life of MaxLeaseLife from its hand-out is
// an *Error (400), as are the acknowledge's 400/404 cases. l is not
// changed: the new expiry is in the result.
func (c *Client) Extend(ctx context.Context, destinationID string, l *Lease, visibility time.Duration) (ExtendResult, error) {
	if visibility < time.Second || visibility > MaxVisibility || visibility%time.Second != 0 {
		return ExtendResult{}, fmt.Errorf("herald client: extend visibility %v is not whole seconds from 1s to %v", visibility, MaxVisibility)
	}
	var out ExtendResult
	_, err := c.do(ctx, request{method: http.MethodPost, path: consumerPath(destinationID, "extend"),
		body: map[string]any{"leaseId": l.ID, "generation": l.Generation, "visibility": int64(visibility / time.Second)}}, &out)
	return out, err
}
