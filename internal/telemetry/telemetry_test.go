package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
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
	}
	require.True(t, on(func(string) (string, bool) { return "none,console", true }, EnvTracesExporter))
}

func TestProducerReadsTheEventsTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := producer([]byte(`{"specversion":"1.0","traceparent":"` + tp + `","tracestate":"k=v","data":{"traceparent":"x"}}`))
	require.True(t, sc.IsValid())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
	require.Equal(t, "k=v", sc.TraceState().String())
	for _, body := range []string{`{"id":"1","data":{}}`, `{"traceparent":"not-one"}`, `{"traceparent":"00-\u0030"}`} {
		require.Equal(t, trace.SpanContext{}, producer([]byte(body)), body)
	}
}
