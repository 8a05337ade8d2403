package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// attrBroker names the broker driver (the topic URL's scheme: mem,
// awssns, gcppubsub, rabbit, nats, …) on broker spans and metrics.
const attrBroker = "herald.broker"

// Broker wraps b's driver so that each call to it is a client span
// ("broker send", "broker receive", …), the child of the operation that
// made it, and is measured by herald.broker.operation.duration, and
// returns the portable Broker over the wrapper. driver names the broker
// (the topic URL's scheme). A batch send is one span per piece the
// portable layer hands the driver (pubsubx.Broker.SendBatch). Off, it
// returns b itself.
func Broker(b *pubsubx.Broker, driver string) *pubsubx.Broker {
	if !Enabled() || b == nil {
		return b
	}
	return pubsubx.NewBroker(&tracedBroker{b: b.Driver(), driver: attribute.String(attrBroker, driver)})
}

// tracedBroker is a driver.Broker that traces and measures b.
type tracedBroker struct {
	b      driver.Broker
	driver attribute.KeyValue
}

// call is one broker call in flight.
type call struct {
	span  trace.Span
	attrs []attribute.KeyValue
	start time.Time
}

func (t *tracedBroker) start(ctx context.Context, operation string, extra ...attribute.KeyValue) (context.Context, *call) {
	attrs := []attribute.KeyValue{system, t.driver, attribute.String(attrOperation, operation)}
	ctx, span := tracer.Start(ctx, "broker "+operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, extra...)...))
	return ctx, &call{span: span, attrs: append(attrs, attribute.String(attrOutcome, "ok")), start: time.Now()}
}

func (c *call) end(ctx context.Context, err error) {
	if err != nil {
		c.attrs = failed(c.attrs, err)
		c.span.RecordError(err)
		c.span.SetStatus(codes.Error, "broker call failed")
	}
	c.span.End()
	ins.brokerDuration.Record(ctx, time.Since(c.start).Seconds(), metric.WithAttributes(c.attrs...))
}

// BatchOptions implements driver.Broker as b does.
func (t *tracedBroker) BatchOptions() driver.BatchOptions { return t.b.BatchOptions() }

// SendBatch implements driver.Broker: one span for the piece, with the
// first error among the messages as its status.
func (t *tracedBroker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	ctx, c := t.start(ctx, "send", attribute.Int(attrBatchSize, len(msgs)))
	errs := t.b.SendBatch(ctx, msgs)
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	c.end(ctx, first)
	return errs
}

func (t *tracedBroker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) (err error) {
	ctx, c := t.start(ctx, "create_subscription")
	defer func() { c.end(ctx, err) }()
	return t.b.CreateSubscription(ctx, name, groups)
}

func (t *tracedBroker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) (err error) {
	ctx, c := t.start(ctx, "update_subscription")
	defer func() { c.end(ctx, err) }()
	return t.b.UpdateSubscription(ctx, name, groups)
}

func (t *tracedBroker) DeleteSubscription(ctx context.Context, name string) (err error) {
	ctx, c := t.start(ctx, "delete_subscription")
	defer func() { c.end(ctx, err) }()
	return t.b.DeleteSubscription(ctx, name)
}

// Receive makes its span after the call, and none for an empty receive
// without error: stream sessions poll their subscription all the time,
// and a span per idle poll would drown the traces. Its duration is
// measured either way.
func (t *tracedBroker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	start := time.Now()
	msgs, err := t.b.Receive(ctx, name, p)
	attrs := []attribute.KeyValue{system, t.driver, attribute.String(attrOperation, "receive"), attribute.String(attrOutcome, "ok")}
	if err != nil {
		attrs = failed(attrs, err)
	}
	if len(msgs) > 0 || err != nil {
		_, span := tracer.Start(ctx, "broker receive", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
			trace.WithAttributes(system, t.driver, attribute.String(attrOperation, "receive"), attribute.Int(attrBatchSize, len(msgs))))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "broker call failed")
		}
		span.End()
	}
	ins.brokerDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	return msgs, err
}

func (t *tracedBroker) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) (err error) {
	ctx, c := t.start(ctx, "ack", attribute.Int(attrBatchSize, len(msgs)))
	defer func() { c.end(ctx, err) }()
	return t.b.Ack(ctx, name, msgs)
}

func (t *tracedBroker) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) (err error) {
	ctx, c := t.start(ctx, "nack", attribute.Int(attrBatchSize, len(msgs)))
	defer func() { c.end(ctx, err) }()
	return t.b.Nack(ctx, name, msgs)
}

func (t *tracedBroker) Close() error { return t.b.Close() }

// Ping implements driver.Broker as b does. Readiness probes are not
// traced: they would drown the rest.
func (t *tracedBroker) Ping(ctx context.Context) error { return t.b.Ping(ctx) }

// Backlog implements driver.BacklogReporter as b does, in a "broker
// backlog" span; pubsubx.ErrNoBacklog when b cannot tell.
func (t *tracedBroker) Backlog(ctx context.Context, name string) (driver.Backlog, error) {
	r, ok := t.b.(driver.BacklogReporter)
	if !ok {
		return driver.Backlog{}, pubsubx.ErrNoBacklog
	}
	ctx, c := t.start(ctx, "backlog")
	out, err := r.Backlog(ctx, name)
	c.end(ctx, err)
	return out, err
}
