// Package acknowledge serves seed 000's "Acknowledge a batch":
//
//	POST /v1/event-destinations/{id}/acknowledge
//	{"leaseId": "…", "generation": 0, "status": "ok" | "failed"}
//	→ 200 {"status": "committed" | "requeued" | "stale", "committed": "<sequence>" | null}
//
// committed is the committed cursor after the call: the sequence of the last
// event of the contiguous run of acknowledged batches, null before the first
// commit. A body without leaseId, generation or a valid status is 400; an
// unknown destination 404. Acknowledging works while the consumer is paused.
package acknowledge

import (
	"net/http"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/destinations"
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
}

// Response is the acknowledge answer.
type Response struct {
	Status    leasestore.Outcome `json:"status"`
	Committed *string            `json:"committed"`
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
	switch {
	case req.LeaseID == "":
		err = herr.New(herr.Malformed, "leaseId is required")
	case delivery.CheckText("leaseId", req.LeaseID) != nil:
		err = delivery.CheckText("leaseId", req.LeaseID)
	case delivery.CheckText("the event destination id", r.PathValue("id")) != nil:
		err = delivery.CheckText("the event destination id", r.PathValue("id"))
	case req.Generation == nil || *req.Generation < 0:
		err = herr.New(herr.Malformed, "generation is required and must not be negative")
	case req.Status != leasestore.StatusOK && req.Status != leasestore.StatusFailed:
		err = herr.New(herr.Malformed, `status must be "ok" or "failed"`)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res, err := h.Service.Acknowledge(r.Context(), p, leasestore.AckParams{
		Consumer: r.PathValue("id"), LeaseID: req.LeaseID, Generation: *req.Generation, Status: req.Status,
	})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, Response{Status: res.Outcome, Committed: destinations.Sequence(res.Committed)})
}
