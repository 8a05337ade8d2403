// Package deadletters serves the operator's view of the dead-letter queue
// over REST:
//
//	GET  /api/v1beta/dead-letters?limit=20&page_token=T
//	     → 200 {"dead_letters": [DeadLetter…], "next_page_token": "…"}
//	POST /api/v1beta/dead-letters/actions {"actions": [{"id": "…", "action": "REPLAY|DISCARD|LEAVE"}]}
//	     → 200 {"outcomes": [{"id", "action", "outcome", "detail"}…]}
//
// The notifications API offers dead-letter triage only as the gRPC stream
// ManageDeadLetteredEvents, whose delivery tags live as long as the stream.
// Herald adds these two REST calls over the same store: a dead letter is
// named by its stable id instead of a session tag, and every action gets
// exactly one outcome, in request order: REPLAYED (the event is back on the
// exact queue it came from, with a fresh delivery budget, and the dead
// letter is gone), DISCARDED, LEFT, ORIGIN_QUEUE_DELETED (the dead letter
// stays: re-create the queue to replay it) or REPLAY_FAILED (the replay
// could not be confirmed; the dead letter stays). An id that is not in the
// dead-letter queue is DISCARDED for DISCARD (nothing left to drop) and
// REPLAY_FAILED for REPLAY, with a detail saying so.
//
// Both need inspect-and-replay-all-dlq (403 without), which grants
// deployment-wide visibility and action by design. limit is 1–100 (default
// 20): not an integer is 400, out of range 422. An empty or over-long (more
// than 100) action list, a missing id or an unknown action is 422, and
// nothing is done.
package deadletters

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

const maxBody = 64 << 10

// DeadLetter is one item of the listing: the notifications API's DeadLetteredEvent with
// a stable id instead of a delivery tag.
type DeadLetter struct {
	ID string `json:"id"`
	// Reason is DELIVERY_LIMIT, EXPIRED, MAXLEN or REJECTED (a consumer
	// answered rejected).
	Reason string `json:"reason"`
	// OriginQueue is the id of the queue (or durable consumer) the event
	// was dead-lettered from; a replay returns it there.
	OriginQueue string `json:"origin_queue"`
	// DeliveryCount is how often the event was delivered before.
	DeliveryCount  int64     `json:"delivery_count"`
	DeadLetteredAt time.Time `json:"dead_lettered_at"`
	// Event is the consumer form of the event (event_type,
	// principal_identity, occurred_at, published_at, message).
	Event *delivery.ConsumerEvent `json:"event"`
	// ResourceID is the event's resource id ("" for none).
	ResourceID string `json:"resource_id"`
}

// FromStore converts a stored dead letter.
func FromStore(d *leasestore.DeadLetter) (DeadLetter, error) {
	ev, err := delivery.DecodeConsumerEvent(d.Body)
	if err != nil {
		return DeadLetter{}, err
	}
	return DeadLetter{
		ID: d.ID, Reason: d.Reason, OriginQueue: d.OriginQueue, DeliveryCount: d.DeliveryCount,
		DeadLetteredAt: d.DeadLetteredAt.UTC(), Event: ev, ResourceID: d.ResourceID,
	}, nil
}

// Page is the answer of the listing.
type Page struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	// NextPageToken is "" after the last page.
	NextPageToken string `json:"next_page_token"`
}

// Outcome is one action's report.
type Outcome struct {
	ID      string `json:"id"`
	Action  string `json:"action"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// Handler serves the endpoints above.
type Handler struct {
	Service *delivery.Service
}

// List serves GET /api/v1beta/dead-letters.
func (h *Handler) List(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err == nil {
		err = p.Require(auth.PermInspectDeadLetters)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	q := r.URL.Query()
	limit := 0
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil {
			httpx.WriteError(w, r, herr.New(herr.Malformed, "limit must be an integer between 1 and %d", delivery.MaxDeadLetterPage))
			return
		}
		if limit == 0 {
			limit = -1 // explicit 0 is out of range, not the default
		}
	}
	dls, next, err := h.Service.ListDeadLetters(r.Context(), p, limit, q.Get("page_token"))
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	page := Page{DeadLetters: make([]DeadLetter, 0, len(dls)), NextPageToken: next}
	for _, d := range dls {
		item, err := FromStore(d)
		if err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		page.DeadLetters = append(page.DeadLetters, item)
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}

// Act serves POST /api/v1beta/dead-letters/actions.
func (h *Handler) Act(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err == nil {
		err = p.Require(auth.PermInspectDeadLetters)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var req struct {
		Actions []struct {
			ID     string `json:"id"`
			Action string `json:"action"`
		} `json:"actions"`
	}
	if err := httpx.DecodeJSON(r, maxBody, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	reqs := make([]delivery.DeadLetterRequest, len(req.Actions))
	for i, a := range req.Actions {
		if err := delivery.CheckText(fmt.Sprintf("actions[%d].id", i), a.ID); err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		act, err := delivery.ParseDeadLetterAction(a.Action)
		if err != nil {
			httpx.WriteError(w, r, herr.InField(herr.New(herr.InvalidArgument, "actions[%d].action must be REPLAY, DISCARD or LEAVE", i), "body", "actions", i, "action"))
			return
		}
		reqs[i] = delivery.DeadLetterRequest{ID: a.ID, Action: act}
	}
	res, err := h.Service.ActOnDeadLetters(r.Context(), p, reqs)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := make([]Outcome, len(res))
	for i, o := range res {
		out[i] = Outcome{ID: o.ID, Action: string(o.Action), Outcome: string(o.Outcome), Detail: o.Detail}
		telemetry.Triaged(r.Context(), string(o.Action), string(o.Outcome))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string][]Outcome{"outcomes": out})
}
