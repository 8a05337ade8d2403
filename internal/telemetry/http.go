package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps h with otelhttp when telemetry is on: a server span per
// request named by the route pattern that served it ("POST
// /api/v1beta/events"), the W3C trace context of the request continued,
// and the http.server.* metrics. Off, it returns h itself. gRPC, SSE and
// WebSocket requests are HTTP requests to Herald and get their span here.
func Handler(h http.Handler) http.Handler {
	if !Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "herald",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))
}

// Route wraps a ServeMux (or anything that sets http.Request.Pattern) so
// that the request's server span is named by the pattern that served it
// and carries it as http.route, even when middleware between Handler and
// the mux passed the mux a copy of the request. Off, it returns h.
func Route(h http.Handler) http.Handler {
	if !Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.Pattern != "" {
			span := trace.SpanFromContext(r.Context())
			span.SetName(r.Pattern)
			span.SetAttributes(attribute.String("http.route", routeOf(r.Pattern)))
		}
	})
}

// routeOf drops the method and host of a ServeMux pattern: "POST
// /v1/x/{id}" is route "/v1/x/{id}".
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return pattern
}

// LogHandler wraps h so that every record logged with a context holding a
// valid span carries trace_id and span_id (hex, as in the W3C
// traceparent), the keys log backends correlate on.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}
