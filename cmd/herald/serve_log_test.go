package main_test

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeLogsOneFormat runs `herald serve` with traces exported to a
// port where nothing listens: the start-up line names the broker, the
// store, the auth mode and the exporters (and no token), and the
// exporter's failure is a line in slog's text format like every other
// line, not the log package's or OpenTelemetry's own format.
func TestServeLogsOneFormat(t *testing.T) {
	t.Parallel()
	const token = "serve-log-test-token-0123456789"
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = env("HERALD_DEV_TOKEN="+token,
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_BSP_SCHEDULE_DELAY=50")
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()
	sc := bufio.NewScanner(errPipe)
	var lines []string
	addr := ""
	for addr == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if m := regexp.MustCompile(`msg="herald listening" addr=(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			assert.Contains(t, sc.Text(), " topic=mem://herald store=mem://herald/key auth=\"development token\" telemetry=\"traces=otlp\"")
		}
	}
	require.NotEmpty(t, addr, "serve logged no start-up line:\n%s", strings.Join(lines, "\n"))

	// A publish makes a span; its export fails.
	c := exec.CommandContext(ctx, bin, "publish", "--type", "served.ok")
	c.Env = env("HERALD_URL="+addr, "HERALD_DEV_TOKEN="+token)
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), `msg="telemetry error"`) {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()
	require.Contains(t, lines[len(lines)-1], `level=WARN msg="telemetry error"`, "the failed export was not logged through slog:\n%s", strings.Join(lines, "\n"))
	slogLine := regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)
	for _, l := range lines {
		assert.Regexp(t, slogLine, l)
		assert.NotContains(t, l, token)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "serve stops cleanly on SIGTERM")
}
