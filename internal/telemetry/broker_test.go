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
