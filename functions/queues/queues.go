// Package queues serves the notifications API's durable-queue management:
//
//	POST   /api/v1beta/queues/durable  {"queue_id"?, "filter_groups"?}
//	       → 201 {"queue_id", "created": true, "filter_groups"}   a new queue with the supplied id
//	       → 200 {"queue_id", "created": false, "filter_groups"}  the queue already existed: its own filters
//	       → 200 {"queue_id", "created": true, "filter_groups"}   no id supplied: Herald generated one
//	PATCH  /api/v1beta/queues/durable  {"queue_id", "current_filter_groups", "new_filter_groups"} → 200 {"success": true}
//	DELETE /api/v1beta/queues/durable?queue_id=ID                                                → 200 {"success": true}
//
// Permissions: create-durable-queues for POST and PATCH, delete-durable-queues
// for DELETE (403 without). queue_id must match ^[A-Za-z0-9._-]{1,200}$;
// one that does not is 422 before the broker or the store is contacted. An
// unknown queue is 404; invalid filter groups are 422; a body that is not
// JSON of the documented shape is 400.
//
// PATCH is a compare-and-set: current_filter_groups must be the filters the
// queue has (groups and filters in any order), else 422 and nothing
// changes; a PATCH whose new_filter_groups the queue already has succeeds
// whatever current_filter_groups says, so retrying an applied update is
// safe. The queue's filters can be read back with POST (created false).
// The broker subscription is re-filtered without losing what it holds.
//
// Herald's additions: POST and PATCH also take the delivery policies
// (delivery.PolicyFields): retry_policy, dead_letter_policy and
// ack_timeout (seconds an unsettled stream event stays with its stream).
// POST applies them only when it creates the queue; a PATCH that sets a
// policy may leave out both filter members, which then stay as they are.
// GET /v1/event-destinations/{queue_id} shows them.
package queues

import (
	"net/http"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/leasestore"
)

const maxBody = 256 << 10

// Queue is the answer of POST /api/v1beta/queues/durable.
type Queue struct {
	QueueID string `json:"queue_id"`
	// Created is true when this call created the queue.
	Created bool `json:"created"`
	// FilterGroups are the queue's filters: for an existing queue its own,
	// whatever the request sent.
	FilterGroups filter.Groups `json:"filter_groups"`
}

// Normalize returns gs with every nil list made empty, so that JSON shows
// [] rather than null.
func Normalize(gs filter.Groups) filter.Groups {
	out := make(filter.Groups, len(gs))
	for i, g := range gs {
		out[i] = g
		if g.Filters == nil {
			out[i].Filters = []filter.ResourceFilter{}
		}
	}
	return out
}

// Success is the answer of PATCH and DELETE.
type Success struct {
	Success bool `json:"success"`
}

// Handler serves the endpoints above.
type Handler struct {
	Service *delivery.Service
}

// Create serves POST /api/v1beta/queues/durable.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.create)(w, r) }

// Update serves PATCH /api/v1beta/queues/durable.
func (h *Handler) Update(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.update)(w, r) }

// Delete serves DELETE /api/v1beta/queues/durable?queue_id=ID.
func (h *Handler) Delete(w http.ResponseWriter, r *http.Request) { httpx.Endpoint(h.delete)(w, r) }

// createRequest is the body of POST.
type createRequest struct {
	QueueID      string        `json:"queue_id"`
	FilterGroups filter.Groups `json:"filter_groups"`
	delivery.PolicyFields
}

// updateRequest is the body of PATCH.
type updateRequest struct {
	QueueID             string        `json:"queue_id"`
	CurrentFilterGroups filter.Groups `json:"current_filter_groups"`
	NewFilterGroups     filter.Groups `json:"new_filter_groups"`
	delivery.PolicyFields
}

func (h *Handler) create(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	req, err := httpx.Decode[createRequest](r, maxBody)
	if err != nil {
		return httpx.Answer{}, err
	}
	pol, err := req.PolicyFields.Apply(leasestore.Policies{}, leasestore.TypeDurableQueue)
	if err != nil {
		return httpx.Answer{}, err
	}
	q, err := h.Service.CreateQueue(r.Context(), p, delivery.CreateQueueParams{ID: req.QueueID, FilterGroups: req.FilterGroups, Policies: pol})
	if err != nil {
		return httpx.Answer{}, err
	}
	status := http.StatusOK
	if q.Created && req.QueueID != "" {
		status = http.StatusCreated
	}
	return httpx.Answer{Status: status, Body: Queue{QueueID: q.Queue.ID, Created: q.Created, FilterGroups: Normalize(q.Queue.Filters)}}, nil
}

func (h *Handler) update(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	req, err := httpx.Decode[updateRequest](r, maxBody)
	if err != nil {
		return httpx.Answer{}, err
	}
	if req.PolicyFields.Any() {
		if _, err := h.Service.UpdateQueuePolicies(r.Context(), p, req.QueueID, req.PolicyFields); err != nil {
			return httpx.Answer{}, err
		}
		if req.CurrentFilterGroups == nil && req.NewFilterGroups == nil {
			return httpx.Answer{Status: http.StatusOK, Body: Success{Success: true}}, nil
		}
	}
	if err := h.Service.UpdateQueueFilters(r.Context(), p, req.QueueID, req.CurrentFilterGroups, req.NewFilterGroups); err != nil {
		return httpx.Answer{}, err
	}
	return httpx.Answer{Status: http.StatusOK, Body: Success{Success: true}}, nil
}

func (h *Handler) delete(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
	if err := h.Service.DeleteQueue(r.Context(), p, r.URL.Query().Get("queue_id")); err != nil {
		return httpx.Answer{}, err
	}
	return httpx.Answer{Status: http.StatusOK, Body: Success{Success: true}}, nil
}
