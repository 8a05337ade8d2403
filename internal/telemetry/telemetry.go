// Package telemetry is Herald's OpenTelemetry: it sets up the SDK's trace
// and meter providers from the standard OTEL_* environment variables,
// through go.opentelemetry.io/contrib/exporters/autoexport (in the AWS
// build, the SDK's OTLP and console exporters chosen by the same
// variables: exporters_aws.go), and holds the
// spans and metrics that package delivery and the transports record, the
// broker wrapper that makes broker calls child spans (Broker) and the
// per-consumer gauges (RegisterConsumerGauges) (docs/telemetry.md).
//
// Telemetry is off unless OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER
// names an exporter (otlp, prometheus or console; "none" is off), and
// always off under OTEL_SDK_DISABLED=true. Off, the global providers stay
// OpenTelemetry's no-ops: every span and instrument in this package costs
// a call that does nothing, and no event carries a traceparent. (The
// specification's default exporter is otlp; Herald reads an unset
// variable as none, so that a deployment that never asked for telemetry
// never dials a collector.)
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Environment variables Herald reads itself; autoexport and the SDK read
// the rest (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_EXPORTER_OTLP_*, OTEL_EXPORTER_PROMETHEUS_HOST/_PORT, …).
const (
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	EnvTracesExporter  = "OTEL_TRACES_EXPORTER"
	EnvMetricsExporter = "OTEL_METRICS_EXPORTER"
)

// DefaultServiceName is the service.name resource attribute unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
const DefaultServiceName = "herald"

// enabled reports whether Setup installed a provider of either signal.
var enabled atomic.Bool

// Enabled reports whether telemetry is on in this process: entrypoints
// wrap their handlers with instrumentation only then, so that off costs
// nothing per request.
func Enabled() bool { return enabled.Load() }

// Telemetry is what Setup installed. The zero value (telemetry off) is
// valid: its methods do nothing.
type Telemetry struct {
	tp *sdktrace.TracerProvider // nil when traces are off
	mp *sdkmetric.MeterProvider // nil when metrics are off
}

// exporters is what Exporters reports; "" until Setup turns a signal on.
var exporters atomic.Value

// Exporters names the exporters Setup put in force in this process, for
// the start-up log line: "traces=otlp metrics=prometheus" (the
// OTEL_*_EXPORTER lists as given, a signal that is off left out), or
// "off". It names no endpoint: an OTLP endpoint's URL may carry
// credentials.
func Exporters() string {
	if s, _ := exporters.Load().(string); s != "" {
		return s
	}
	return "off"
}

// Setup reads the OTEL_* variables from the process environment and, when
// they turn a signal on, installs its SDK provider as the global one (with
// the W3C trace-context and baggage propagators when traces are on). Call
// it once per process, before app.Open; a second call installs nothing
// more. Errors name the variable at fault.
func Setup(ctx context.Context) (*Telemetry, error) {
	return setup(ctx, os.LookupEnv)
}

func setup(ctx context.Context, lookup func(string) (string, bool)) (*Telemetry, error) {
	t := &Telemetry{}
	if v, _ := lookup(EnvSDKDisabled); strings.EqualFold(strings.TrimSpace(v), "true") {
		return t, nil
	}
	traces, metrics := on(lookup, EnvTracesExporter), on(lookup, EnvMetricsExporter)
	if !traces && !metrics {
		return t, nil
	}
	if !enabled.CompareAndSwap(false, true) {
		return t, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	var names []string
	for _, s := range []struct {
		on   bool
		name string
		env  string
	}{{traces, "traces", EnvTracesExporter}, {metrics, "metrics", EnvMetricsExporter}} {
		if s.on {
			v, _ := lookup(s.env)
			names = append(names, s.name+"="+strings.ReplaceAll(strings.TrimSpace(v), " ", ""))
		}
	}
	exporters.Store(strings.Join(names, " "))
	if traces {
		exp, err := newSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvTracesExporter, err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(filteredProvider{TracerProvider: t.tp})
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	}
	if metrics {
		r, err := newMetricReader(ctx)
		if err != nil {
			_ = t.Shutdown(ctx)
			return nil, fmt.Errorf("%s: %w", EnvMetricsExporter, err)
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r), sdkmetric.WithResource(res), sdkmetric.WithView(dropGoCloud))
		otel.SetMeterProvider(t.mp)
	}
	return t, nil
}

// on reports whether the exporter list in variable name turns its signal
// on: set, and not only "none".
func on(lookup func(string) (string, bool), name string) bool {
	v, _ := lookup(name)
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" && e != "none" {
			return true
		}
	}
	return false
}

// ForceFlush exports every finished span and the current metrics now. The
// Lambda bootstrap calls it before each invocation returns: a frozen
// function sends nothing. It honours ctx's deadline.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes and stops the providers (and the Prometheus exporter's
// listener). Entrypoints call it on exit, within ctx's deadline.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// untracedScopePrefix marks the instrumentation scopes Herald keeps out
// of its telemetry: gocloud.dev's docstore makes a span and a latency
// sample of every store call, several per lease-store operation, which
// cost more than the operation's own telemetry and say less than the one
// "store <op>" span and herald.store.operation.duration Herald records
// per operation (StartStore).
const untracedScopePrefix = "gocloud.dev/"

// filteredProvider is the SDK's tracer provider with the tracers of
// untracedScopePrefix scopes replaced by no-op ones.
type filteredProvider struct {
	*sdktrace.TracerProvider
}

// Tracer returns the SDK's tracer for name, or a no-op one for a scope
// Herald does not trace.
func (p filteredProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	if strings.HasPrefix(name, untracedScopePrefix) {
		return noop.NewTracerProvider().Tracer(name)
	}
	return p.TracerProvider.Tracer(name, opts...)
}

// dropGoCloud drops the instruments of untracedScopePrefix scopes.
func dropGoCloud(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if strings.HasPrefix(i.Scope.Name, untracedScopePrefix) {
		return sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}}, true
	}
	return sdkmetric.Stream{}, false
}
