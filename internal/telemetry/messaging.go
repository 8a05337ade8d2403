package telemetry

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/herr"
)

// scope is the instrumentation scope of Herald's own spans and metrics.
const scope = "github.com/heraldevents/herald"

// Attribute keys (OpenTelemetry messaging semantic conventions, and
// herald.* where they have none). Every value is from a small fixed set:
// never an event id, lease id, token or resource id.
const (
	attrSystem    = "messaging.system"
	attrOperation = "messaging.operation.name"
	attrOpType    = "messaging.operation.type"
	attrEventType = "herald.event_type" // spans only: event types are the deployment's to choose
	attrOutcome   = "herald.outcome"
	attrTransport = "herald.transport"
	attrReason    = "herald.reason"
	attrQueueKind = "herald.queue.kind"
	attrBatchSize = "messaging.batch.message_count"
	attrErrorType = "error.type"
	attrAction    = "herald.action"
)

// Carrier keys of the W3C trace context: the HTTP header names, the
// CloudEvents distributed-tracing extension attributes and the broker
// message attributes all use them.
const (
	KeyTraceParent = "traceparent"
	KeyTraceState  = "tracestate"
)

var (
	tracer     = otel.Tracer(scope)
	propagator = propagation.TraceContext{}
	system     = attribute.String(attrSystem, "herald")

	// ins are the instruments this package records, from the global
	// meter: it delegates to the provider Setup installs, and with none
	// installed its instruments are no-ops. Tests swap in their own.
	ins = newInstruments(otel.Meter(scope))
)

// instruments are Herald's own metrics (docs/telemetry.md, "Metrics").
type instruments struct {
	sent, consumed, acks, redeliveries, deadLetters metric.Int64Counter
	leaseExpiries, triaged, storeConflicts          metric.Int64Counter
	opDuration, processDuration, brokerDuration     metric.Float64Histogram
	storeDuration                                   metric.Float64Histogram
	sessions                                        metric.Int64UpDownCounter
	webhookAttempts                                 metric.Int64Counter
	webhookDuration                                 metric.Float64Histogram
	webhookFailures                                 metric.Int64Gauge
}

// newInstruments creates the instruments on m. Errors only report
// invalid names, which these are not; an instrument that failed is a
// no-op.
func newInstruments(m metric.Meter) *instruments {
	in := &instruments{}
	in.sent, _ = m.Int64Counter("messaging.client.sent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Events handed to the broker, by outcome (ok or error)."))
	in.consumed, _ = m.Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Events delivered to consumers, by operation (pull, stream)."))
	in.opDuration, _ = m.Float64Histogram("messaging.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of publish, receive and settle operations."))
	in.processDuration, _ = m.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from an event's delivery to a stream consumer to its acknowledgement or nack, by transport."))
	in.brokerDuration, _ = m.Float64Histogram("herald.broker.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of calls to the message broker (send, receive, ack, nack, subscription changes), by operation and outcome."))
	in.storeDuration, _ = m.Float64Histogram("herald.store.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of lease-store operations (pull, pull_events, acknowledge, settle, reject), retries included, by operation and outcome."))
	in.storeConflicts, _ = m.Int64Counter("herald.store.conflicts", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries of lease-store operations after a fresh read (a conditional write lost a race, or what was read changed under it)."))
	in.acks, _ = m.Int64Counter("herald.acknowledgements", metric.WithUnit("{acknowledgement}"),
		metric.WithDescription("Acknowledgements, by outcome (committed, requeued, stale, error)."))
	in.redeliveries, _ = m.Int64Counter("herald.redeliveries", metric.WithUnit("{message}"),
		metric.WithDescription("Events delivered again after a nack, an expired lease or a lost session."))
	in.deadLetters, _ = m.Int64Counter("herald.dead_letters", metric.WithUnit("{message}"),
		metric.WithDescription("Events dead-lettered, by reason (DELIVERY_LIMIT, EXPIRED, MAXLEN)."))
	in.leaseExpiries, _ = m.Int64Counter("herald.lease.expiries", metric.WithUnit("{message}"),
		metric.WithDescription("Events whose lease expired unacknowledged and that the lease-expiry sweep requeued."))
	in.triaged, _ = m.Int64Counter("herald.dead_letters.triaged", metric.WithUnit("{message}"),
		metric.WithDescription("Dead letters acted on, by action (REPLAY, DISCARD, LEAVE) and outcome."))
	in.sessions, _ = m.Int64UpDownCounter("herald.stream.sessions", metric.WithUnit("{session}"),
		metric.WithDescription("Open stream sessions, by transport and queue kind."))
	in.webhookAttempts, _ = m.Int64Counter("herald.webhook.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Webhook delivery attempts, by destination and outcome (ok, failed, gone); the ok ones are the successes."))
	in.webhookDuration, _ = m.Float64Histogram("herald.webhook.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of webhook delivery attempts, to the end of the answer read, by destination and outcome."))
	in.webhookFailures, _ = m.Int64Gauge("herald.webhook.consecutive_failures", metric.WithUnit("{attempt}"),
		metric.WithDescription("A webhook destination's failed attempts since its last success (its circuit breaker opens at 5)."))
	return in
}

