// Package publish serves the notifications API's Publisher REST API:
//
//	POST /api/v1beta/events        {"event": Event}      → {"result": PublishingResult}
//	POST /api/v1beta/events/batch  {"events": [Event]}   → {"results": [PublishingResult]}
//
// # Members no one reads
//
// The published schemas of these bodies allow additional properties, so a
// body a client generated from them may send is taken whatever else it
// carries: a member the schemas define for an event elsewhere (the
// output-only published_at, principal_identity, id) and a member no
// schema defines (a top-level request_id, resource.kind) are accepted and
// ignored — not stored, delivered or echoed. They must still be JSON by
// the strict rules (valid UTF-8, no member name twice in one object).
// Herald's own bodies (the durable-consumer API, queues, frames) stay
// strict: an unknown member there is 400 naming it.
//
// # Results of failed events
//
// A result's event is always a valid published Event, success or not
// (validEcho): what was sent and is valid is echoed, the rest replaced
// (event_type "-", message {}, occurred_at the time of the request,
// resource left out), and an invalid event_type sent is quoted in the
// failure_reason.
//
// Status codes: 400 for a body that is not JSON of the documented shape,
// 401/403 for auth, 422 for a well-formed single event that breaks a rule
// (or an empty or over-long batch: 1–1,000 events in at most MaxBatchBody
// bytes), 200 otherwise. A 422 names the offending field (herr.InField).
// A broker failure is a 200 with success:false and a failure_reason: the
// event was not published.
// In a batch every event has its own result; an invalid event fails alone.
//
// # Idempotency keys
//
// The Idempotency-Key header keys a single publish or a whole batch; in
// a batch each event may carry its own idempotency_key instead (never
// both: 400). See delivery.Service.PublishItemsKeyed and docs/api.md.
package publish

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/bufpool"
	"github.com/heraldevents/herald/internal/strictjson"
)

// Body size caps. An event's message may be 256 KiB (delivery.MaxMessageBytes);
// the single cap leaves room for the rest of the JSON around it.
const (
	maxSingleBody = delivery.MaxMessageBytes + 64<<10
	// MaxBatchBody caps a batch's body at 5 MiB: the answer echoes every
	// event, and both must fit the 6 MB payload of an AWS Lambda
	// invocation. A batch of 1,000 (delivery.MaxBatchEvents) events thus
	// averages at most about 5 KiB an event.
	MaxBatchBody = 5 << 20
)

// WireEvent is the REST shape of an event.
type WireEvent struct {
	EventType  string          `json:"event_type"`
	Message    json.RawMessage `json:"message,omitempty"`
	OccurredAt string          `json:"occurred_at,omitempty"`
	Resource   *WireResource   `json:"resource,omitempty"`
	// IdempotencyKey, an additive member of an event in a batch, is the
	// event's own idempotency key (docs/api.md, "Idempotency keys"): 1–200
	// printable ASCII characters; nil for none. Never echoed. On a single
	// publish it is the same as the Idempotency-Key header (never both).
	IdempotencyKey *string `json:"idempotency_key,omitempty"`

	// scan is the check parseBatch made of Message while decoding it (the
	// zero Scan when it did not): toEvent and the echo do not scan the
	// message again.
	scan strictjson.Scan
}

// WireResource is the optional resource of an event.
type WireResource struct {
	ResourceID string `json:"resource_id"`
}

// Result is the notifications API's PublishingResult.
type Result struct {
	Event         *WireEvent `json:"event"`
	Success       bool       `json:"success"`
	FailureReason string     `json:"failure_reason,omitempty"`
	// Replayed, an additive member, says the result is the one the
	// request's idempotency key (or, in a batch, the event's own) first
	// answered: nothing was published now.
	Replayed bool `json:"replayed,omitempty"`
}

