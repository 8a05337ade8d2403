package telemetry

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/cloudevent"
)

func TestOffUnlessAnExporterIsNamed(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{EnvTracesExporter: "none", EnvMetricsExporter: "none"},
		{EnvTracesExporter: " none , ", EnvMetricsExporter: ""},
		{EnvSDKDisabled: "TRUE", EnvTracesExporter: "otlp", EnvMetricsExporter: "prometheus"},
	} {
		tel, err := setup(context.Background(), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		require.NoError(t, err)
		require.Nil(t, tel.tp, "%v", env)
		require.Nil(t, tel.mp, "%v", env)
		require.NoError(t, tel.ForceFlush(context.Background()))
		require.Equal(t, "off", Exporters(), "%v", env)
	}
	require.True(t, on(func(string) (string, bool) { return "none,console", true }, EnvTracesExporter))
}

// TestProducerReadsTheEventsTraceContext: the span context comes from the
// event's own traceparent and tracestate, as cloudevent.Encode writes
// them; one inside data, or a malformed one, is none.
func TestProducerReadsTheEventsTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	encode := func(data, traceparent, tracestate string) []byte {
		b, err := cloudevent.Encode(cloudevent.Input{ID: "1", Source: "/s", Type: "a.b", Time: time.Unix(1, 0), PublishedAt: time.Unix(2, 0),
			PrincipalIdentity: "p", Data: json.RawMessage(data), TraceParent: traceparent, TraceState: tracestate})
		require.NoError(t, err)
		return b
	}
	for _, ts := range []string{"k=v", ""} {
		sc := producer(encode(`{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}`, tp, ts))
		require.True(t, sc.IsValid())
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
		require.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
		require.Equal(t, ts, sc.TraceState().String())
	}
	for _, event := range [][]byte{
		encode(`{}`, "", ""),
		encode(`{"x":"y","traceparent":"`+tp+`"}`, "", ""), // only data has one
		encode(`{}`, "not-one", ""),
		encode(`{}`, "00-\u0030", ""),
		[]byte(`{"id":"1","traceparent":"` + tp + `","data":{}}`), // not where Herald writes it
		[]byte(`"}`), nil,
	} {
		require.Equal(t, trace.SpanContext{}, producer(event), "%s", event)
	}
}

// BenchmarkSetup is what Setup adds to a cold start (the Lambda init
// figure of docs/benchmarks.md): off, and OTLP traces and metrics over
// each protocol to a collector that is not there (Setup dials nothing).
// Run it with -tags herald_aws for the Lambda build's exporters.
func BenchmarkSetup(b *testing.B) {
	for _, c := range []struct{ name, traces, protocol string }{
		{"off", "none", ""}, {"otlp-http", "otlp", "http/protobuf"}, {"otlp-grpc", "otlp", "grpc"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.Setenv(EnvTracesExporter, c.traces)
			b.Setenv(EnvMetricsExporter, c.traces)
			b.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
			b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			ctx := context.Background()
			for b.Loop() {
				enabled.Store(false)
				tel, err := Setup(ctx)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = tel.Shutdown(ctx)
				b.StartTimer()
			}
			enabled.Store(false)
		})
	}
}