// Op is one messaging operation in flight: its span and its start, for
// the duration histogram.
type Op struct {
	span  trace.Span
	name  string
	start time.Time
	off   bool // telemetry is off: every method returns at once
}

// offOp is every Op while telemetry is off: starting one then allocates
// nothing and builds no attributes.
var offOp = &Op{off: true}

// StartPublish starts the producer span of publishing one event of type
// eventType. TraceParent and TraceState give what to write into the event
// and its broker message; End records the outcome.
func StartPublish(ctx context.Context, eventType string) (context.Context, *Op) {
	if !Enabled() {
		return ctx, offOp
	}
	ctx, span := tracer.Start(ctx, "publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(system, attribute.String(attrOperation, "publish"), attribute.String(attrOpType, "send"), attribute.String(attrEventType, eventType)))
	return ctx, &Op{span: span, name: "publish", start: time.Now()}
}

// StartPublishBatch starts the one producer span of publishing a batch of
// n events, as the messaging semantic conventions have a batch send: a
// single "send" span with messaging.batch.message_count, whose trace
// context every event of the batch carries (there is no span per event,
// which cost more than the publish itself). eventType is the batch's one
// event type, or "" when its events have several. EndPublishBatch
// records the outcomes.
func StartPublishBatch(ctx context.Context, eventType string, n int) (context.Context, *Op) {
	if !Enabled() {
		return ctx, offOp
	}
	attrs := []attribute.KeyValue{system, attribute.String(attrOperation, "publish"), attribute.String(attrOpType, "send"),
		attribute.Int(attrBatchSize, n)}
	if eventType != "" {
		attrs = append(attrs, attribute.String(attrEventType, eventType))
	}
	ctx, span := tracer.Start(ctx, "publish", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return ctx, &Op{span: span, name: "publish", start: time.Now()}
}

// EndPublishBatch ends a batch publish whose events had the errors errs
// (nil for each event sent): the sent counter by outcome, one operation
// duration, and a span whose status is an error when any event failed.
func (o *Op) EndPublishBatch(ctx context.Context, errs []error) {
	if o.off {
		return
	}
	ok := 0
	var failures map[herr.Code]int64
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		if failures == nil {
			failures = map[herr.Code]int64{}
			o.span.RecordError(err)
		}
		failures[herr.CodeOf(err)]++
	}
	attrs := []attribute.KeyValue{system, attribute.String(attrOperation, "publish"), attribute.String(attrOutcome, "ok")}
	if ok > 0 {
		ins.sent.Add(ctx, int64(ok), metric.WithAttributes(attrs...))
	}
	for code, n := range failures {
		ins.sent.Add(ctx, n, metric.WithAttributes(system, attribute.String(attrOperation, "publish"),
			attribute.String(attrOutcome, "error"), attribute.String(attrErrorType, code.String())))
	}
	if failures != nil {
		o.span.SetStatus(codes.Error, "publish failed")
		attrs = failed(attrs, errs[slices.IndexFunc(errs, func(err error) bool { return err != nil })])
	}
	o.span.End()
	ins.opDuration.Record(ctx, time.Since(o.start).Seconds(), metric.WithAttributes(attrs...))
}

// TraceContext returns the W3C traceparent and tracestate of ctx's span,
// or "" when there is none or it is not sampled: an event published with
// telemetry off carries neither.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[KeyTraceParent], c[KeyTraceState]
}

