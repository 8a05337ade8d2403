// Package acknowledge serves the durable-consumer API's "Acknowledge a batch",
// and Herald's extension of a lease:
//
//	POST /v1/event-destinations/{id}/acknowledge
//	{"leaseId": "…", "generation": 0, "status": "ok" | "failed" | "rejected", "retryAfter": 30}
//	→ 200 {"status": "committed" | "requeued" | "stale" | "dead_lettered", "committed": "<sequence>"}
//
//	POST /v1/event-destinations/{id}/extend
//	{"leaseId": "…", "generation": 0, "visibility": 300}
//	→ 200 {"status": "extended", "expiresAt": "<RFC 3339>"} | {"status": "stale"}
//
// committed is the committed cursor after the call: the sequence of the last
// event of the contiguous run of acknowledged batches, and before the first
// commit the zero position of the sequence format, "001.00000000000000000000"
// (never null: the Occtoo .NET SDK requires a string). A body without
// leaseId, generation or a valid status is 400, and so is a destination that
// is not a durable consumer (a durable or non-durable queue); an unknown
// destination is 404. Acknowledging and extending work while the consumer
// is paused.
//
// Herald's additions to the durable-consumer API: retryAfter (whole
// seconds, 0–43,200, only with "failed") keeps a failed lease from being
// handed out again before it passes; "rejected" sends the lease's events to
// the dead-letter queue at once (reason REJECTED); extend moves a held
// lease's expiry to visibility seconds (1–600) from now, up to 12 hours
// after the lease was handed out (400 past that). Bodies are strict: an
// unknown or repeated member is 400 naming it.
package acknowledge

import (
	"net/http"
	"time"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

const maxBody = 4 << 10

// Request is the acknowledge body.
type Request struct {
	LeaseID    string               `json:"leaseId"`
	Generation *int64               `json:"generation"`
	Status     leasestore.AckStatus `json:"status"`
	// RetryAfter, with status "failed", is the least number of seconds
	// before the lease is handed out again (0–43,200); absent, the
	// destination's retry policy decides (none: at once).
	RetryAfter *int64 `json:"retryAfter,omitempty"`
}

// Response is the acknowledge answer.
type Response struct {
	Status leasestore.Outcome `json:"status"`
	// Committed is a sequence, "001.00000000000000000000" before the
	// first commit.
	Committed string `json:"committed"`
}

// Handler serves the acknowledge endpoint.
type Handler struct {
	Service *delivery.Service
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var req Request
	if err := httpx.DecodeJSON(r, maxBody, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	err = checkLease(r, req.LeaseID, req.Generation)
	switch {
	case err != nil:
	case req.Status != leasestore.StatusOK && req.Status != leasestore.StatusFailed && req.Status != leasestore.StatusRejected:
		err = herr.New(herr.Malformed, `status must be "ok", "failed" or "rejected"`)
	case req.RetryAfter != nil && req.Status != leasestore.StatusFailed:
		err = herr.New(herr.Malformed, `retryAfter is only allowed with status "failed"`)
	case req.RetryAfter != nil && (*req.RetryAfter < 0 || *req.RetryAfter > int64(leasestore.MaxRetryAfter/time.Second)):
		err = herr.New(herr.OutOfRange, "retryAfter must be between 0 and %d seconds", int64(leasestore.MaxRetryAfter/time.Second))
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	a := leasestore.AckParams{
		Consumer: r.PathValue("id"), LeaseID: req.LeaseID, Generation: *req.Generation, Status: req.Status,
		Type: leasestore.TypeDurableConsumer,
	}
	if req.RetryAfter != nil {
		d := time.Duration(*req.RetryAfter) * time.Second
		a.RetryAfter = &d
	}
	res, err := h.Service.Acknowledge(r.Context(), p, a)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, Response{Status: res.Outcome, Committed: cloudevent.FormatSequence(res.Committed)})
}

// checkLease applies the rules acknowledge and extend share: a leaseId and
// a generation are required, and they and the destination id are text.
func checkLease(r *http.Request, leaseID string, generation *int64) error {
	switch {
	case leaseID == "":
		return herr.New(herr.Malformed, "leaseId is required")
	case delivery.CheckText("leaseId", leaseID) != nil:
		return delivery.CheckText("leaseId", leaseID)
	case delivery.CheckText("the event destination id", r.PathValue("id")) != nil:
		return delivery.CheckText("the event destination id", r.PathValue("id"))
	case generation == nil || *generation < 0:
		return herr.New(herr.Malformed, "generation is required and must not be negative")
	}
	return nil
}

// ExtendRequest is the extend body.
type ExtendRequest struct {
	LeaseID    string `json:"leaseId"`
	Generation *int64 `json:"generation"`
	// Visibility is the lease's new visibility timeout in seconds from
	// now, 1–600 as a pull's.
	Visibility *int64 `json:"visibility"`
}

// ExtendResponse is the extend answer: status "extended" with the new
// expiry, or "stale" without one.
type ExtendResponse struct {
	Status    leasestore.Outcome `json:"status"`
	ExpiresAt *time.Time         `json:"expiresAt,omitempty"`
}

// Extend serves the extend endpoint.
type Extend struct {
	Service *delivery.Service
}

// ServeHTTP implements http.Handler.
func (h *Extend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var req ExtendRequest
	if err := httpx.DecodeJSON(r, maxBody, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	maxVis := int64(delivery.MaxVisibility / time.Second)
	err = checkLease(r, req.LeaseID, req.Generation)
	if err == nil && (req.Visibility == nil || *req.Visibility < 1 || *req.Visibility > maxVis) {
		err = herr.New(herr.OutOfRange, "visibility is required and must be between 1 and %d seconds", maxVis)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res, err := h.Service.Extend(r.Context(), p, leasestore.ExtendParams{
		Consumer: r.PathValue("id"), LeaseID: req.LeaseID, Generation: *req.Generation,
		Visibility: time.Duration(*req.Visibility) * time.Second, Type: leasestore.TypeDurableConsumer,
	})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := ExtendResponse{Status: res.Outcome}
	if res.Outcome == leasestore.OutcomeExtended {
		at := res.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}
