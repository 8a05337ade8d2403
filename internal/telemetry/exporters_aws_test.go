//go:build herald_aws

package telemetry

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAWSExporters: the AWS build chooses the SDK's exporters by the same
// variables autoexport reads, and refuses Prometheus with a reason.
func TestAWSExporters(t *testing.T) {
	ctx := context.Background()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for _, tc := range []struct {
		traces, metrics, protocol string
		problem                   string
	}{
		{traces: "otlp", metrics: "otlp"},
		{traces: "otlp", metrics: "otlp", protocol: "grpc"},
		{traces: "console", metrics: "console"},
		{traces: "none", metrics: "prometheus", problem: "nothing can scrape a frozen function"},
		{traces: "otlp,console", problem: `exporter "otlp,console" is not supported`},
		{traces: "zipkin", problem: `exporter "zipkin" is not supported`},
		{traces: "otlp", protocol: "http/json", problem: `OTLP protocol "http/json" is not supported`},
	} {
		t.Setenv(EnvTracesExporter, tc.traces)
		t.Setenv(EnvMetricsExporter, tc.metrics)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
		var errs []error
		if on(os.LookupEnv, EnvTracesExporter) {
			exp, err := newSpanExporter(ctx)
			if err == nil {
				require.NoError(t, exp.Shutdown(ctx))
			}
			errs = append(errs, err)
		}
		if on(os.LookupEnv, EnvMetricsExporter) {
			r, err := newMetricReader(ctx)
			if err == nil {
				require.NotNil(t, r)
			}
			errs = append(errs, err)
		}
		require.NotEmpty(t, errs, "%+v", tc)
		found := false
		for _, err := range errs {
			if tc.problem == "" {
				require.NoError(t, err, "%+v", tc)
			} else if err != nil {
				require.ErrorContains(t, err, tc.problem)
				found = true
			}
		}
		require.Equal(t, tc.problem != "", found, "%+v", tc)
	}
}