// EndPublish ends a publish: the span's status and the sent counter by
// outcome.
func (o *Op) EndPublish(ctx context.Context, err error) {
	if o.off {
		return
	}
	attrs := []attribute.KeyValue{system, attribute.String(attrOperation, "publish"), attribute.String(attrOutcome, "ok")}
	if err != nil {
		attrs = failed(attrs, err)
		o.span.RecordError(err)
		o.span.SetStatus(codes.Error, "publish failed")
	}
	o.span.End()
	opts := metric.WithAttributes(attrs...)
	ins.sent.Add(ctx, 1, opts)
	ins.opDuration.Record(ctx, time.Since(o.start).Seconds(), opts)
}

// StartReceive starts the consumer span of one pull or stream read
// (operation "pull" or "stream").
func StartReceive(ctx context.Context, operation string) (context.Context, *Op) {
	if !Enabled() {
		return ctx, offOp
	}
	ctx, span := tracer.Start(ctx, "receive "+operation, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(system, attribute.String(attrOperation, operation), attribute.String(attrOpType, "receive")))
	return ctx, &Op{span: span, name: operation, start: time.Now()}
}

// Delivered records events (encoded CloudEvents) handed to a consumer by
// the operation o, redelivered of them not for the first time: the
// consumed and redeliveries counters and, when the span records, a link
// to each event's producer span read from its traceparent extension
// attribute.
func (o *Op) Delivered(ctx context.Context, events [][]byte, redelivered int) {
	if o.off {
		return
	}
	if len(events) == 0 {
		return
	}
	opts := metric.WithAttributes(system, attribute.String(attrOperation, o.name))
	ins.consumed.Add(ctx, int64(len(events)), opts)
	if redelivered > 0 {
		ins.redeliveries.Add(ctx, int64(redelivered), opts)
	}
	if !o.span.IsRecording() {
		return
	}
	o.span.SetAttributes(attribute.Int(attrBatchSize, len(events)))
	// The events of one published batch carry one producer context and
	// are usually delivered together: each is linked once.
	var linked []trace.SpanContext
	var last []byte // the traceparent text of the event before
	for _, e := range events {
		tp, _ := traceFields(e)
		if tp == nil || bytes.Equal(tp, last) {
			continue
		}
		last = tp
		if sc := producer(e); sc.IsValid() && !slices.ContainsFunc(linked, sc.Equal) {
			linked = append(linked, sc)
			o.span.AddLink(trace.Link{SpanContext: sc})
		}
	}
}

// producer returns the span context in an encoded event's traceparent
// and tracestate extension attributes, or an invalid one. A value that is
// not a W3C traceparent is refused by the propagator.
func producer(event []byte) trace.SpanContext {
	tp, ts := traceFields(event)
	if tp == nil {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{KeyTraceParent: string(tp)}
	if ts != nil {
		c[KeyTraceState] = string(ts)
	}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), c))
}

// traceFields returns the texts of an encoded event's traceparent and
// tracestate extension attributes as slices of event, nil when absent or
// escaped. It reads the event's tail rather than decoding it: Herald's
// encoder (cloudevent.Encode, member for member the CloudEvents SDK's
// order) writes the extensions after data, in name order, and these two
// sort last, so the event ends `,"traceparent":"…"}` or
// `,"traceparent":"…","tracestate":"…"}`. Anything else — a traceparent
// inside data, say — is not the event's own and reads as none. Searching
// from the end also keeps the cost off the size of data.
func traceFields(event []byte) (traceparent, tracestate []byte) {
	b := bytes.TrimRight(event, " \t\r\n")
	if !bytes.HasSuffix(b, []byte(`"}`)) {
		return nil, nil
	}
	key, value := lastMember(b[:len(b)-2])
	if key == keyTraceState {
		if tracestate = value; !plain(tracestate) {
			tracestate = nil
		}
		// What is left ends with the traceparent's closing quote.
		b = b[:len(b)-2-len(value)-len(keyTraceState)]
		if !bytes.HasSuffix(b, []byte(`"`)) {
			return nil, nil
		}
		key, value = lastMember(b[:len(b)-1])
	}
	if key != keyTraceParent || !plain(value) {
		return nil, nil
	}
	return value[:len(value):len(value)], tracestate
}

