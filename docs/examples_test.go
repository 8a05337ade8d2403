// Package docs_test runs the shell examples of README.md and docs/*.md
// against a running Herald, so that examples cannot rot.
//
// A fenced block whose info string is "sh run" (or "bash run") is
// runnable. Each file's runnable blocks run in order, in one bash script
// with `set -euo pipefail`, against a fresh Herald (package local) whose
// development token is dev-token, with these variables set:
//
//	H      Herald's base URL, e.g. http://127.0.0.1:41234
//	PORT   its port
//	TOKEN  dev-token
//
// and the herald command (cmd/herald, built once per run) first on PATH.
//
// curl runs with --fail-with-body (a .curlrc in CURL_HOME), so an HTTP
// error fails the block; an example that shows an error answer says so
// itself (`|| true`, or -w '%{http_code}'). CONTRIBUTING.md ("Examples that
// run") documents the marker.
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldevents/herald/local"
)

// block is one runnable example.
type block struct {
	file string
	line int // of the opening fence
	code string
}

var fence = regexp.MustCompile("^(\\s*)(```+)(.*)$")

// runnable returns the runnable blocks of one Markdown file, in order.
func runnable(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	var closing string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fence.FindStringSubmatch(line)
		switch {
		case cur == nil && closing == "" && m != nil:
			closing = m[2]
			if info := strings.Fields(m[3]); len(info) >= 2 && (info[0] == "sh" || info[0] == "bash") && info[1] == "run" {
				cur = &block{file: path, line: n}
			}
		case closing != "" && m != nil && m[2] == closing && strings.TrimSpace(m[3]) == "":
			if cur != nil {
				out = append(out, *cur)
			}
			cur, closing = nil, ""
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if closing != "" {
		t.Fatalf("%s: a code fence is not closed", path)
	}
	return out
}

// files lists README.md and every docs/*.md.
func files(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

// heraldDir holds the herald command built by TestMain.
var heraldDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "herald"), "../cmd/herald")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the herald command:", err)
		os.Exit(1)
	}
	heraldDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func TestExamples(t *testing.T) {
	total := 0
	for _, path := range files(t) {
		blocks := runnable(t, path)
		total += len(blocks)
		if len(blocks) == 0 {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			runFile(t, blocks)
		})
	}
	if total == 0 {
		t.Fatal("no runnable example found: README.md and docs/ mark them with ```sh run")
	}
}

func runFile(t *testing.T, blocks []block) {
	h := local.Start(t, func(c *local.Config) { c.DevToken = "dev-token" })
	u, err := url.Parse(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte("fail-with-body\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo %q >&2\n", fmt.Sprintf("### example %d of %d: %s:%d", i+1, len(blocks), b.file, b.line))
		script.WriteString(b.code)
		script.WriteString("\n")
	}
	scriptPath := filepath.Join(dir, "examples.sh")
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bound for a hung example; none should come near it.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", scriptPath)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "H="+h.URL, "PORT="+u.Port(), "TOKEN=dev-token", "CURL_HOME="+dir,
		"PATH="+heraldDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Its own process group, so that a background job an example starts
	// (a streaming curl) is ended with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("examples failed (%v); output, with the last example that started marked ###:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
}

// TestRunnableMarker checks the extraction: only "sh run" / "bash run"
// blocks are taken, and fences inside longer fences are text.
func TestRunnableMarker(t *testing.T) {
	t.Parallel()
	md := "# x\n```sh\nnot run\n```\n```sh run\necho one\n```\n````markdown\n```sh run\nquoted\n```\n````\n```bash run\necho two\n```\n"
	path := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runnable(t, path)
	if len(got) != 2 || got[0].code != "echo one\n" || got[1].code != "echo two\n" || got[0].line != 5 {
		t.Fatalf("runnable blocks: %+v", got)
	}
}
