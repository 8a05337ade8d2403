// Package stream serves the notifications API's Server-Sent Events streams:
//
//	GET /api/v1beta/events/stream?filter_groups=JSON[&previous_filter_groups=JSON][&reconnect_token=T]
//	GET /api/v1beta/events/stream-durable?queue_id=ID
//
// # Opening
//
// Without a token, /events/stream opens a fresh non-durable queue with
// filter_groups (URL-encoded JSON, absent = every event). A reconnect
// token is sent in the Last-Event-ID header (preferred; a browser's
// EventSource does it on its own) or in the deprecated reconnect_token
// query parameter; the header wins when both are present, and an empty
// Last-Event-ID counts as absent (the SSE rule). The token alone resumes
// the queue on the filters it has, whatever filter_groups says (a browser
// replays the URL it opened); the token with previous_filter_groups moves
// the queue's filters from previous_filter_groups to filter_groups (a
// compare-and-set: previous_filter_groups must be the filters the queue
// has, else 422, unless it already has filter_groups). Without a token,
// previous_filter_groups is ignored. Clients that share a token split the
// queue's events between them.
//
// /events/stream-durable reads the durable queue queue_id (see package
// functions/queues).
//
// Before the stream opens, failures are plain HTTP errors with the JSON
// error body: 400 for filter groups that are not JSON, 401, 403 (a
// durable stream needs consume-durable-queues, a non-durable one at least
// one receive:PATTERN), 404 for an unknown queue or a token that names no
// live queue, 422 for invalid filter groups, a queue_id that does not match
// ^[A-Za-z0-9._-]{1,200}$, or a token that is not 1 to 200 printable ASCII
// characters (the message names the field and the rule and quotes none of
// the token).
//
// # Frames
//
// The response is 200 text/event-stream. The first frame is
//
//	event: connected
//	id: <token>
//	data: {"message":"Connection established","reconnect_token":"<token>"}
//
// where the token is the reconnect token (the queue id for durable
// streams); no other frame carries an id, so a browser's Last-Event-ID is
// always the token. Each event is
//
//	event: event
//	data: {"event_type":…,"principal_identity":…,"occurred_at":…,"published_at":…,"message":{…}}
//
// and a comment line ": keep-alive" is written every HERALD_SSE_KEEPALIVE
// (15 s) so idle connections survive proxies. Every event is checked
// against the caller's receive:PATTERN rights; one it may not read is
// acknowledged as skipped and never written.
//
// # Acknowledgement
//
// SSE has no client acknowledgement. The non-durable stream acknowledges an
// event once it was written and flushed; the durable stream HERALD_SSE_ACK_DELAY
// (1 s) after that. Events not yet acknowledged when the connection ends are
// put back in the queue and delivered again on the next connection.
//
// # Slow clients
//
// Every write must be taken by the client within HERALD_STREAM_WRITE_TIMEOUT
// (10 s): a client that stops reading is dropped then, and what it was not
// sent goes back to the queue as above, instead of the stream holding its
// session, its leased events and its connection for as long as the TCP
// connection lives. The deadline covers writes only, never a quiet stream
// waiting for events. What a stream holds for a slow client is bounded:
// one batch waiting to be written (at most 100 events), within the
// session's 100 unsettled events.
//
// # Errors on an open stream
//
// Once open, a failure is an SSE frame, after which the stream closes:
//
//	event: error
//	data: {"message":"…","status_code":404}
//
// status_code 404 when the queue is gone (deleted, or reaped under the
// stream): start afresh; 500 with the message "Internal Server Error: The
// broker cancelled this stream's consumer. Reconnect to resume consuming."
// when the stream's session was taken away while the queue is intact:
// reconnect with the same token or queue_id.
//
// # Authentication
//
// A browser's EventSource cannot set an Authorization header, so these two
// endpoints (and only these) also take the bearer token from the
// access_token query parameter (AccessTokenFromQuery). The header wins when
// both are given. The parameter is removed from the request before any
// handler or log sees it and is never echoed. Prefer the header where the
// client can set it: URLs end up in proxy logs and browser history.
package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// AccessTokenParam is the query parameter that carries a bearer token on the
// SSE endpoints.
const AccessTokenParam = "access_token"

// Handler serves the two SSE endpoints.
type Handler struct {
	Service *delivery.Service
}