// The members traceFields reads, each up to the opening quote of its value.
const keyTraceParent, keyTraceState = `,"traceparent":"`, `,"tracestate":"`

// lastMember splits off the string value that b ends with (b is an
// encoded event up to the closing quote of its last member's value) and
// names the member by which of keyTraceParent or keyTraceState precedes
// it; "" for any other.
func lastMember(b []byte) (key string, value []byte) {
	i := bytes.LastIndexByte(b, '"')
	if i < 0 {
		return "", nil
	}
	value, head := b[i+1:], b[:i+1]
	switch {
	case bytes.HasSuffix(head, []byte(keyTraceParent)):
		return keyTraceParent, value
	case bytes.HasSuffix(head, []byte(keyTraceState)):
		return keyTraceState, value
	}
	return "", nil
}

// plain reports whether s can be the whole text of a JSON string as
// Herald writes trace context: not empty, at most 512 bytes, no quote or
// escape.
func plain(s []byte) bool {
	return len(s) > 0 && len(s) <= 512 && !bytes.ContainsAny(s, `"\`)
}

// SetQueueKind names the kind of queue (durable, non_durable) a stream
// operation reads.
func (o *Op) SetQueueKind(kind string) {
	if o.off {
		return
	}
	o.span.SetAttributes(attribute.String(attrQueueKind, kind))
}

// End ends a receive or settle operation: the span's status and the
// operation duration.
func (o *Op) End(ctx context.Context, err error) {
	if o.off {
		return
	}
	attrs := []attribute.KeyValue{system, attribute.String(attrOperation, o.name), attribute.String(attrOutcome, "ok")}
	if err != nil {
		attrs = failed(attrs, err)
		o.span.RecordError(err)
		o.span.SetStatus(codes.Error, o.name+" failed")
	}
	o.span.End()
	ins.opDuration.Record(ctx, time.Since(o.start).Seconds(), metric.WithAttributes(attrs...))
}

// failed turns the outcome attribute of attrs (the last one) into "error"
// and adds the semantic conventions' error.type: the Herald error code of
// err ("unavailable", "deadline_exceeded", …), one of a fixed set.
func failed(attrs []attribute.KeyValue, err error) []attribute.KeyValue {
	attrs[len(attrs)-1] = attribute.String(attrOutcome, "error")
	return append(attrs, attribute.String(attrErrorType, herr.CodeOf(err).String()))
}

// StartSettle starts the span of an acknowledgement (operation "ack" or
// "nack"); End it, after Acknowledged.
func StartSettle(ctx context.Context, operation string) (context.Context, *Op) {
	if !Enabled() {
		return ctx, offOp
	}
	ctx, span := tracer.Start(ctx, operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(system, attribute.String(attrOperation, operation), attribute.String(attrOpType, "settle")))
	return ctx, &Op{span: span, name: operation, start: time.Now()}
}

// Acknowledged counts n acknowledgements with outcome (committed,
// requeued, stale, error) and sets it on the span.
func (o *Op) Acknowledged(ctx context.Context, outcome string, n int) {
	if o.off {
		return
	}
	if n <= 0 {
		return
	}
	o.span.SetAttributes(attribute.String(attrOutcome, outcome))
	ins.acks.Add(ctx, int64(n), metric.WithAttributes(system, attribute.String(attrOutcome, outcome)))
}

// DeadLettered counts n events dead-lettered for reason (DELIVERY_LIMIT,
// EXPIRED, MAXLEN). The lease store is where events are dead-lettered;
// it is the caller.
func DeadLettered(ctx context.Context, reason string, n int) {
	if n > 0 && Enabled() {
		ins.deadLetters.Add(ctx, int64(n), metric.WithAttributes(system, attribute.String(attrReason, reason)))
	}
}

// LeasesExpired counts n events whose lease expired unacknowledged and
// that the lease-expiry sweep requeued.
func LeasesExpired(ctx context.Context, n int64) {
	if n > 0 && Enabled() {
		ins.leaseExpiries.Add(ctx, n, metric.WithAttributes(system))
	}
}

// Triaged counts one action on a dead letter: action is REPLAY, DISCARD
// or LEAVE and outcome what it did (REPLAYED, DISCARDED, LEFT,
// ORIGIN_QUEUE_DELETED, REPLAY_FAILED); an action outside the three is
// counted as "unknown".
func Triaged(ctx context.Context, action, outcome string) {
	if Enabled() {
		switch action {
		case "REPLAY", "DISCARD", "LEAVE":
		default:
			action = "unknown" // keeps the attribute's values few
		}
		ins.triaged.Add(ctx, 1, metric.WithAttributes(system,
			attribute.String(attrAction, action), attribute.String(attrOutcome, outcome)))
	}
}

type transportKey struct{}

// WithTransport returns ctx naming the stream transport ("sse", "grpc",
// "websocket") that serves the requests made with it: SessionOpened and
// NewProcessing label their metrics with it. The transports call it
// before they open a stream.
func WithTransport(ctx context.Context, transport string) context.Context {
	if !Enabled() {
		return ctx
	}
	return context.WithValue(ctx, transportKey{}, transport)
}

// transportOf returns the transport WithTransport put in ctx, or
// "unknown".
func transportOf(ctx context.Context) string {
	if t, ok := ctx.Value(transportKey{}).(string); ok {
		return t
	}
	return "unknown"
}

// SessionOpened counts an open stream session on a queue of queueKind
// (durable, non_durable), by the transport WithTransport put in ctx,
// until the returned func is called.
func SessionOpened(ctx context.Context, queueKind string) (closed func()) {
	if !Enabled() {
		return func() {}
	}
	opts := metric.WithAttributes(system, attribute.String(attrTransport, transportOf(ctx)), attribute.String(attrQueueKind, queueKind))
	ins.sessions.Add(ctx, 1, opts)
	return func() { ins.sessions.Add(context.WithoutCancel(ctx), -1, opts) }
}

// Processed records d as the processing duration of events settled
// with outcome (ack, nack, reject) on transport, for a caller that knows
// when they were handed out: a pull lease of the durable-consumer API
// knows it in the store (leasestore.AckResult.HandedOut). NewProcessing
// keeps delivery times for the stream transports instead.
func Processed(ctx context.Context, transport, outcome string, d time.Duration) {
	if Enabled() {
		ins.processDuration.Record(ctx, d.Seconds(), metric.WithAttributes(system,
			attribute.String(attrTransport, transport), attribute.String(attrOutcome, outcome)))
	}
}

// maxTracked bounds the delivery tags one Processing remembers: a
// session's unsettled events are bounded by its credit and the store's
// in-flight window (1,000), so only a consumer that never settles
// reaches it, and its later tags go unmeasured.
const maxTracked = 1000

// Processing measures messaging.process.duration for one stream session:
// the time from each delivery tag's hand-over to the consumer to its ack
// or nack. Only stream transports whose consumers settle tags themselves
// use it; events acknowledged by Herald (auto-ack) are not processing.
// A nil *Processing (telemetry off) does nothing. It is safe for
// concurrent use: one goroutine delivers while another settles.
type Processing struct {
	transport attribute.KeyValue
	mu        sync.Mutex
	sent      map[int64]time.Time
}

// NewProcessing returns the Processing of a session served by the
// transport WithTransport put in ctx, or nil when telemetry is off.
func NewProcessing(ctx context.Context) *Processing {
	if !Enabled() {
		return nil
	}
	return &Processing{transport: attribute.String(attrTransport, transportOf(ctx)), sent: map[int64]time.Time{}}
}

// Delivered notes that tag was handed to the consumer now.
func (p *Processing) Delivered(tag int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) < maxTracked {
		p.sent[tag] = time.Now()
	}
}

// Settled records the processing duration of each of acks and nacks
// that Delivered noted (a tag in both counts as acked, as it is settled)
// and forgets them. Call it once the store has settled them.
func (p *Processing) Settled(ctx context.Context, acks, nacks []int64) {
	if p == nil {
		return
	}
	now := time.Now()
	record := func(tags []int64, outcome string) {
		opts := metric.WithAttributes(system, p.transport, attribute.String(attrOutcome, outcome))
		for _, tag := range tags {
			p.mu.Lock()
			at, ok := p.sent[tag]
			delete(p.sent, tag)
			p.mu.Unlock()
			if ok {
				ins.processDuration.Record(ctx, now.Sub(at).Seconds(), opts)
			}
		}
	}
	record(acks, "ack")
	record(nacks, "nack")
}
