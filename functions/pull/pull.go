// Package pull serves the durable-consumer API's "Pull a batch":
//
//	POST /v1/event-destinations/{id}/pull?limit=20&visibility=60&workerId=worker-1
//
// limit is 1–100 (default 20), visibility 1–600 seconds (default 60),
// workerId at most 200 characters (absent: the one shared identity); a value
// out of range or not an integer is 400. Answers: 200 with a lease, 204 when
// caught up, 409 when paused, 429 with Retry-After, the in-flight count and
// the committed and last dispatched sequences when 1,000 events are leased
// and unacknowledged, 400 for a destination that is not a durable consumer,
// 404 for an unknown id.
//
// A batch stops before the first event whose type the caller may not read
// (it lacks a matching receive:PATTERN); when that is the next event, the
// pull is 403 naming the type, with Retry-After, and nothing is handed out
// or counted: the event waits for a worker that may read it
// (delivery.Service.Pull).
//
// The 200 body is built by appending bytes: the events are already encoded
// CloudEvents, and only their `sequence` is spliced in.
package pull

import (
	"net/http"
	"strconv"
	"time"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/bufpool"
	"github.com/heraldevents/herald/leasestore"
)

// Handler serves the pull endpoint.
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
	req, err := parse(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	lease, err := h.Service.Pull(r.Context(), p, req)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if lease == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	buf := bufpool.Get(leaseSize(lease))
	*buf = AppendLease(*buf, lease)
	httpx.WriteRawJSON(w, http.StatusOK, *buf)
	bufpool.Put(buf)
}

func parse(r *http.Request) (delivery.PullRequest, error) {
	q := r.URL.Query()
	req := delivery.PullRequest{
		Destination: r.PathValue("id"),
		Worker:      q.Get("workerId"),
		Limit:       delivery.DefaultPullLimit,
		Visibility:  delivery.DefaultVisibility,
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return req, herr.New(herr.OutOfRange, "limit must be an integer between 1 and %d", delivery.MaxPullLimit)
		}
		req.Limit = n
	}
	if s := q.Get("visibility"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > int(delivery.MaxVisibility/time.Second) {
			return req, herr.New(herr.OutOfRange, "visibility must be an integer number of seconds between 1 and %d", int(delivery.MaxVisibility/time.Second))
		}
		req.Visibility = time.Duration(n) * time.Second
	}
	return req, req.Validate()
}

// leaseSize is about the length of l's answer (AppendLease).
func leaseSize(l *leasestore.Lease) int {
	size := 128
	for _, e := range l.Events {
		size += len(e) + 40
	}
	return size
}

// AppendLease appends the durable-consumer API's "200 response" JSON of l to dst:
// {"leaseId","generation","attempt","expiresAt","events":[CloudEvent…]}.
// A nil entry of l.Events is left out, and the others keep their
// sequences.
func AppendLease(dst []byte, l *leasestore.Lease) []byte {
	if dst == nil {
		dst = make([]byte, 0, leaseSize(l))
	}
	dst = append(dst, `{"leaseId":`...)
	dst = strconv.AppendQuote(dst, l.ID)
	dst = append(dst, `,"generation":`...)
	dst = strconv.AppendInt(dst, l.Generation, 10)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, l.Attempt, 10)
	dst = append(dst, `,"expiresAt":"`...)
	dst = l.ExpiresAt.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","events":[`...)
	first := true
	for i, e := range l.Events {
		if e == nil {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = cloudevent.AppendWithSequence(dst, e, l.Start+int64(i))
	}
	return append(dst, "]}"...)
}