// Idempotency headers (docs/api.md, "Idempotency keys").
const (
	// HeaderIdempotencyKey carries a publish's idempotency key.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is "true" on the answer of a repeated key.
	HeaderReplayed = "Idempotent-Replayed"
)

// idempotencyKey returns the request's idempotency key ("" for none), or
// herr.InvalidArgument for a header sent twice or empty (the key's own
// rules are checked by the service).
func idempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(HeaderIdempotencyKey)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", herr.New(herr.InvalidArgument, "send one Idempotency-Key header, not %d", len(vs))
	case vs[0] == "":
		return "", herr.New(herr.InvalidArgument, "the Idempotency-Key header is empty: an idempotency key is 1 to 200 printable ASCII characters")
	}
	return vs[0], nil
}

// toEvent converts and checks the parts JSON decoding cannot.
func (w *WireEvent) toEvent() (delivery.Event, error) {
	e := delivery.Event{EventType: w.EventType, Message: w.Message}
	if string(w.Message) == "null" {
		e.Message = nil
	}
	if w.Resource != nil {
		e.ResourceID = w.Resource.ResourceID
	}
	if w.OccurredAt != "" {
		t, err := time.Parse(time.RFC3339Nano, w.OccurredAt)
		// In UTC the year must still have four digits, or the delivered
		// CloudEvent time would not be RFC 3339 (gRPC's Timestamp has the
		// same range).
		if y := t.UTC().Year(); err != nil || y < 1 || y > 9999 {
			return e, herr.InField(herr.New(herr.InvalidArgument, "occurred_at must be an RFC 3339 timestamp from 0001-01-01 to 9999-12-31, such as 2024-10-16T14:30:00Z"), "occurred_at")
		}
		e.OccurredAt = t
	}
	// Validated here, so that a 422 names the field under "event"; the
	// event remembers it and is not scanned again when published.
	err := e.ValidateScanned(w.scan)
	return e, err
}

// echo is the event as the result reports it: normalized, with the
// publish time filled in for a missing occurred_at.
func echo(w *WireEvent, e delivery.Event) *WireEvent {
	out := new(WireEvent)
	echoInto(out, w, e)
	return out
}

// echoInto writes echo(w, e) into out, so that a batch's echoes can share
// one allocation.
func echoInto(out, w *WireEvent, e delivery.Event) {
	*out = *w
	out.IdempotencyKey = nil
	if !e.OccurredAt.IsZero() {
		out.OccurredAt = formatTime(w.OccurredAt, e.OccurredAt)
	}
	if len(out.Message) == 0 || string(out.Message) == "null" {
		out.Message = json.RawMessage("{}")
	}
}

// formatTime returns t in UTC as RFC 3339 with nanoseconds (trailing
// zeros cut); given is returned instead when it is already that text,
// as a publisher that sends UTC times usually does, so that the echo
// does not allocate it again.
func formatTime(given string, t time.Time) string {
	var buf [64]byte
	b := t.UTC().AppendFormat(buf[:0], time.RFC3339Nano)
	if string(b) == given {
		return given
	}
	return string(b)
}

// Handler serves both endpoints.
type Handler struct {
	Service *delivery.Service
}

