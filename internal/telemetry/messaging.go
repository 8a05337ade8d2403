package telemetry

import (
	"bytes"
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
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
	meter      = otel.Meter(scope)
	propagator = propagation.TraceContext{}
	system     = attribute.String(attrSystem, "herald")

	sent, consumed, acks, redeliveries, deadLetters metric.Int64Counter
	opDuration, processDuration                     metric.Float64Histogram
	sessions                                        metric.Int64UpDownCounter
)

func init() {
	// The global meter delegates to the provider Setup installs; with none
	// installed its instruments are no-ops. Errors only report invalid
	// names, which these are not.
	sent, _ = meter.Int64Counter("messaging.client.sent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Events handed to the broker, by outcome (ok or error)."))
	consumed, _ = meter.Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Events delivered to consumers, by operation (pull, stream)."))
	opDuration, _ = meter.Float64Histogram("messaging.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of publish, receive and settle operations."))
	processDuration, _ = meter.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from an event's delivery to its acknowledgement by a stream consumer."))
	acks, _ = meter.Int64Counter("herald.acknowledgements", metric.WithUnit("{acknowledgement}"),
		metric.WithDescription("Acknowledgements, by outcome (committed, requeued, stale, error)."))
	redeliveries, _ = meter.Int64Counter("herald.redeliveries", metric.WithUnit("{message}"),
		metric.WithDescription("Events delivered again after a nack, an expired lease or a lost session."))
	deadLetters, _ = meter.Int64Counter("herald.dead_letters", metric.WithUnit("{message}"),
		metric.WithDescription("Events dead-lettered, by reason (DELIVERY_LIMIT, EXPIRED, MAXLEN)."))
	sessions, _ = meter.Int64UpDownCounter("herald.stream.sessions", metric.WithUnit("{session}"),
		metric.WithDescription("Open stream sessions, by transport."))
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
	outcome := "ok"
	if err != nil {
		outcome = "error"
		o.span.RecordError(err)
		o.span.SetStatus(codes.Error, "publish failed")
	}
	o.span.End()
	opts := metric.WithAttributes(system, attribute.String(attrOperation, "publish"), attribute.String(attrOutcome, outcome))
	sent.Add(ctx, 1, opts)
	opDuration.Record(ctx, time.Since(o.start).Seconds(), opts)
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
	consumed.Add(ctx, int64(len(events)), opts)
	if redelivered > 0 {
		redeliveries.Add(ctx, int64(redelivered), opts)
	}
	if !o.span.IsRecording() {
		return
	}
	o.span.SetAttributes(attribute.Int(attrBatchSize, len(events)))
	for _, e := range events {
		if sc := producer(e); sc.IsValid() {
			o.span.AddLink(trace.Link{SpanContext: sc})
		}
	}
}

// producer returns the span context in an encoded event's traceparent
// and tracestate extension attributes, or an invalid one. It scans rather
// than decodes: Herald's encoder writes the extensions before data, so the
// first "traceparent" key is the event's own, and a value that is not a
// W3C traceparent is refused by the propagator.
func producer(event []byte) trace.SpanContext {
	tp := stringField(event, `"traceparent":"`)
	if tp == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{KeyTraceParent: tp}
	if ts := stringField(event, `"tracestate":"`); ts != "" {
		c[KeyTraceState] = ts
	}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), c))
}

// stringField returns the JSON string after the first key (given with its
// opening quote of the value), or "" when absent or escaped.
func stringField(b []byte, key string) string {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || j > 512 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return ""
	}
	return string(rest[:j])
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
	outcome := "ok"
	if err != nil {
		outcome = "error"
		o.span.RecordError(err)
		o.span.SetStatus(codes.Error, o.name+" failed")
	}
	o.span.End()
	opDuration.Record(ctx, time.Since(o.start).Seconds(),
		metric.WithAttributes(system, attribute.String(attrOperation, o.name), attribute.String(attrOutcome, outcome)))
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
	acks.Add(ctx, int64(n), metric.WithAttributes(system, attribute.String(attrOutcome, outcome)))
}

// Processed records how long a stream consumer took from delivery to
// acknowledgement.
func Processed(ctx context.Context, transport string, d time.Duration) {
	if !Enabled() {
		return
	}
	processDuration.Record(ctx, d.Seconds(), metric.WithAttributes(system, attribute.String(attrTransport, transport)))
}

// DeadLettered counts n events dead-lettered for reason (DELIVERY_LIMIT,
// EXPIRED, MAXLEN).
func DeadLettered(ctx context.Context, reason string, n int) {
	if n > 0 && Enabled() {
		deadLetters.Add(ctx, int64(n), metric.WithAttributes(system, attribute.String(attrReason, reason)))
	}
}

// SessionOpened counts an open stream session of transport (sse, grpc,
// websocket, …) until the returned func is called.
func SessionOpened(ctx context.Context, transport string) (closed func()) {
	if !Enabled() {
		return func() {}
	}
	opts := metric.WithAttributes(system, attribute.String(attrTransport, transport))
	sessions.Add(ctx, 1, opts)
	return func() { sessions.Add(context.WithoutCancel(ctx), -1, opts) }
}
