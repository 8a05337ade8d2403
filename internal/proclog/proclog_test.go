package proclog

import (
	"bytes"
	"errors"
	"log"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"google.golang.org/grpc/grpclog"
)

// TestInstallRoutesEveryLogger holds that after Install the standard log
// package, OpenTelemetry's error handler and gRPC's logger all write
// through the one slog handler, in its format, and that gRPC's
// warnings stay below the default level as they do in gRPC itself.
func TestInstallRoutesEveryLogger(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var buf bytes.Buffer
	Install(slog.New(slog.NewJSONHandler(&buf, nil)))

	log.Printf("from the log package")
	otel.Handle(errors.New("export failed"))
	grpclog.Errorf("grpc %s", "error")
	grpclog.Warning("grpc warning")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`"level":"INFO","msg":"from the log package"`,
		`"level":"WARN","msg":"telemetry error","err":"export failed"`,
		`"level":"ERROR","msg":"grpc error","component":"grpc"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], `{"time":`) || !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %s, want a JSON line holding %s", i, lines[i], w)
		}
	}
}
