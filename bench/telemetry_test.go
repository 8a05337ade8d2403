package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/heraldevents/herald/internal/telemetry"
)

// TestMain turns telemetry on when the OTEL_* variables say so (as the
// entrypoints do), so that the benchmarks measure its cost:
//
//	OTEL_TRACES_EXPORTER=otlp OTEL_METRICS_EXPORTER=otlp \
//	OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \
//	go test -run '^$' -bench EndToEnd ./bench/
func TestMain(m *testing.M) {
	tel, err := telemetry.Setup(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "telemetry:", err)
		os.Exit(2)
	}
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = tel.Shutdown(ctx)
	cancel()
	os.Exit(code)
}
