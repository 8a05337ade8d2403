// Package acknowledge serves the durable-consumer API's "Acknowledge a batch":
//
//	POST /v1/event-destinations/{id}/acknowledge
//	{"leaseId": "…", "generation": 0, "status": "ok" | "failed"}
//	→ 200 {"status": "committed" | "requeued" | "stale", "committed": "<sequence>"}
//
// committed is the committed cursor after the call: the sequence of the last
// event of the contiguous run of acknowledged batches, and before the first
// commit the zero position of the sequence format, "001.00000000000000000000"
// (never null: the Occtoo .NET SDK requires a string). A body without
// leaseId, generation or a valid status is 400, and so is a destination that
// is not a durable consumer (a durable or non-durable queue); an unknown
// destination is 404. Acknowledging works while the consumer is paused.
package acknowledge

import (
	"net/http"

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
		Type: leasestore.TypeDurableConsumer,
	})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteRawJSON(w, http.StatusOK, appendResponse(make([]byte, 0, 64), res.Outcome, res.Committed))
}

// appendResponse appends the JSON of Response{status, committed} to dst,
// byte for byte what json.Marshal writes for it (the outcomes and
// sequences are plain ASCII), without its reflection: an acknowledgement
// is a third of the requests a consumer makes.
func appendResponse(dst []byte, status leasestore.Outcome, committed int64) []byte {
	dst = append(dst, `{"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","committed":"`...)
	dst = append(dst, cloudevent.FormatSequence(committed)...)
	return append(dst, `"}`...)
}