// Single serves POST /api/v1beta/events.
func (h *Handler) Single(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var req struct {
		Event *WireEvent `json:"event"`
	}
	if err := httpx.DecodeJSON(r, maxSingleBody, &req, strictjson.IgnoreUnknown); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if req.Event == nil {
		httpx.WriteError(w, r, herr.InField(herr.New(herr.InvalidArgument, "event is required"), "body", "event"))
		return
	}
	e, err := req.Event.toEvent()
	if err != nil {
		httpx.WriteError(w, r, herr.InField(err, "body", "event"))
		return
	}
	// The event's own key, as in a batch, keys a single publish as the
	// header does; never both.
	if k := req.Event.IdempotencyKey; k != nil {
		if key != "" {
			httpx.WriteError(w, r, herr.InField(herr.New(herr.Malformed, "the event has an idempotency_key and the request an Idempotency-Key header: send one of them"), "body", "event", "idempotency_key"))
			return
		}
		if *k == "" {
			httpx.WriteError(w, r, herr.InField(herr.New(herr.InvalidArgument, "idempotency_key is empty: an idempotency key is 1 to 200 printable ASCII characters"), "body", "event", "idempotency_key"))
			return
		}
		key = *k
	}
	res := Result{Event: echo(req.Event, e)}
	o, replayed, err := h.Service.PublishOutcomeKeyed(r.Context(), p, key, e)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res.Success, res.FailureReason, res.Replayed = o.Success(), o.FailureReason, replayed
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	switch {
	case o.Success() && e.OccurredAt.IsZero():
		res.Event.OccurredAt = o.Published.PublishedAt.Format(time.RFC3339Nano)
	case !o.Success():
		at := o.At
		if at.IsZero() {
			at = h.Service.Now()
		}
		res.FailureReason = validEcho(res.Event, e, at.UTC().Format(time.RFC3339Nano), res.FailureReason)
	}
	httpx.WriteRawJSON(w, http.StatusOK, appendSingle(nil, &res))
}

// responseSize estimates the length of the batch answer, so that it is
// written into one buffer.
func responseSize(results []Result) int {
	n := 16
	for i := range results {
		n += 128 + len(results[i].FailureReason)
		if e := results[i].Event; e != nil {
			n += len(e.EventType) + len(e.Message) + len(e.OccurredAt)
			if e.Resource != nil {
				n += len(e.Resource.ResourceID) + 20
			}
		}
	}
	return n
}

// Batch serves POST /api/v1beta/events/batch.
func (h *Handler) Batch(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	// The body is lent (httpx.ReadBodyPooled): the events decoded from it
	// alias it, and everything that keeps them (the encoded CloudEvents,
	// the answer) copies them before the handler returns.
	body, release, err := httpx.ReadBodyPooled(r, MaxBatchBody)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	defer release()
	// The common batch, every event of the documented shape, is decoded in
	// one pass (parseBatch, else strictjson.Unmarshal when its strings
	// have escapes, say). Any other is decoded as before: the envelope
	// first, then each event alone, so that one bad event fails alone.
	var all struct {
		Events []WireEvent `json:"events"`
	}
	var raw struct {
		Events []json.RawMessage `json:"events"`
		// Ignored holds the members no schema defines (see the package
		// doc), to be held to the strict rules the lenient decoding of
		// the envelope lets through.
		Ignored jsontext.Value `json:",unknown"`
	}
	n := 0
	if events, ok := parseBatch(body); ok {
		all.Events, n = events, len(events)
	} else if strictjson.Unmarshal(body, &all, strictjson.IgnoreUnknown) == nil {
		n = len(all.Events)
	} else {
		// Invalid UTF-8 or a repeated member name in one event fails
		// that event alone (below).
		if err := strictjson.Unmarshal(body, &raw, strictjson.LenientParts, strictjson.IgnoreUnknown); err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		if len(raw.Ignored) > 0 && !raw.Ignored.IsValid() {
			httpx.WriteError(w, r, herr.New(herr.Malformed, "request body is not valid JSON: a member beside events repeats a member name within one object or is not valid UTF-8 (RFC 7493)"))
			return
		}
		n, all.Events = len(raw.Events), nil
	}
	if err := delivery.CheckBatchSize(n); err != nil {
		httpx.WriteError(w, r, herr.InField(err, "body"))
		return
	}
	results := make([]Result, n)
	echoes := make([]WireEvent, n)
	items := make([]delivery.BatchItem, n)
	for i := range n {
		results[i].Event = &echoes[i]
		we := &echoes[i] // decoded in place when it comes alone; echoInto may write over itself
		if all.Events != nil {
			we = &all.Events[i]
		} else if err := strictjson.Unmarshal(raw.Events[i], we, strictjson.IgnoreUnknown); err != nil {
			echoes[i] = WireEvent{}
			items[i].Err = herr.New(herr.InvalidArgument, "event is not a JSON object of the documented shape: %s", herr.MessageOf(err))
			continue
		}
		items[i].Event, items[i].Err = we.toEvent()
		if k := we.IdempotencyKey; k != nil {
			items[i].Key = *k
			if *k == "" && items[i].Err == nil {
				items[i].Err = herr.InField(herr.New(herr.InvalidArgument, "idempotency_key is empty: an idempotency key is 1 to 200 printable ASCII characters"), "idempotency_key")
			}
		}
		echoInto(&echoes[i], we, items[i].Event)
	}
	var published time.Time // the events of a batch share their publish time: formatted once
	var publishedText, requestText string
	outs, replayed, err := h.Service.PublishItemsKeyed(r.Context(), p, key, items)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	for i, o := range outs {
		results[i].Success, results[i].FailureReason, results[i].Replayed = o.Success(), o.FailureReason, o.Replayed
		if !o.Success() {
			if requestText == "" {
				at := o.At
				if at.IsZero() {
					at = h.Service.Now()
				}
				requestText = at.UTC().Format(time.RFC3339Nano)
			}
			results[i].FailureReason = validEcho(results[i].Event, items[i].Event, requestText, o.FailureReason)
			continue
		}
		if items[i].Event.OccurredAt.IsZero() {
			if at := o.Published.PublishedAt; at != published || publishedText == "" {
				published, publishedText = at, at.Format(time.RFC3339Nano)
			}
			results[i].Event.OccurredAt = publishedText
		}
	}
	answer := bufpool.Get(responseSize(results))
	*answer = appendResults(*answer, results)
	httpx.WriteRawJSON(w, http.StatusOK, *answer)
	bufpool.Put(answer)
}