// NonDurable serves GET /api/v1beta/events/stream.
func (h *Handler) NonDurable(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	req, err := parseNonDurable(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	st, err := h.Service.OpenStream(telemetry.WithTransport(r.Context(), "sse"), p, req)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	h.serve(w, r, st, 0)
}

// parseNonDurable reads the query and headers of a non-durable stream.
func parseNonDurable(r *http.Request) (delivery.StreamRequest, error) {
	q := r.URL.Query()
	req := delivery.StreamRequest{Kind: delivery.NonDurable}
	var err error
	if req.FilterGroups, err = filter.Parse("filter_groups", q.Get("filter_groups")); err != nil {
		return req, err
	}
	if q.Has("previous_filter_groups") {
		req.FilterUpdate = true
		if req.PreviousFilterGroups, err = filter.Parse("previous_filter_groups", q.Get("previous_filter_groups")); err != nil {
			return req, err
		}
	}
	switch {
	case r.Header.Get("Last-Event-ID") != "":
		req.ReconnectToken, req.TokenField = r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	case q.Has("reconnect_token"):
		req.ReconnectToken, req.TokenField = q.Get("reconnect_token"), "reconnect_token"
	default:
		return req, nil
	}
	return req, delivery.ValidateReconnectToken(req.TokenField, req.ReconnectToken)
}

// Durable serves GET /api/v1beta/events/stream-durable?queue_id=ID.
func (h *Handler) Durable(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	st, err := h.Service.OpenStream(telemetry.WithTransport(r.Context(), "sse"), p, delivery.StreamRequest{
		Kind: delivery.Durable, QueueID: r.URL.Query().Get("queue_id"),
	})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	h.serve(w, r, st, h.Service.Streams().AutoAckDelay)
}

// pendingAck is a written event the durable stream acknowledges at due.
type pendingAck struct {
	tag int64
	due time.Time
}

// serve runs an open stream until the client leaves or the stream fails.
// ackDelay 0 acknowledges each event once flushed; otherwise that long
// after.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, st *delivery.Stream, ackDelay time.Duration) {
	// The stream ends when the server shuts down, too (httpx.LongLived):
	// the browser's EventSource reconnects with Last-Event-ID.
	ctx, done, err := httpx.StreamContext(r.Context())
	if err != nil {
		_ = st.Close(r.Context())
		httpx.WriteError(w, r, err)
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan []delivery.Delivery)
	nextErr := make(chan error, 1)
	nextDone := make(chan struct{})
	defer func() {
		cancel()
		<-nextDone // no pull may outlive the session
		_ = st.Close(r.Context())
	}()

	sse := &writer{w: w, rc: http.NewResponseController(w), timeout: h.Service.Streams().WriteTimeout}
	defer sse.disarm()
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	// no-store, not just no-cache: the first frame carries the reconnect
	// token, which is as good as a credential for this queue.
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	connected, _ := json.Marshal(struct {
		Message        string `json:"message"`
		ReconnectToken string `json:"reconnect_token"`
	}{"Connection established", st.QueueID()})
	if sse.frame("connected", st.QueueID(), connected) != nil {
		close(nextDone)
		return
	}

	// A stream served by the hub is polled from this goroutine's select;
	// any other waits in Next on a goroutine of its own.
	poll := st.Pollable()
	if poll {
		close(nextDone)
	} else {
		go func() {
			defer close(nextDone)
			for {
				ds, err := st.Next(ctx)
				if err != nil {
					nextErr <- err
					return
				}
				select {
				case batches <- ds:
				case <-ctx.Done():
					return
				}
			}
		}()
	}

	keepAlive := time.NewTicker(h.Service.Streams().KeepAlive)
	defer keepAlive.Stop()
	var pending []pendingAck
	ackTimer := time.NewTimer(time.Hour)
	ackTimer.Stop()
	defer ackTimer.Stop()

	var eventBuf []byte // one event's JSON, reused
	// send writes a batch and acknowledges it (or schedules that); false
	// ends the stream.
	send := func(ds []delivery.Delivery) bool {
		tags := make([]int64, len(ds))
		for i, d := range ds {
			tags[i] = d.Tag
			data, err := d.Event.AppendJSON(eventBuf[:0])
			eventBuf = data
			if err != nil {
				sse.fail(herr.Wrap(herr.Internal, err, "an event could not be encoded"))
				return false
			}
			if sse.frame("event", "", data) != nil {
				return false
			}
		}
		if sse.flush() != nil {
			return false
		}
		if ackDelay <= 0 {
			if err := ack(ctx, st, tags); err != nil {
				if ctx.Err() == nil {
					sse.fail(err)
				}
				return false
			}
			return true
		}
		due := time.Now().Add(ackDelay)
		if len(pending) == 0 {
			ackTimer.Reset(ackDelay)
		}
		for _, t := range tags {
			pending = append(pending, pendingAck{tag: t, due: due})
		}
		return true
	}
	for {
		var wake <-chan struct{}
		if poll {
			ds, w, err := st.Poll()
			if err != nil {
				if ctx.Err() == nil {
					sse.fail(err)
				}
				return
			}
			if len(ds) > 0 {
				if !send(ds) {
					return
				}
				continue
			}
			wake = w
		}
		select {
		case <-ctx.Done():
			return
		case err := <-nextErr:
			if ctx.Err() == nil {
				sse.fail(err)
			}
			return
		case <-wake:
		case <-st.Done():
			// Poll says why at the top of the loop.
		case <-keepAlive.C:
			if sse.comment("keep-alive") != nil {
				return
			}
		case ds := <-batches:
			if !send(ds) {
				return
			}
		case <-ackTimer.C:
			now := time.Now()
			n := 0
			for n < len(pending) && !pending[n].due.After(now) {
				n++
			}
			tags := make([]int64, n)
			for i := range n {
				tags[i] = pending[i].tag
			}
			pending = pending[n:]
			if len(pending) > 0 {
				ackTimer.Reset(time.Until(pending[0].due))
			}
			if err := ack(ctx, st, tags); err != nil {
				if ctx.Err() == nil {
					sse.fail(err)
				}
				return
			}
		}
	}
}

