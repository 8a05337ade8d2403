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
	// key (or, with PublishBatchKeyed, of the event's own key) with the
	// result of its first attempt: the event was published once, by an
	// earlier attempt.
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
	// IdempotencyKey is the event's own key in a batch
	// (PublishBatchKeyed).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
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
// error; the events after them were not sent. Each call carries one
// Idempotency-Key for its whole batch (see WithIdempotencyKey); for a key
// per event, use PublishBatchKeyed.
func (c *Client) PublishBatch(ctx context.Context, events []event.Event) ([]PublishResult, error) {
	ws := make([]wireEvent, len(events))
	for i, e := range events {
		w, err := toWire(e)
		if err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		ws[i] = w
	}
	key := c.publishKey(ctx)
	return c.publishChunks(ctx, ws, func(chunk int) string {
		if key != "" && len(events) > MaxBatch {
			return fmt.Sprintf("%s/%d", key, chunk)
		}
		return key
	})
}

// KeyedEvent is an event of PublishBatchKeyed with its own idempotency
// key.
type KeyedEvent struct {
	Event event.Event
	// Key is the event's idempotency key: 1–200 printable ASCII
	// characters, no two events of one call with the same. "" makes a
	// random UUID for the event, kept across the call's retries (none
	// with WithoutIdempotencyKeys).
	Key string
}

// PublishBatchKeyed publishes events as PublishBatch does, each under
// its own idempotency key (the idempotency_key member of each event;
// docs/api.md, "Idempotency keys") instead of one key for the batch: a
// repeat of an event's key, in any later call or process, publishes
// nothing for that event and answers its first result with Replayed set,
// while the call's other events publish. An event whose key was used
// with another event fails alone (Success false, a FailureReason saying
// the key was used with a different request), and so does one whose key
// a publish still in progress holds (publish it again later: it is not
// published twice). WithIdempotencyKey does not apply: the events' keys
// replace it.
//
// Errors: a key given to two events, or one that is not 1–200 printable
// ASCII characters, fails the whole call before anything is sent;
// otherwise PublishBatch's.
func (c *Client) PublishBatchKeyed(ctx context.Context, events []KeyedEvent) ([]PublishResult, error) {
	ws := make([]wireEvent, len(events))
	seen := make(map[string]int, len(events))
	for i, ke := range events {
		w, err := toWire(ke.Event)
		if err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		if err := CheckIdempotencyKey(ke.Key); ke.Key != "" && err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		if j, ok := seen[ke.Key]; ok && ke.Key != "" {
			return nil, fmt.Errorf("herald client: events[%d] and events[%d] have the same idempotency key", j, i)
		}
		seen[ke.Key] = i
		w.IdempotencyKey = ke.Key
		if w.IdempotencyKey == "" && !c.noKeys {
			w.IdempotencyKey = uuid.NewString()
		}
		ws[i] = w
	}
	return c.publishChunks(ctx, ws, func(int) string { return "" })
}

// CheckIdempotencyKey returns an error unless key is 1–200 printable
// ASCII characters (0x20–0x7e), the server's rule for an idempotency key
// (docs/api.md, "Idempotency keys"): PublishBatchKeyed checks its keys
// with it before anything is sent.
func CheckIdempotencyKey(key string) error {
	if key == "" || len(key) > 200 {
		return fmt.Errorf("herald client: an idempotency key must be 1 to 200 characters long; this one has %d", len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return fmt.Errorf("herald client: an idempotency key must be printable ASCII; byte %d is not", i)
		}
	}
	return nil
}

// publishChunks sends ws, MaxBatch per call, chunk i under the
// Idempotency-Key chunkKey(i) ("" for none).
func (c *Client) publishChunks(ctx context.Context, ws []wireEvent, chunkKey func(chunk int) string) ([]PublishResult, error) {
	results := make([]PublishResult, 0, len(ws))
	for start := 0; start < len(ws); start += MaxBatch {
		chunk := ws[start:min(start+MaxBatch, len(ws))]
		var out struct {
			Results []wireResult `json:"results"`
		}
		req := keyed(request{method: http.MethodPost, path: "/api/v1beta/events/batch", body: map[string]any{"events": chunk}}, chunkKey(start/MaxBatch))
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