// unechoedType stands in a failed event's result for an event_type that is
// not valid: the published Event schema requires one of 1–256 characters
// of [a-zA-Z0-9._-].
const unechoedType = "-"

// maxQuotedType bounds how much of an invalid event_type a failure_reason
// quotes.
const maxQuotedType = 100

// validEcho makes out, the echo of event e that was not published, a valid
// published Event, so that a client validating the answer against the
// published schema keeps the whole batch's results: each member sent
// that is valid is kept; an invalid event_type becomes "-" (and the one
// sent is quoted, cut to 100 bytes, at the end of the failure_reason), a
// message that breaks a rule (or is missing) {}, an occurred_at that is
// missing or invalid the time of the request (at, RFC 3339), and a
// resource whose resource_id breaks a rule is left out. It returns
// reason, with that quotation, cut to delivery.MaxFailureReasonBytes.
// Only failed events take this path: it checks each member again.
func validEcho(out *WireEvent, e delivery.Event, at, reason string) string {
	if !filter.ValidEventType(out.EventType) {
		if out.EventType != "" {
			sent := out.EventType
			if len(sent) > maxQuotedType {
				cut := maxQuotedType
				for cut > 0 && !utf8.RuneStart(sent[cut]) {
					cut--
				}
				sent = sent[:cut] + "…"
			}
			reason += " (event_type sent: " + strconv.Quote(sent) + ")"
		}
		out.EventType = unechoedType
	}
	if len(out.Message) == 0 || (&delivery.Event{EventType: unechoedType, Message: out.Message}).Validate() != nil {
		out.Message, out.scan = json.RawMessage("{}"), strictjson.Scan{}
	}
	if e.OccurredAt.IsZero() {
		out.OccurredAt = at
	}
	if out.Resource != nil && (&delivery.Event{EventType: unechoedType, ResourceID: out.Resource.ResourceID}).Validate() != nil {
		out.Resource = nil
	}
	return delivery.CapFailureReason(reason)
}