// ack acknowledges events that were written and flushed. It runs to the
// end even when the client leaves meanwhile: what was flushed counts as
// delivered, and leaving it unacknowledged would deliver it again.
func ack(ctx context.Context, st *delivery.Stream, tags []int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := st.Ack(ctx, tags...)
	return err
}

// writer writes SSE frames. Every write has a deadline: a client that
// does not take a frame within timeout (StreamConfig.WriteTimeout) is
// dropped, so a client that stops reading cannot hold its session, its
// leased events and its connection for ever. What the stream holds for
// it meanwhile is bounded: at most one batch waits to be written
// (StreamConfig.Batch events), and a session holds at most
// StreamConfig.MaxUnsettled unacknowledged events.
type writer struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	armed   time.Time // when the write deadline was last moved
}

// arm gives the next writes until timeout from now. Until disarm, it
// moves the deadline at most every timeout/10 (a frame thus has at least
// nine tenths of it), not once per frame. A writer without deadlines (a
// test's recorder) is written without.
func (s *writer) arm() {
	now := time.Now()
	if s.timeout <= 0 || (!s.armed.IsZero() && now.Sub(s.armed) < s.timeout/10) {
		return
	}
	s.armed = now
	_ = s.rc.SetWriteDeadline(now.Add(s.timeout))
}

// disarm clears the deadline once what was written is flushed: the stream
// then waits for events, which may take hours, and over HTTP/2 a deadline
// that passes resets the stream, written or not; net/http would also
// leave it on an HTTP/1.1 connection for its next request.
func (s *writer) disarm() {
	if !s.armed.IsZero() {
		s.armed = time.Time{}
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

// frame writes one event frame (id omitted when "") and flushes it. data
// must be one line (compact JSON is).
func (s *writer) frame(event, id string, data []byte) error {
	s.arm()
	b := make([]byte, 0, len(data)+len(event)+len(id)+24)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, '\n')
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	if event == "event" {
		return nil // flushed once per batch
	}
	return s.flush()
}

// comment writes a comment line and flushes it.
func (s *writer) comment(text string) error {
	s.arm()
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.flush()
}

func (s *writer) flush() error {
	s.arm()
	defer s.disarm()
	return s.rc.Flush()
}

// fail writes the error frame that ends an open stream: the message and
// the HTTP status the failure would have had.
func (s *writer) fail(err error) {
	status := httpx.Status(herr.CodeOf(err))
	data := []byte(`{"message":`)
	msg, _ := json.Marshal(herr.MessageOf(err))
	data = append(data, msg...)
	data = append(data, `,"status_code":`...)
	data = strconv.AppendInt(data, int64(status), 10)
	data = append(data, '}')
	_ = s.frame("error", "", data)
}

// AccessTokenFromQuery lets a request carry its bearer token in the
// access_token query parameter, for clients that cannot set headers (a
// browser's EventSource). It must wrap the authenticating handler. The
// parameter is removed from the URL (and RequestURI) before next sees the
// request, so no handler or log sees it; an Authorization header, when
// present, wins.
func AccessTokenFromQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(httpx.WithQueryTokenAllowed(r.Context()))
		q := r.URL.Query()
		if !q.Has(AccessTokenParam) {
			next.ServeHTTP(w, r)
			return
		}
		token := q.Get(AccessTokenParam)
		q.Del(AccessTokenParam)
		r2 := r.WithContext(r.Context())
		u := *r.URL
		u.RawQuery = q.Encode()
		r2.URL = &u
		r2.RequestURI = u.RequestURI()
		if r.Header.Get("Authorization") == "" && token != "" {
			r2.Header = r.Header.Clone()
			r2.Header.Set("Authorization", "Bearer "+token)
		}
		next.ServeHTTP(w, r2)
	})
}
