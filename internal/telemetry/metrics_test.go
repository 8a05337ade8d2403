package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/heraldevents/herald/herr"
)

// manual turns telemetry on for the test with the package's instruments
// on a provider read by the returned reader, and puts things back after.
// Tests using it must not run in parallel.
func manual(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	was, wasOn := ins, enabled.Load()
	ins = newInstruments(mp.Meter(scope))
	enabled.Store(true)
	t.Cleanup(func() {
		ins = was
		enabled.Store(wasOn)
		_ = mp.Shutdown(context.Background())
	})
	return r, mp
}

// collect returns the metric name's data points.
func collect(t *testing.T, r *sdkmetric.ManualReader, name string) metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	return nil
}

func attrsOf(set attribute.Set) map[string]string {
	out := map[string]string{}
	for _, kv := range set.ToSlice() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

func TestSessionsCountByTransportAndQueueKind(t *testing.T) {
	r, _ := manual(t)
	ctx := WithTransport(context.Background(), "sse")
	closed := SessionOpened(ctx, "durable")
	other := SessionOpened(context.Background(), "non_durable")
	sum, ok := collect(t, r, "herald.stream.sessions").(metricdata.Sum[int64])
	require.True(t, ok)
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		a := attrsOf(dp.Attributes)
		got[a[attrTransport]+"/"+a[attrQueueKind]] = dp.Value
	}
	require.Equal(t, map[string]int64{"sse/durable": 1, "unknown/non_durable": 1}, got)
	closed()
	other()
	sum = collect(t, r, "herald.stream.sessions").(metricdata.Sum[int64])
	for _, dp := range sum.DataPoints {
		require.Zero(t, dp.Value, "%v", attrsOf(dp.Attributes))
	}
}

func TestProcessingMeasuresDeliveryToSettlement(t *testing.T) {
	r, _ := manual(t)
	p := NewProcessing(WithTransport(context.Background(), "grpc"))
	p.Delivered(1)
	p.Delivered(2)
	p.Delivered(3)
	time.Sleep(20 * time.Millisecond)
	// 1 is acked (also listed as a nack: acks win), 2 nacked, 3 left
	// unsettled, 9 never delivered.
	p.Settled(context.Background(), []int64{1, 9}, []int64{1, 2})
	h, ok := collect(t, r, "messaging.process.duration").(metricdata.Histogram[float64])
	require.True(t, ok)
	got := map[string]uint64{}
	for _, dp := range h.DataPoints {
		a := attrsOf(dp.Attributes)
		require.Equal(t, "grpc", a[attrTransport])
		got[a[attrOutcome]] = dp.Count
		require.GreaterOrEqual(t, dp.Sum, 0.02)
	}
	require.Equal(t, map[string]uint64{"ack": 1, "nack": 1}, got)
	// A settled tag is forgotten: settling it again records nothing.
	p.Settled(context.Background(), []int64{1, 2}, nil)
	h = collect(t, r, "messaging.process.duration").(metricdata.Histogram[float64])
	var n uint64
	for _, dp := range h.DataPoints {
		n += dp.Count
	}
	require.Equal(t, uint64(2), n)

	var off *Processing
	off.Delivered(1)
	off.Settled(context.Background(), []int64{1}, nil)
}

func TestFailedOperationsCarryErrorType(t *testing.T) {
	r, _ := manual(t)
	ctx, op := StartSettle(context.Background(), "ack")
	op.End(ctx, herr.New(herr.Unavailable, "store down"))
	_, op = StartPublish(context.Background(), "t")
	op.EndPublish(ctx, nil)
	h := collect(t, r, "messaging.client.operation.duration").(metricdata.Histogram[float64])
	got := map[string]string{}
	for _, dp := range h.DataPoints {
		a := attrsOf(dp.Attributes)
		got[a[attrOperation]] = a[attrOutcome] + "/" + a[attrErrorType]
	}
	require.Equal(t, map[string]string{"ack": "error/unavailable", "publish": "ok/"}, got)
}

func TestLeaseExpiriesAndTriageAreCounted(t *testing.T) {
	r, _ := manual(t)
	LeasesExpired(context.Background(), 3)
	LeasesExpired(context.Background(), 0)
	Triaged(context.Background(), "REPLAY", "REPLAYED")
	sum := collect(t, r, "herald.lease.expiries").(metricdata.Sum[int64])
	require.Len(t, sum.DataPoints, 1)
	require.Equal(t, int64(3), sum.DataPoints[0].Value)
	sum = collect(t, r, "herald.dead_letters.triaged").(metricdata.Sum[int64])
	require.Len(t, sum.DataPoints, 1)
	require.Equal(t, map[string]string{attrSystem: "herald", attrAction: "REPLAY", attrOutcome: "REPLAYED"}, attrsOf(sum.DataPoints[0].Attributes))
}

