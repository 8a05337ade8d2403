package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/lograte"
	"github.com/heraldevents/herald/internal/strictjson"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// Publish limits (README "Limits").
const (
	// MaxMessageBytes caps an event's message (its JSON encoding): 256 KiB.
	MaxMessageBytes = 256 << 10
	// MaxBatchEvents caps one batch publish: the notifications API's
	// published BatchPublishEventsRequest allows 1,000 events.
	MaxBatchEvents = 1000
	// MaxResourceIDBytes caps resource.resource_id.
	MaxResourceIDBytes = filter.MaxResourceIDLength
	// MaxMessageDepth caps how deep objects and arrays nest in an event's
	// message, the message object itself being depth 1. Every protobuf
	// runtime must be able to decode what a gRPC stream delivers: C++,
	// Java and Python stop at a recursion limit of 100 (Go at 10,000), and
	// a JSON object costs three levels as a google.protobuf.Struct
	// (Struct, map entry, Value), an array two; with the response and the
	// Event around it, 32 levels cost at most 2 + 3×32 = 98.
	MaxMessageDepth = 32
	// MaxFailureReasonBytes caps a PublishingResult's failure_reason: the
	// notifications API's published schema allows 1,024 characters, and
	// a bounded reason keeps a gRPC batch's answer within what a client
	// accepts (functions/grpcapi). A longer reason is cut at a character
	// boundary and ends in "…".
	MaxFailureReasonBytes = 1024
	// DefaultPublishTimeout is Config.PublishTimeout's default.
	DefaultPublishTimeout = 5 * time.Second
)

