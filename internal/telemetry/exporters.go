//go:build !herald_aws

package telemetry

import (
	"context"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newSpanExporter and newMetricReader build the exporters the OTEL_*
// variables name. Every build but the AWS one uses contrib's autoexport,
// which knows otlp (grpc and http/protobuf), prometheus and console.
func newSpanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	return autoexport.NewSpanExporter(ctx)
}

func newMetricReader(ctx context.Context) (sdkmetric.Reader, error) {
	return autoexport.NewMetricReader(ctx)
}
