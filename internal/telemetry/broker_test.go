package telemetry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/pubsubx"
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

// bare is a broker with none of the optional abilities.
type bare struct{ pubsubx.Broker }

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
	require.Equal(t, []error{nil, nil}, pubsubx.SendBatch(ctx, b, []*pubsubx.Message{{Body: []byte("1")}, {Body: []byte("2")}}))
	// An empty receive is measured but makes no span.
	msgs, err := b.Receive(ctx, "none-yet", 10, 0)
	require.Error(t, err)
	require.Empty(t, msgs)
	msgs, err = b.Receive(ctx, "s", 10, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.NoError(t, b.Ack(ctx, "s", msgs))
	msgs, err = b.Receive(ctx, "s", 10, 0)
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

func TestBrokerKeepsTheOptionalAbilities(t *testing.T) {
	manual(t)
	inner := mem.New(time.Minute)
	defer inner.Close()
	b := Broker(bare{inner}, "mem")
	require.Equal(t, math.MaxInt, b.(pubsubx.SizeLimited).MaxMessageBytes(), "no limit stays no limit")
	require.True(t, b.(pubsubx.Ordering).KeepsPublishOrder())
	require.NoError(t, b.(pubsubx.Pinger).Ping(context.Background()))

	limited := Broker(limitedBroker{bare{inner}}, "x")
	require.Equal(t, 10, limited.(pubsubx.SizeLimited).MaxMessageBytes())
	require.False(t, limited.(pubsubx.Ordering).KeepsPublishOrder())
	require.ErrorIs(t, limited.(pubsubx.Pinger).Ping(context.Background()), errDown)
}

var errDown = errors.New("down")

type limitedBroker struct{ bare }

func (limitedBroker) MaxMessageBytes() int           { return 10 }
func (limitedBroker) KeepsPublishOrder() bool        { return false }
func (limitedBroker) Ping(ctx context.Context) error { return errDown }

func TestBrokerOffIsTheBrokerItself(t *testing.T) {
	require.False(t, Enabled())
	inner := mem.New(time.Minute)
	defer inner.Close()
	require.Same(t, inner, Broker(inner, "mem"))
}