// Config wires a Service.
type Config struct {
	Broker *pubsubx.Broker
	Store  *leasestore.Store
	// Source is the CloudEvents `source` of every event (default "/herald").
	Source string
	// ReceiveWait is how long a pull waits at the broker when nothing is
	// ready before answering "caught up" (default 0: answer at once).
	ReceiveWait time.Duration
	// Streams tunes stream sessions, queue lifetimes and the SSE
	// transport; zero fields take their defaults.
	Streams StreamConfig
	// ClaimRetention is how long a claim-check claim (an event too big for
	// the broker, claims.go) is kept before the reap-idle-queues job
	// deletes it (HERALD_CLAIM_RETENTION; default DefaultClaimRetention,
	// 336h). Keep it at least the broker's message retention, or a
	// reference still waiting in a queue may find its claim gone.
	ClaimRetention time.Duration
	// PublishTimeout bounds the broker's part of a publish, or of a whole
	// batch (HERALD_PUBLISH_TIMEOUT; default DefaultPublishTimeout, 5s):
	// an event the broker has not accepted by then fails with
	// herr.Unavailable, which the transports answer as success:false, so
	// an unreachable or black-holed broker never holds a publisher longer.
	// The event may still reach the broker afterwards (at least once; the
	// publisher retries).
	PublishTimeout time.Duration
	// IdempotencyWindow is how long an idempotency key is remembered
	// (HERALD_IDEMPOTENCY_WINDOW; default
	// leasestore.DefaultIdempotencyWindow, 24h; 1m–168h).
	IdempotencyWindow time.Duration
	// IdempotencyWait is how long a repeat of a key whose first publish
	// is in progress waits for it before answering 409 with Retry-After
	// (default DefaultIdempotencyWait, 1s; negative: not at all).
	IdempotencyWait time.Duration
	// Webhooks tunes webhook delivery (webhooks.go); the zero value
	// reaches public https endpoints only.
	Webhooks WebhookConfig
	// Now defaults to time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service is the core. It holds no per-consumer state in memory: any number
// of Services sharing a broker and a store behave as one.
type Service struct {
	cfg Config
	// missingClaims counts claim-check references dropped because their
	// claim was gone (MissingClaims).
	missingClaims atomic.Int64
	// warnings rate-limits repeated failure warnings (a broker outage
	// fails every publish the same way).
	warnings *lograte.Limiter
	// hub, once StartHub ran, serves non-durable streams from memory.
	hub atomic.Pointer[Hub]
	// owners caches which consumer owns a broker subscription, for the
	// events a full subscription refused (overflow.go).
	owners subscriptionOwners
	// hooks are the webhook HTTP clients, one per timeout.
	hooks webhookClients
	// opening counts the stream opens in progress, and openShed those
	// refused past StreamConfig.MaxOpening (opening.go).
	opening, openShed atomic.Int64
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Source == "" {
		cfg.Source = "/herald"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClaimRetention <= 0 {
		cfg.ClaimRetention = DefaultClaimRetention
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if cfg.IdempotencyWindow <= 0 {
		cfg.IdempotencyWindow = leasestore.DefaultIdempotencyWindow
	}
	switch {
	case cfg.IdempotencyWait == 0:
		cfg.IdempotencyWait = DefaultIdempotencyWait
	case cfg.IdempotencyWait < 0:
		cfg.IdempotencyWait = 0
	}
	cfg.Streams.setDefaults()
	cfg.Webhooks.setDefaults()
	return &Service{cfg: cfg, warnings: lograte.New(lograte.DefaultInterval)}
}

// Now is the service's clock (Config.Now), in UTC: the time a publish
// request is handled.
func (s *Service) Now() time.Time { return s.cfg.Now().UTC() }

// Event is a publish request's event (the notifications API, "PublishEvent").
type Event struct {
	EventType  string
	Message    json.RawMessage // a JSON object; nil means {}
	OccurredAt time.Time       // zero means the publish time
	ResourceID string          // "" for none

	// valid is what the last successful Validate saw, so that publishing
	// an event a transport has just validated does not scan its message a
	// second time (the scan is a fifth of a publish's CPU).
	valid validated
}

// validated identifies the fields Validate checked: the same type and
// resource id strings and the same message bytes (start and length),
// with what the check learned of the message (compact: no whitespace
// between its tokens, so encoding need not compact it).
type validated struct {
	fields  fingerprint
	compact bool
}

// fingerprint identifies an event's fields; the zero fingerprint none.
type fingerprint struct {
	ok          bool
	eventType   string
	resourceID  string
	message     *byte
	messageSize int
}

func (e *Event) fingerprint() fingerprint {
	v := fingerprint{ok: true, eventType: e.EventType, resourceID: e.ResourceID, messageSize: len(e.Message)}
	if len(e.Message) > 0 {
		v.message = &e.Message[0]
	}
	return v
}

// validateOnce is Validate, skipped when e has passed it with the same
// fields. A caller that rewrites the message's bytes in place after
// Validate must not rely on it: nothing in Herald does.
func (e *Event) validateOnce() error {
	if e.valid.fields.ok && e.valid.fields == e.fingerprint() {
		return nil
	}
	return e.Validate()
}

// Validate checks e against the publish rules. Errors are
// herr.InvalidArgument naming the field. An event that passes remembers
// it: publishing it does not check it again unless a field changed.
func (e *Event) Validate() error {
	compact, err := e.validate()
	if err != nil {
		e.valid = validated{}
		return err
	}
	e.valid = validated{fields: e.fingerprint(), compact: compact}
	return nil
}

// ValidateScanned is Validate for an event whose message its transport
// has just checked with strictjson.ScanObject while decoding it: sc is
// that check's result for exactly e.Message (sc.Len == len(e.Message)),
// so the message is not scanned a second time. Any other sc (the zero
// Scan, say) makes it Validate. The rules and errors are Validate's.
func (e *Event) ValidateScanned(sc strictjson.Scan) error {
	if len(e.Message) == 0 || sc.Len != len(e.Message) {
		return e.Validate()
	}
	e.valid = validated{}
	if err := e.validateType(); err != nil {
		return err
	}
	if len(e.Message) > MaxMessageBytes {
		return messageTooBig(len(e.Message))
	}
	if err := e.validateResource(); err != nil {
		return err
	}
	e.valid = validated{fields: e.fingerprint(), compact: sc.Compact}
	return nil
}

// errNumberRange is the error for a message with a number no double
// holds (strictjson.NumberInRange). RFC 7493 (I-JSON) asks for numbers
// an IEEE 754 double can represent, and every gRPC consumer receives
// numbers as doubles (google.protobuf.Value): 1e400 cannot be delivered
// at all, and 1e-400 would arrive as 0. Precision loss is allowed; range
// is not.
var errNumberRange = herr.New(herr.InvalidArgument, "message holds a number outside the range of an IEEE 754 double (RFC 7493, I-JSON): its magnitude must be below about 1.8e308, and a nonzero number must not round to 0 (below about 2.5e-324)")

func messageTooBig(n int) error {
	return herr.InField(herr.New(herr.InvalidArgument, "message is %d bytes; the limit is %d bytes (256 KiB)", n, MaxMessageBytes), "message")
}

// validate checks e, reporting whether its message is compact JSON. The
// fields are checked in the order event_type, message, resource: the
// first that breaks a rule is the one an error names.
func (e *Event) validate() (compact bool, err error) {
	if err := e.validateType(); err != nil {
		return false, err
	}
	if compact, err = e.validateMessage(); err != nil {
		return false, err
	}
	return compact, e.validateResource()
}

func (e *Event) validateType() error {
	if e.EventType == "" {
		return herr.InField(herr.New(herr.InvalidArgument, "event_type is required"), "event_type")
	}
	if !filter.ValidEventType(e.EventType) {
		return herr.InField(herr.New(herr.InvalidArgument, "event_type must be %s", filter.EventTypeRule), "event_type")
	}
	return nil
}

func (e *Event) validateMessage() (compact bool, err error) {
	if len(e.Message) > MaxMessageBytes {
		return false, messageTooBig(len(e.Message))
	}
	if len(e.Message) == 0 {
		return true, nil
	}
	sc, problem := strictjson.CheckObjectScan(e.Message, MaxMessageDepth)
	switch problem {
	case 0:
		return sc.Compact, nil
	case strictjson.InvalidUTF8:
		return false, herr.InField(herr.New(herr.InvalidArgument, "message must be valid UTF-8 (RFC 8259 §8.1): a string holds bytes that are not UTF-8, or a \\u escape of half a surrogate pair"), "message")
	case strictjson.DuplicateName:
		return false, herr.InField(herr.New(herr.InvalidArgument, "message must not repeat a member name within one object (RFC 7493, I-JSON)"), "message")
	case strictjson.TooDeep:
		return false, herr.InField(herr.New(herr.InvalidArgument, "message nests objects and arrays more than %d levels deep (the message object is level 1)", MaxMessageDepth), "message")
	case strictjson.NumberOutOfRange:
		return false, herr.InField(errNumberRange, "message")
	default:
		return false, herr.InField(herr.New(herr.InvalidArgument, "message must be a JSON object"), "message")
	}
}

func (e *Event) validateResource() error {
	if !utf8.ValidString(e.ResourceID) {
		return herr.InField(herr.New(herr.InvalidArgument, "resource.resource_id must be valid UTF-8"), "resource", "resource_id")
	}
	if len(e.ResourceID) > MaxResourceIDBytes {
		return herr.InField(herr.New(herr.InvalidArgument, "resource.resource_id is longer than %d bytes", MaxResourceIDBytes), "resource", "resource_id")
	}
	for _, r := range e.ResourceID {
		// C0, DEL and C1 (U+0080–U+009F): none belongs in a path-like id,
		// and C1 characters render as nothing in most logs.
		if unicode.IsControl(r) {
			return herr.InField(herr.New(herr.InvalidArgument, "resource.resource_id must not contain control characters (U+0000–U+001F, U+007F–U+009F)"), "resource", "resource_id")
		}
	}
	return nil
}

// Published describes an accepted event.
type Published struct {
	ID          string
	PublishedAt time.Time
}

// Publish validates, authorizes, encodes and sends one event. An event
// whose encoding is bigger than a size-limited broker carries
// (pubsubx.Broker.MaxMessageBytes) is stored as a claim first and sent as a reference
// (the claim-check, claims.go). Errors are herr-coded: InvalidArgument,
// PermissionDenied, or Unavailable when the broker did not accept the
// event within Config.PublishTimeout or its claim could not be stored (it
// was not published); Canceled or DeadlineExceeded when ctx ended first.
func (s *Service) Publish(ctx context.Context, p *auth.Principal, e Event) (*Published, error) {
	sendCtx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	return s.publish(ctx, sendCtx, p, e, newEventID(), s.cfg.Now().UTC())
}

// publish is Publish with sendCtx, ctx bounded by the publish timeout,
// for the broker's part, of e as event id published at now (UTC): a
// keyed publish taken over publishes the id and time its first attempt
// planned (idempotency.go). With telemetry on, the event gets a producer
// span whose trace context it carries (internal/telemetry).
func (s *Service) publish(ctx, sendCtx context.Context, p *auth.Principal, e Event, id string, now time.Time) (*Published, error) {
	ctx, op := telemetry.StartPublish(ctx, e.EventType)
	msg, pub := new(pubsubx.Message), new(Published)
	err := s.prepare(ctx, p, e, id, now, traceContextOf(ctx), msg, pub)
	if err == nil {
		if err = s.cfg.Broker.Send(spanned(sendCtx, ctx), msg); err != nil {
			err = s.overflowed(sendCtx, msg, err)
		}
		if err != nil {
			err = s.sendFailed(ctx, sendCtx, err, e.EventType)
		}
	}
	op.EndPublish(ctx, err)
	if err != nil {
		return nil, err
	}
	return pub, nil
}

// spanned returns sendCtx carrying the span of ctx (a publish span), so
// that broker calls are its children; sendCtx itself when telemetry is
// off.
func spanned(sendCtx, ctx context.Context) context.Context {
	if !telemetry.Enabled() {
		return sendCtx
	}
	return trace.ContextWithSpan(sendCtx, trace.SpanFromContext(ctx))
}

// prepare validates, authorizes and encodes e, published at now (in
// UTC), into msg, the message to send (storing its claim first when it needs one), and pub, the result
// the publisher gets once the broker accepts it. The caller provides both
// so that a batch's come from one allocation each.
func (s *Service) prepare(ctx context.Context, p *auth.Principal, e Event, id string, now time.Time, tc traceContext, msg *pubsubx.Message, pub *Published) error {
	if err := e.validateOnce(); err != nil {
		return err
	}
	if !p.CanPublish(e.EventType) {
		return herr.New(herr.PermissionDenied, "not authorized to publish events of type %q", e.EventType)
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = now
	}
	data := e.Message
	if len(data) == 0 {
		data = json.RawMessage("{}")
	} else if !e.valid.compact {
		data = compact(data)
	}
	return s.encode(ctx, p, e, id, now, data, tc, msg, pub)
}

// encode encodes e, as event id, into its message, with tc, the trace
// context of its publish span, storing its claim first when it needs one.
// data is e's message, compact.
func (s *Service) encode(ctx context.Context, p *auth.Principal, e Event, id string, now time.Time, data json.RawMessage, tc traceContext, msg *pubsubx.Message, pub *Published) error {
	traceparent, tracestate := tc.parent, tc.state
	body, err := cloudevent.Encode(cloudevent.Input{
		ID: id, Source: s.cfg.Source, Type: e.EventType, Subject: e.ResourceID,
		Time: e.OccurredAt, PublishedAt: now, PrincipalIdentity: p.ID, Data: data,
		TraceParent: traceparent, TraceState: tracestate,
	})
	if err != nil {
		return herr.Wrap(herr.InvalidArgument, err, "event is not a valid CloudEvent")
	}
	*msg = pubsubx.Message{Body: body, Metadata: map[string]string{
		pubsubx.AttrEventType: e.EventType, pubsubx.AttrEventID: id,
	}}
	if traceparent != "" {
		msg.Metadata[telemetry.KeyTraceParent] = traceparent
		if tracestate != "" {
			msg.Metadata[telemetry.KeyTraceState] = tracestate
		}
	}
	if e.ResourceID != "" {
		msg.Metadata[pubsubx.AttrResourceID] = e.ResourceID
	}
	if s.needsClaim(body) {
		if err := s.putClaim(ctx, id, body); err != nil {
			s.warn(ctx, "publish failed: the claim-check store write failed", err, "event_type", e.EventType, "event_id", id)
			return err
		}
		pubsubx.MakeReference(msg, id)
	}
	*pub = Published{ID: id, PublishedAt: now}
	return nil
}

// overflowed returns nil when err says only that some subscriptions were
// full and msg is now in their consumers' dead-letter queues (see
// overflow.go), else the error to report.
func (s *Service) overflowed(ctx context.Context, msg *pubsubx.Message, err error) error {
	var full *pubsubx.SubscriptionsFullError
	if !errors.As(err, &full) {
		return err
	}
	return s.deadLetterOverflow(ctx, msg, full)
}

// sendFailed is the publisher's error for a send that failed with err.
func (s *Service) sendFailed(ctx, sendCtx context.Context, err error, eventType string) error {
	// The caller's own end is theirs (Canceled, DeadlineExceeded);
	// everything else, the publish timeout included, is the broker's.
	code := herr.Unavailable
	key := errText(err)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		code = herr.Canceled
	case ctx.Err() != nil:
		code = herr.DeadlineExceeded
	case sendCtx.Err() != nil:
		timeout := "the message broker did not accept the event within " + s.cfg.PublishTimeout.String()
		err = herr.Wrap(herr.Unavailable, err, timeout)
		// One failure however it was noticed: the portable layer finds
		// the deadline passed before it calls the driver (a publish that
		// waited for a CPU longer than the timeout), a driver when it
		// gives up, each with its own text. Keyed by the cause's text, a
		// black-holed broker wrote a warning per wording instead of one.
		key = timeout
	}
	s.warnKeyed(ctx, key, "publish failed", err, "event_type", eventType)
	if herr.CodeOf(err) == herr.ResourceExhausted {
		// The broker is full (the in-memory broker's reject-publish
		// bound): its reason is the publisher's to read, and written for
		// it (no subscription or consumer named).
		return herr.Wrap(code, err, "Unable to publish to the message broker: "+herr.MessageOf(err))
	}
	return herr.Wrap(code, err, "Unable to publish to the message broker")
}

// warn logs a failure warning, rate-limited by message and error text: an
// outage fails every publish alike, and one line per interval with a count
// says as much as thousands (internal/lograte).
func (s *Service) warn(ctx context.Context, msg string, err error, args ...any) {
	s.warnKeyed(ctx, errText(err), msg, err, args...)
}

// warnKeyed is warn with the lines that count as the same chosen by key
// (with msg) rather than by the error's whole text.
func (s *Service) warnKeyed(ctx context.Context, key, msg string, err error, args ...any) {
	s.warnings.Log(ctx, s.cfg.Logger, slog.LevelWarn, msg+"\x00"+key, msg, append(args, slog.String("err", errText(err)))...)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// compact removes insignificant whitespace so the stored event is small;
// already compact input (the common case) is returned as is. Spaces
// inside strings ("Ada Lovelace") do not count: before they did, and
// compacting such already compact messages again was a sixth of a
// publishing server's CPU (docs/benchmarks.md).
func compact(m json.RawMessage) json.RawMessage {
	if !strictjson.SpaceBetweenTokens(m) {
		return m
	}
	var buf bytes.Buffer
	buf.Grow(len(m))
	if err := json.Compact(&buf, m); err != nil {
		return m
	}
	return buf.Bytes()
}

// BatchResult is one event's outcome in a batch publish.
type BatchResult struct {
	Published *Published
	Err       error
}

// PublishBatch publishes events; each gets its own result, in order.
// Invalid events fail alone; the valid ones are sent to the broker as one
// batch, in batch order (pubsubx.Broker.SendBatch), so on a broker that keeps
// publish order a single receiver sees them in that order; the broker's
// round trips overlap (the notifications API's "in parallel"). One event
// the broker refuses fails alone. One Config.PublishTimeout bounds the
// broker's part of the whole batch.
func (s *Service) PublishBatch(ctx context.Context, p *auth.Principal, events []Event) []BatchResult {
	return s.publishBatch(ctx, p, events, nil, s.cfg.Now().UTC())
}

// publishBatch is PublishBatch with events[i] published as ids[i] (nil:
// fresh ids) at now (UTC, the batch's one publish time).
func (s *Service) publishBatch(ctx context.Context, p *auth.Principal, events []Event, ids []string, now time.Time) []BatchResult {
	sendCtx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	out := make([]BatchResult, len(events))
	msgs := make([]*pubsubx.Message, 0, len(events))
	msgSlab := make([]pubsubx.Message, len(events))
	pubSlab := make([]Published, len(events))
	index := make([]int, 0, len(events)) // index[k] is the event of msgs[k]
	// One producer span for the batch, whose trace context every event
	// carries (telemetry.StartPublishBatch).
	ctx, op := telemetry.StartPublishBatch(ctx, batchEventType(events), len(events))
	tc := traceContextOf(ctx)
	for i := range events {
		msg, pub := &msgSlab[i], &pubSlab[i]
		id := ""
		if ids != nil {
			id = ids[i]
		} else {
			id = newEventID()
		}
		if err := s.prepare(ctx, p, events[i], id, now, tc, msg, pub); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Published = pub
		msgs = append(msgs, msg)
		index = append(index, i)
	}
	for k, err := range s.cfg.Broker.SendBatch(spanned(sendCtx, ctx), msgs) {
		if err != nil {
			err = s.overflowed(sendCtx, msgs[k], err)
		}
		if err != nil {
			i := index[k]
			err = s.sendFailed(ctx, sendCtx, err, events[i].EventType)
			out[i] = BatchResult{Err: err}
		}
	}
	if telemetry.Enabled() {
		errs := make([]error, len(out))
		for i := range out {
			errs[i] = out[i].Err
		}
		op.EndPublishBatch(ctx, errs)
	}
	return out
}

// batchEventType is the one event type of events, or "" when they have
// several (or none).
func batchEventType(events []Event) string {
	if len(events) == 0 {
		return ""
	}
	t := events[0].EventType
	for _, e := range events[1:] {
		if e.EventType != t {
			return ""
		}
	}
	return t
}

// traceContext is the W3C trace context an event carries (empty with
// telemetry off).
type traceContext struct{ parent, state string }

func traceContextOf(ctx context.Context) traceContext {
	var tc traceContext
	tc.parent, tc.state = telemetry.TraceContext(ctx)
	return tc
}

// Outcome is one event's result as both publish transports report it (the
// notifications API's PublishingResult): published, with Published set
// (success:true), or not, with FailureReason saying why (success:false).
type Outcome struct {
	Published     *Published
	FailureReason string
	// At is when a keyed publish was first handled (its plan's publish
	// time), the same in a replay: the time a transport echoes for a
	// failed event without occurred_at. Zero for a publish without a
	// key (the transport takes Service.Now).
	At time.Time
	// Replayed says the outcome is the one the event's idempotency key
	// (or the batch's) first answered: nothing was published now.
	Replayed bool
}

// Success reports whether the event was published.
func (o Outcome) Success() bool { return o.Published != nil }

// PublishOutcome publishes e as Publish does and sorts the result the way
// both transports answer it: a broker failure (herr.Unavailable: the event
// was not published) is an Outcome with success false, not an error; any
// other error (InvalidArgument, PermissionDenied, Canceled, …) fails the
// request and is returned as is.
func (s *Service) PublishOutcome(ctx context.Context, p *auth.Principal, e Event) (Outcome, error) {
	pub, err := s.Publish(ctx, p, e)
	switch {
	case err == nil:
		return Outcome{Published: pub}, nil
	case herr.CodeOf(err) == herr.Unavailable:
		return Outcome{FailureReason: FailureReason(err)}, nil
	}
	return Outcome{}, err
}

// CheckBatchSize returns the herr.InvalidArgument error (naming the field
// "events") for a batch of n events outside 1–MaxBatchEvents, nil
// otherwise. Both transports check the size before decoding the events.
func CheckBatchSize(n int) error {
	switch {
	case n == 0:
		return herr.InField(herr.New(herr.InvalidArgument, "events must hold at least one event"), "events")
	case n > MaxBatchEvents:
		return herr.InField(herr.New(herr.InvalidArgument, "events holds %d events; a batch holds at most %d", n, MaxBatchEvents), "events")
	}
	return nil
}

// BatchItem is one event of a batch request as its transport decoded it:
// the Event, or Err when the transport could not turn its wire form into
// one (that event then fails alone, with herr.MessageOf(Err) as its
// failure reason). Key is the event's own idempotency key ("": none;
// PublishItemsKeyed).
type BatchItem struct {
	Event Event
	Err   error
	Key   string
}

// PublishItems publishes the items that decoded (PublishBatch: in batch
// order, one result each) and returns one Outcome per item, index for
// index: every failure, a decoding one included, is success false with
// its reason, and one event failing does not stop the others.
func (s *Service) PublishItems(ctx context.Context, p *auth.Principal, items []BatchItem) []Outcome {
	out := make([]Outcome, len(items))
	events := make([]Event, 0, len(items))
	index := make([]int, 0, len(items)) // events[k] is items[index[k]]
	for i, it := range items {
		if it.Err != nil {
			out[i].FailureReason = FailureReason(it.Err)
			continue
		}
		events = append(events, it.Event)
		index = append(index, i)
	}
	for k, r := range s.PublishBatch(ctx, p, events) {
		if r.Err != nil {
			out[index[k]].FailureReason = FailureReason(r.Err)
			continue
		}
		out[index[k]].Published = r.Published
	}
	return out
}

// FailureReason is err's caller-safe message (herr.MessageOf) as a
// PublishingResult's failure_reason: at most MaxFailureReasonBytes bytes
// of UTF-8, cut at a character boundary and ended with "…" when longer.
func FailureReason(err error) string {
	return CapFailureReason(herr.MessageOf(err))
}

// CapFailureReason cuts m to MaxFailureReasonBytes as FailureReason does.
func CapFailureReason(m string) string {
	if len(m) <= MaxFailureReasonBytes {
		return m
	}
	const ellipsis = "…"
	cut := MaxFailureReasonBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + ellipsis
}
