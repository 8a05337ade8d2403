package docs_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// goPrograms returns the Go blocks of path marked "go run": whole
// programs (package main) that consume a durable consumer.
func goPrograms(t *testing.T, path string) []block {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	for n, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go run":
			cur = &block{file: path, line: n + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	return out
}

// TestGoExamples builds every "go run" block of README.md and docs/*.md
// as a program of this module and runs it the way the README says:
// HERALD_URL, HERALD_TOKEN and CONSUMER_ID name a running Herald and one
// of its durable consumers. The program must print the event published to
// that consumer within a bound, and end with status 0 soon after an
// interrupt (Ctrl-C), its graceful stop.
func TestGoExamples(t *testing.T) {
	total := 0
	for _, path := range files(t) {
		for _, b := range goPrograms(t, path) {
			total++
			t.Run(filepath.Base(path)+":"+strconv.Itoa(b.line), func(t *testing.T) {
				t.Parallel()
				runGoProgram(t, b)
			})
		}
	}
	if total == 0 {
		t.Fatal("no \"go run\" block found: README.md's client section has one")
	}
}

func runGoProgram(t *testing.T, b block) {
	// A directory of this module, so that the program's import of
	// github.com/heraldevents/herald/client resolves to this tree; "_"
	// keeps it out of ./... while it exists.
	dir, err := os.MkdirTemp(".", "_goexample-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "example")
	build := exec.Command("go", "build", "-o", bin, "./"+filepath.Base(dir))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s:%d does not build: %v\n%s", b.file, b.line, err, out)
	}

	h := local.Start(t, func(c *local.Config) { c.DevToken = "dev-token" })
	c, err := client.New(h.URL, client.WithToken("dev-token"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.CreateConsumer(t.Context(), []client.FilterGroup{{EventType: "docs.example.sent"}})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "HERALD_URL="+h.URL, "HERALD_TOKEN=dev-token", "CONSUMER_ID="+d.ID)
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	e, err := client.NewEvent("docs.example.sent", "/docs/1", map[string]string{"marker": "readme-example"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Publish(t.Context(), e); err != nil || !res.Success {
		t.Fatalf("publish: %v %+v", err, res)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "readme-example") {
		select {
		case err := <-done:
			t.Fatalf("%s:%d ended before printing the event (%v):\n%s", b.file, b.line, err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:%d did not print the published event within 20 s:\n%s", b.file, b.line, out.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s:%d did not stop cleanly on an interrupt (%v):\n%s", b.file, b.line, err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s:%d still runs 20 s after an interrupt:\n%s", b.file, b.line, out.String())
	}
	// The batch was acknowledged ok: nothing is left to pull.
	l, err := c.Pull(t.Context(), d.ID, client.PullOptions{})
	if err != nil || l != nil {
		t.Fatalf("after the example: pull = %+v, %v; want nothing left", l, err)
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		t.Log(sc.Text())
	}
}