func TestConsumerGauges(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	var calls atomic.Int32
	var fail atomic.Bool
	list := func(ctx context.Context) ([]ConsumerState, error) {
		calls.Add(1)
		_, hasDeadline := ctx.Deadline()
		require.True(t, hasDeadline, "the listing is bounded")
		if fail.Load() {
			return nil, errors.New("store down")
		}
		return []ConsumerState{
			{ID: "dc1", Type: "DURABLE_CONSUMER", InFlight: 5, Requeued: 2},
			{ID: "q1", Type: "DURABLE_QUEUE", InFlight: 1},
			{ID: "q2", Type: "DURABLE_QUEUE", InFlight: 4, Requeued: 4},
			{ID: "secret-token-1", Type: "NON_DURABLE_QUEUE", InFlight: 2, Requeued: 1},
			{ID: "secret-token-2", Type: "NON_DURABLE_QUEUE", InFlight: 3},
		}, nil
	}
	unregister, err := registerConsumerGauges(mp.Meter(scope), list, GaugeOptions{MinInterval: time.Hour, MaxSeries: 2})
	require.NoError(t, err)

	read := func() map[string][2]int64 {
		out := map[string][2]int64{}
		for _, name := range []string{"herald.consumer.lag", "herald.consumer.in_flight"} {
			g, ok := collect(t, r, name).(metricdata.Gauge[int64])
			if !ok {
				continue
			}
			for _, dp := range g.DataPoints {
				a := attrsOf(dp.Attributes)
				for _, v := range a {
					require.NotContains(t, v, "secret-token", "a reconnect token is never an attribute")
				}
				key := a[attrConsumerType] + "/" + a[attrConsumer]
				v := out[key]
				if name == "herald.consumer.lag" {
					v[0] = dp.Value
				} else {
					v[1] = dp.Value
				}
				out[key] = v
			}
		}
		return out
	}
	want := map[string][2]int64{
		"DURABLE_CONSUMER/dc1":           {5, 3},
		"DURABLE_QUEUE/q1":               {1, 1},
		"DURABLE_QUEUE/_other":           {4, 0}, // past MaxSeries
		"NON_DURABLE_QUEUE/_non_durable": {5, 4},
	}
	require.Equal(t, want, read())
	calls.Store(0)
	require.Equal(t, want, read())
	require.Zero(t, calls.Load(), "a listing is reused within MinInterval")

	require.NoError(t, unregister())
	require.Empty(t, read(), "unregistered gauges report nothing")

	// A failed listing reports nothing rather than stale values, and its
	// error reaches the reader (the SDK logs it).
	fail.Store(true)
	_, err = registerConsumerGauges(mp.Meter(scope), list, GaugeOptions{})
	require.NoError(t, err)
	var rm metricdata.ResourceMetrics
	require.ErrorContains(t, r.Collect(context.Background(), &rm), "store down")
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
				require.Empty(t, g.DataPoints, m.Name)
			}
		}
	}
}

func TestConsumerGaugesOffRegistersNothing(t *testing.T) {
	require.False(t, Enabled())
	unregister, err := RegisterConsumerGauges(func(context.Context) ([]ConsumerState, error) {
		t.Fatal("listed while telemetry is off")
		return nil, nil
	}, GaugeOptions{})
	require.NoError(t, err)
	require.NoError(t, unregister())
}

// TestWebhookMetrics: attempts count by destination and outcome, their
// latency is in the histogram, and the consecutive-failure gauge holds
// the last value recorded per destination; past maxWebhookSeries
// destinations the rest share "_other".
func TestWebhookMetrics(t *testing.T) {
	r, _ := manual(t)
	ctx := context.Background()
	WebhookAttempted(ctx, "wh-a", WebhookFailed, 2*time.Second)
	WebhookAttempted(ctx, "wh-a", WebhookOK, time.Second)
	WebhookAttempted(ctx, "wh-a", WebhookOK, time.Second)
	WebhookAttempted(ctx, "wh-b", WebhookGone, 0)
	WebhookConsecutiveFailures(ctx, "wh-a", 3)
	WebhookConsecutiveFailures(ctx, "wh-a", 0)
	WebhookConsecutiveFailures(ctx, "wh-b", 1)

	sum := collect(t, r, "herald.webhook.attempts").(metricdata.Sum[int64])
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		a := attrsOf(dp.Attributes)
		got[a[attrConsumer]+"/"+a[attrOutcome]] = dp.Value
	}
	require.Equal(t, map[string]int64{"wh-a/failed": 1, "wh-a/ok": 2, "wh-b/gone": 1}, got)

	h := collect(t, r, "herald.webhook.duration").(metricdata.Histogram[float64])
	secs := map[string]float64{}
	for _, dp := range h.DataPoints {
		a := attrsOf(dp.Attributes)
		secs[a[attrConsumer]+"/"+a[attrOutcome]] = dp.Sum
	}
	require.Equal(t, map[string]float64{"wh-a/failed": 2, "wh-a/ok": 2, "wh-b/gone": 0}, secs)

	g := collect(t, r, "herald.webhook.consecutive_failures").(metricdata.Gauge[int64])
	fails := map[string]int64{}
	for _, dp := range g.DataPoints {
		fails[attrsOf(dp.Attributes)[attrConsumer]] = dp.Value
	}
	require.Equal(t, map[string]int64{"wh-a": 0, "wh-b": 1}, fails)

	webhookNames.Lock()
	for len(webhookNames.seen) < maxWebhookSeries {
		webhookNames.seen[fmt.Sprint("filler-", len(webhookNames.seen))] = true
	}
	webhookNames.Unlock()
	t.Cleanup(func() {
		webhookNames.Lock()
		webhookNames.seen = map[string]bool{}
		webhookNames.Unlock()
	})
	require.Equal(t, "wh-a", webhookAttr("wh-a").Value.AsString(), "a destination seen keeps its series")
	require.Equal(t, "_other", webhookAttr("wh-new").Value.AsString())
}
