//go:build herald_aws

package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The AWS build (the Lambda bootstrap) chooses among the SDK's own OTLP
// and console exporters instead of linking contrib's autoexport, whose
// Prometheus exporter a Lambda function cannot use (nothing can scrape a
// frozen function) and whose Prometheus packages cost every cold start
// their initialisers, telemetry on or off (docs/benchmarks.md, "Telemetry
// on and off"). The variables mean what they mean to autoexport.

func newSpanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch name := exporterName(EnvTracesExporter); name {
	case "otlp":
		switch p := otlpProtocol("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p {
		case "grpc":
			return otlptracegrpc.New(ctx)
		case "http/protobuf":
			return otlptracehttp.New(ctx)
		default:
			return nil, fmt.Errorf("OTLP protocol %q is not supported (grpc or http/protobuf)", p)
		}
	case "console":
		return stdouttrace.New()
	default:
		return nil, unsupported(name)
	}
}

func newMetricReader(ctx context.Context) (sdkmetric.Reader, error) {
	var (
		exp sdkmetric.Exporter
		err error
	)
	switch name := exporterName(EnvMetricsExporter); name {
	case "otlp":
		switch p := otlpProtocol("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"); p {
		case "grpc":
			exp, err = otlpmetricgrpc.New(ctx)
		case "http/protobuf":
			exp, err = otlpmetrichttp.New(ctx)
		default:
			return nil, fmt.Errorf("OTLP protocol %q is not supported (grpc or http/protobuf)", p)
		}
	case "console":
		exp, err = stdoutmetric.New()
	default:
		return nil, unsupported(name)
	}
	if err != nil {
		return nil, err
	}
	// The periodic reader reads OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT;
	// the Lambda bootstrap flushes it before each invocation returns.
	return sdkmetric.NewPeriodicReader(exp), nil
}

// exporterName is the one exporter variable name names, "none" dropped.
func exporterName(name string) string {
	var names []string
	for _, e := range strings.Split(os.Getenv(name), ",") {
		if e = strings.TrimSpace(e); e != "" && e != "none" {
			names = append(names, e)
		}
	}
	if len(names) != 1 {
		return strings.Join(names, ",")
	}
	return names[0]
}

// otlpProtocol is the OTLP protocol for one signal: its own variable,
// else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf (the
// specification's default, and autoexport's).
func otlpProtocol(signal string) string {
	for _, v := range []string{signal, "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(os.Getenv(v)); p != "" {
			return p
		}
	}
	return "http/protobuf"
}

func unsupported(name string) error {
	if name == "prometheus" {
		return fmt.Errorf("the prometheus exporter is not in the AWS Lambda build: nothing can scrape a frozen function; use otlp to a collector extension")
	}
	return fmt.Errorf("exporter %q is not supported in the AWS Lambda build (otlp, console or none; one at a time)", name)
}
