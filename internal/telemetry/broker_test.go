package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// spans records the spans of the package's tracer for the test.
func spans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	was := tracer
	tracer = tp.Tracer(scope)
	t.Cleanup(func() { tracer = was })
	return rec
}

func TestBrokerCallsAreChildSpansAndMeasured(t *testing.T) {
	r, _ := manual(t)
	rec := spans(t)
	ctx := context.Background()
	inner := mem.New(time.Minute)
	defer inner.Close()
	b := Broker(inner, "mem")
	require.NotSame(t, inner, b)

	ctx, parent := tracer.Start(ctx, "receive pull")
	require.NoError(t, b.CreateSubscription(ctx, "s", nil))
	require.Equal(t, []error{nil, nil}, b.SendBatch(ctx, []*pubsubx.Message{{Body: []byte("1")}, {Body: []byte("2")}}))
	// An empty receive is measured but makes no span.
	msgs, err := b.Receive(ctx, "none-yet", pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.Error(t, err)
	require.Empty(t, msgs)
	msgs, err = b.Receive(ctx, "s", pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.NoError(t, b.Ack(ctx, "s", msgs))
	msgs, err = b.Receive(ctx, "s", pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.NoError(t, err)
	require.Empty(t, msgs)
	parent.End()

	var names []string
	for _, s := range rec.Ended() {
		if s.Name() == "receive pull" {
			continue
		}
		names = append(names, s.Name())
		require.Equal(t, trace.SpanKindClient, s.SpanKind(), s.Name())
		require.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of the operation", s.Name())
	}
	require.Equal(t, []string{"broker create_subscription", "broker send", "broker receive", "broker receive", "broker ack"}, names)

	h := collect(t, r, "herald.broker.operation.duration").(metricdata.Histogram[float64])
	got := map[string]uint64{}
	for _, dp := range h.DataPoints {
		a := attrsOf(dp.Attributes)
		require.Equal(t, "mem", a[attrBroker])
		got[a[attrOperation]+"/"+a[attrOutcome]+"/"+a[attrErrorType]] += dp.Count
	}
	require.Equal(t, map[string]uint64{
		"create_subscription/ok/": 1, "send/ok/": 1, "receive/error/not_found": 1, "receive/ok/": 2, "ack/ok/": 1,
	}, got)
}

func TestBrokerKeepsTheDriversOptions(t *testing.T) {
	manual(t)
	inner := mem.New(time.Minute)
	defer inner.Close()
	b := Broker(inner, "mem")
	require.Equal(t, 0, b.MaxMessageBytes(), "no limit stays no limit")
	require.True(t, b.KeepsPublishOrder())
	require.NoError(t, b.Ping(context.Background()))

	limited := Broker(pubsubx.NewBroker(limitedBroker{inner.Driver()}), "x")
	require.Equal(t, 10, limited.MaxMessageBytes())
	require.False(t, limited.KeepsPublishOrder())
	require.ErrorIs(t, limited.Ping(context.Background()), errDown)
}

var errDown = errors.New("down")

type limitedBroker struct{ driver.Broker }

func (limitedBroker) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{MaxMessageBytes: 10}
}
func (limitedBroker) Ping(ctx context.Context) error { return errDown }

func TestBrokerOffIsTheBrokerItself(t *testing.T) {
	require.False(t, Enabled())
	inner := mem.New(time.Minute)
	defer inner.Close()
	require.Same(t, inner, Broker(inner, "mem"))
}

// TestBatchPublishIsOneSpan: a batch publish is one producer span with
// its message count (and its event type when the batch has one), every
// event counted by outcome; a receive of events that carry one producer
// context links it once.
func TestBatchPublishIsOneSpan(t *testing.T) {
	r, _ := manual(t)
	rec := spans(t)
	ctx, op := StartPublishBatch(context.Background(), "", 3)
	parent, _ := TraceContext(ctx)
	require.NotEmpty(t, parent)
	op.EndPublishBatch(ctx, []error{nil, herr.New(herr.Unavailable, "broker down"), nil})

	ended := rec.Ended()
	require.Len(t, ended, 1)
	s := ended[0]
	require.Equal(t, "publish", s.Name())
	require.Equal(t, trace.SpanKindProducer, s.SpanKind())
	require.Equal(t, "Error", s.Status().Code.String())
	got := map[string]string{}
	for _, kv := range s.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "3", got[attrBatchSize])
	require.NotContains(t, got, attrEventType, "a batch of several types names none")
	sum := collect(t, r, "messaging.client.sent.messages").(metricdata.Sum[int64])
	byOutcome := map[string]int64{}
	for _, dp := range sum.DataPoints {
		a := attrsOf(dp.Attributes)
		byOutcome[a[attrOutcome]+"/"+a[attrErrorType]] += dp.Value
	}
	require.Equal(t, map[string]int64{"ok/": 2, "error/unavailable": 1}, byOutcome)

	event, err := cloudevent.Encode(cloudevent.Input{ID: "1", Source: "/s", Type: "a.b", Time: time.Unix(1, 0), PublishedAt: time.Unix(2, 0),
		Data: []byte(`{}`), TraceParent: parent})
	require.NoError(t, err)
	rctx, recv := StartReceive(context.Background(), "pull")
	recv.Delivered(rctx, [][]byte{event, event, event}, 0)
	recv.End(rctx, nil)
	ended = rec.Ended()
	require.Len(t, ended, 2)
	links := ended[1].Links()
	require.Len(t, links, 1, "three events of one batch: one link")
	require.Equal(t, s.SpanContext().SpanID(), links[0].SpanContext.SpanID())
}
