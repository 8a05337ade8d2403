package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
)

// MaxBatch is the most events one batch publish carries (the
// notifications API's limit); PublishBatch splits longer lists.
const MaxBatch = 100

// PublishResult is Herald's answer for one event.
type PublishResult struct {
	// Event is the event as Herald normalized it: Type, Subject (the
	// resource id), Time (the publish time when none was given) and the
	// JSON data. Herald does not report the id it assigns.
	Event event.Event
	// Success is true when the event was published. False means it was
	// not (FailureReason says why): a broker failure, or, in a batch, an
	// event that breaks a rule. It is safe to publish it again.
	Success       bool
	FailureReason string
	// Replayed says Herald answered a repeat of the publish's idempotency
	// key with the result of its first attempt: the event was published
	// once, by an earlier attempt.
	Replayed bool
}

// Idempotency keys. Every Publish and every PublishBatch call (each of
// its chunks) sends an Idempotency-Key, a random UUID made for the call
// and kept across its retries, so that a retry after a lost answer (a
// timeout, a dropped connection, a 502) answers the first attempt's
// result instead of publishing the event twice (docs/api.md,
// "Idempotency keys"). WithIdempotencyKey chooses the key, for a
// publisher that retries across calls or processes;
// WithoutIdempotencyKeys turns the default off.

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns ctx carrying key (1–200 printable ASCII
// characters) as the Idempotency-Key of the publishes made with it:
// calling Publish again with the same key and event, even from another
// process, publishes nothing and answers the first result. A
// PublishBatch longer than MaxBatch sends chunk i (from 0) as key + "/" +
// i.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// publishKey returns the idempotency key of a publish made with ctx: the
// one WithIdempotencyKey set, else a new random UUID; "" when the client
// sends none (WithoutIdempotencyKeys).
func (c *Client) publishKey(ctx context.Context) string {
	if k, ok := ctx.Value(idempotencyKeyCtx{}).(string); ok && k != "" {
		return k
	}
	if c.noKeys {
		return ""
	}
	return uuid.NewString()
}

// keyed returns the publish request r with key (none when "").
func keyed(r request, key string) request {
	if key != "" {
		r.header = http.Header{"Idempotency-Key": {key}}
		r.retryAlso = []int{http.StatusConflict}
	}
	return r
}

// NewEvent returns an event to publish: its type (1–255 characters of
// letters, digits, '.', '_', '-'), subject (the resource id, "" for none)
// and data, marshalled to a JSON object (nil for {}). Herald sets the id,
// source and, when it is zero, the time.
func NewEvent(eventType, subject string, data any) (event.Event, error) {
	e := event.New()
	e.SetType(eventType)
	if subject != "" {
		e.SetSubject(subject)
	}
	if data != nil {
		if err := e.SetData(event.ApplicationJSON, data); err != nil {
			return e, fmt.Errorf("herald client: event data: %w", err)
		}
	}
	return e, nil
}

// wireEvent is the notifications API's Event.
type wireEvent struct {
	EventType  string          `json:"event_type"`
	Message    json.RawMessage `json:"message,omitempty"`
	OccurredAt string          `json:"occurred_at,omitempty"`
	Resource   *wireResource   `json:"resource,omitempty"`
}

type wireResource struct {
	ResourceID string `json:"resource_id"`
}

type wireResult struct {
	Event         *wireEvent `json:"event"`
	Success       bool       `json:"success"`
	FailureReason string     `json:"failure_reason"`
	Replayed      bool       `json:"replayed"`
}

// toWire maps a CloudEvent to the publish shape: type → event_type,
// subject → resource.resource_id, time → occurred_at, data (JSON) →
// message. Id, source and other attributes are Herald's to set and are not
// sent.
func toWire(e event.Event) (wireEvent, error) {
	w := wireEvent{EventType: e.Type()}
	if s := e.Subject(); s != "" {
		w.Resource = &wireResource{ResourceID: s}
	}
	if t := e.Time(); !t.IsZero() {
		w.OccurredAt = t.UTC().Format(time.RFC3339Nano)
	}
	if data := e.Data(); len(data) > 0 {
		if ct := e.DataMediaType(); ct != "" && ct != event.ApplicationJSON && !strings.HasSuffix(ct, "+json") {
			return w, fmt.Errorf("herald client: event data must be JSON, not %s", ct)
		}
		if !json.Valid(data) {
			return w, errors.New("herald client: event data is not valid JSON")
		}
		w.Message = json.RawMessage(data)
	}
	return w, nil
}

// fromWire maps a publish result's event back to a CloudEvent.
func fromWire(w *wireEvent) event.Event {
	e := event.New()
	if w == nil {
		return e
	}
	e.SetType(w.EventType)
	if w.Resource != nil && w.Resource.ResourceID != "" {
		e.SetSubject(w.Resource.ResourceID)
	}
	if t, err := time.Parse(time.RFC3339Nano, w.OccurredAt); err == nil {
		e.SetTime(t)
	}
	if len(w.Message) > 0 {
		e.DataEncoded = append([]byte(nil), w.Message...)
		e.SetDataContentType(event.ApplicationJSON)
	}
	return e
}

func toResult(w wireResult) PublishResult {
	return PublishResult{Event: fromWire(w.Event), Success: w.Success, FailureReason: w.FailureReason, Replayed: w.Replayed}
}

// Publish publishes one event (POST /api/v1beta/events). An event that
// breaks a rule is an *Error (422); a broker failure is a result with
// Success false and a nil error.
func (c *Client) Publish(ctx context.Context, e event.Event) (PublishResult, error) {
	w, err := toWire(e)
	if err != nil {
		return PublishResult{}, err
	}
	var out struct {
		Result wireResult `json:"result"`
	}
	req := keyed(request{method: http.MethodPost, path: "/api/v1beta/events", body: map[string]any{"event": w}}, c.publishKey(ctx))
	if _, err := c.do(ctx, req, &out); err != nil {
		return PublishResult{}, err
	}
	return toResult(out.Result), nil
}

// PublishBatch publishes events, MaxBatch per call (POST
// /api/v1beta/events/batch), and returns one result per event, in order:
// an event that breaks a rule fails alone. When a call fails (after its
// retries), the results of the calls before it are returned with the
// error; the events after them were not sent.
func (c *Client) PublishBatch(ctx context.Context, events []event.Event) ([]PublishResult, error) {
	results := make([]PublishResult, 0, len(events))
	key := c.publishKey(ctx)
	for start := 0; start < len(events); start += MaxBatch {
		chunk := events[start:min(start+MaxBatch, len(events))]
		ws := make([]wireEvent, len(chunk))
		for i, e := range chunk {
			w, err := toWire(e)
			if err != nil {
				return results, fmt.Errorf("events[%d]: %w", start+i, err)
			}
			ws[i] = w
		}
		var out struct {
			Results []wireResult `json:"results"`
		}
		chunkKey := key
		if key != "" && len(events) > MaxBatch {
			chunkKey = fmt.Sprintf("%s/%d", key, start/MaxBatch)
		}
		req := keyed(request{method: http.MethodPost, path: "/api/v1beta/events/batch", body: map[string]any{"events": ws}}, chunkKey)
		if _, err := c.do(ctx, req, &out); err != nil {
			return results, err
		}
		if len(out.Results) != len(chunk) {
			return results, fmt.Errorf("herald client: batch publish answered %d results for %d events", len(out.Results), len(chunk))
		}
		for _, r := range out.Results {
			results = append(results, toResult(r))
		}
	}
	return results, nil
}
