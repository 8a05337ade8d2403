package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestRunDeliversEveryEventToEveryStream runs the tool as make
// bench-streams does, on the in-memory stack with a few streams of each
// transport, so that it keeps working: every stream opens, gets every
// event once, and none ends early.
func TestRunDeliversEveryEventToEveryStream(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "herald")
	build := exec.Command("go", "build", "-o", bin, "github.com/heraldevents/herald/cmd/herald")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build ./cmd/herald: %v", err)
	}
	for _, tr := range []string{"sse", "grpc", "ws"} {
		t.Run(tr, func(t *testing.T) {
			const n, events = 12, 4
			res, err := run(config{
				herald: bin, stack: "mem", transport: tr,
				n: n, concurrency: 5, events: events,
				every: 10 * time.Millisecond, drain: 2 * time.Minute, idle: 100 * time.Millisecond,
				srcIPs: 2, log: io.Discard,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.openFailed != 0 || res.missing != 0 || res.duplicates != 0 || res.streamErrs != 0 {
				t.Fatalf("open failures %d (%s), missing %d, duplicates %d, streams ended %d (%s)",
					res.openFailed, res.openErr, res.missing, res.duplicates, res.streamErrs, res.streamErr)
			}
			if res.delivered != n*events {
				t.Fatalf("delivered %d, want %d", res.delivered, n*events)
			}
			if res.fanMax <= 0 || res.openP99 <= 0 {
				t.Fatalf("fan-out max %v, open p99 %v: not measured", res.fanMax, res.openP99)
			}
		})
	}
}
