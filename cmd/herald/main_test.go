package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

// bin is the herald binary TestMain builds.
var bin string

// configHome is an empty XDG_CONFIG_HOME for every run, so that no
// context of the user running the tests is read; a test of contexts gives
// its own.
var configHome string

// runTimeout bounds one run of the binary.
const runTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "herald")
	configHome = filepath.Join(dir, "config")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building herald:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// env is the environment of a run: nothing of the test's own but PATH and
// HOME, plus vars.
func env(vars ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "XDG_CONFIG_HOME=" + configHome}, vars...)
}

// herald runs the binary against h with args.
func herald(t *testing.T, h *local.Instance, args ...string) result {
	t.Helper()
	return heraldIn(t, h, nil, args...)
}

func heraldIn(t *testing.T, h *local.Instance, stdin io.Reader, args ...string) result {
	t.Helper()
	var vars []string
	if h != nil {
		vars = []string{"HERALD_URL=" + h.URL, "HERALD_TOKEN=" + h.Token}
	}
	return heraldEnv(t, vars, stdin, args...)
}

// heraldEnv runs the binary with vars added to env() (a later
// XDG_CONFIG_HOME wins over env's).
func heraldEnv(t *testing.T, vars []string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env(vars...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		t.Fatalf("herald %v: %v", args, err)
	}
	return res
}

// jsonOf decodes a run's standard output.
func jsonOf[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	return v
}

func clientOf(t *testing.T, h *local.Instance) *client.Client {
	t.Helper()
	c, err := client.New(h.URL, client.WithToken(h.Token))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := herald(t, nil, "--help")
	require.Equal(t, 0, r.code, r.stderr)
	for _, c := range []string{"serve", "version", "publish", "consumers", "pull", "tail", "queues", "dlq", "context", "completion", "Exit codes"} {
		assert.Contains(t, r.stdout, c)
	}
	r = herald(t, nil)
	assert.Equal(t, 0, r.code, "no command prints help")
	assert.Contains(t, r.stdout, "Usage:")
	for _, args := range [][]string{
		{"serve"}, {"version"}, {"publish"}, {"pull"}, {"tail"},
		{"consumers"}, {"consumers", "create"}, {"consumers", "list"}, {"consumers", "get"}, {"consumers", "pause"}, {"consumers", "resume"}, {"consumers", "delete"},
		{"queues"}, {"queues", "list"}, {"queues", "ensure"}, {"queues", "update"}, {"queues", "delete"}, {"consumers", "update"},
		{"context"}, {"context", "add"}, {"context", "use"}, {"context", "ls"}, {"context", "rm"}, {"context", "show"},
		{"dlq"}, {"dlq", "list"}, {"dlq", "replay"}, {"dlq", "discard"}, {"completion", "bash"},
	} {
		r := herald(t, nil, append(args, "--help")...)
		assert.Equal(t, 0, r.code, "%v --help", args)
		assert.Contains(t, r.stdout, "Usage:", "%v --help", args)
		assert.Contains(t, r.stdout, "herald "+strings.Join(args, " "), "%v --help", args)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	// Each script is the shell's own: bash's registers with complete,
	// zsh's is a compdef, fish's calls complete -c.
	for sh, marker := range map[string]string{
		"bash": "complete -o default -F __start_herald herald", "zsh": "#compdef herald",
		"fish": "complete -c herald", "powershell": "Register-ArgumentCompleter",
	} {
		r := herald(t, nil, "completion", sh)
		assert.Equal(t, 0, r.code, sh)
		assert.Contains(t, r.stdout, marker, sh)
	}
	// The scripts ask the binary: it completes commands, flags' values and
	// stored context names.
	r := herald(t, nil, "__complete", "con")
	assert.Contains(t, r.stdout, "consumers")
	assert.Contains(t, r.stdout, "context")
	r = herald(t, nil, "__complete", "consumers", "list", "-o", "")
	for _, f := range []string{"table", "json", "yaml", "template=", "jq="} {
		assert.Contains(t, r.stdout, f+"\n")
	}
	cfg := t.TempDir()
	require.Equal(t, 0, heraldEnv(t, []string{"XDG_CONFIG_HOME=" + cfg}, nil, "context", "add", "staging", "--url", "http://127.0.0.1:1").code)
	r = heraldEnv(t, []string{"XDG_CONFIG_HOME=" + cfg}, nil, "__complete", "context", "use", "")
	assert.Contains(t, r.stdout, "staging\n")
	r = heraldEnv(t, []string{"XDG_CONFIG_HOME=" + cfg}, nil, "__complete", "--context", "")
	assert.Contains(t, r.stdout, "staging\n")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	for _, args := range [][]string{
		{"bogus"},
		{"publish"},
		{"publish", "--type", "a.b", "--data", "{not json"},
		{"publish", "--nope"},
		{"--output", "xml", "consumers", "list"},
		{"-o", "template={{.id", "consumers", "list"},
		{"-o", "jq=.[", "consumers", "list"},
		{"-o", "json", "--jq", ".id", "consumers", "list"},
		{"--connect-timeout", "0s", "consumers", "list"},
		{"--context", "no-such-context", "consumers", "list"},
		{"pull", "--consumer", "c", "--ack", "--reject"},
		{"pull", "--consumer", "c", "--retry-after", "5"},
		{"pull", "--consumer", "c", "--extend", "0"},
		{"consumers", "create", "--retry-min-backoff", "60", "--retry-max-backoff", "5"},
		{"consumers", "create", "--max-delivery-attempts", "0"},
		{"consumers", "update", "id"},
		{"consumers", "update", "id", "--no-retry-policy", "--retry-min-backoff", "1"},
		{"context", "add", "x"},
		{"context", "add", "../x", "--url", "http://127.0.0.1:1"},
		{"context", "use", "no-such-context"},
		{"consumers", "get"},
		{"consumers", "create", "--prefix", "/x"},
		{"pull"},
		{"pull", "--consumer", "c", "--limit", "0"},
		{"tail", "--ack"},
		{"dlq", "replay"},
		{"dlq", "replay", "id", "--all"},
		{"--url", "ftp://x", "consumers", "list"},
		{"consumers", "create", "--filters", `[{"event_type":"a.b","filters":[{"filter_typ":"eq","resource_id":"/x"}]}]`},
		{"consumers", "create", "--filters", `[{"Event_Type":"a.b"}]`},
	} {
		r := herald(t, h, args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "herald --help", "%v", args)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	r := herald(t, h, "consumers", "get", "no-such-consumer")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Contains(t, r.stderr, "does not exist")

	r = herald(t, h, "--token", "wrong-token", "consumers", "list")
	assert.Equal(t, 4, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "wrong-token", "a token is never echoed")

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	r = herald(t, nil, "--url", "http://"+addr, "--token", "x", "consumers", "list")
	assert.Equal(t, 5, r.code, r.stderr)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := herald(t, nil, "version")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^herald \S+`, r.stdout)
	v := jsonOf[map[string]string](t, herald(t, nil, "version", "-o", "json"))
	assert.NotEmpty(t, v["version"])
}

func TestPublishConsumersPull(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	d := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--type", "myapp.user.created", "-o", "json"))
	require.NotEmpty(t, d.ID)
	assert.Equal(t, "myapp.user.created", d.FilterGroups[0].EventType)

	r := herald(t, h, "publish", "--type", "myapp.user.created", "--resource", "/users/123", "--data", `{"user_id":"123"}`, "--time", "2024-10-16T14:30:00Z")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "published myapp.user.created 2024-10-16T14:30:00Z\n", r.stdout)

	list := herald(t, h, "consumers", "list")
	require.Equal(t, 0, list.code)
	assert.Contains(t, list.stdout, d.ID)

	type pulled struct {
		LeaseID string `json:"leaseId"`
		Events  []struct {
			Type     string          `json:"type"`
			Subject  string          `json:"subject"`
			Sequence string          `json:"sequence"`
			Data     json.RawMessage `json:"data"`
		} `json:"events"`
		Acknowledged *client.AckResult `json:"acknowledged"`
	}
	p := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--ack", "-o", "json"))
	require.Len(t, p.Events, 1)
	assert.Equal(t, "/users/123", p.Events[0].Subject)
	assert.JSONEq(t, `{"user_id":"123"}`, string(p.Events[0].Data))
	require.NotNil(t, p.Acknowledged)
	assert.Equal(t, client.OutcomeCommitted, p.Acknowledged.Outcome)

	r = herald(t, h, "pull", "--consumer", d.ID)
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stderr, "caught up")

	r = herald(t, h, "consumers", "pause", d.ID)
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "true")
	r = herald(t, h, "pull", "--consumer", d.ID)
	assert.Equal(t, 1, r.code, "a paused consumer: %s", r.stderr)
	require.Equal(t, 0, herald(t, h, "consumers", "resume", d.ID).code)
	got := jsonOf[client.Destination](t, herald(t, h, "consumers", "get", d.ID, "-o", "json"))
	assert.False(t, got.Paused)
	require.NotNil(t, got.Committed)
	assert.Equal(t, *p.Acknowledged.Committed, *got.Committed)

	r = herald(t, h, "consumers", "delete", d.ID)
	require.Equal(t, 0, r.code)
	assert.Equal(t, 3, herald(t, h, "consumers", "get", d.ID).code)
}

func TestPublishFile(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	var lines []string
	for i := range 150 { // two batches
		lines = append(lines, fmt.Sprintf(`{"event_type":"bulk.item","message":{"i":%d}}`, i))
	}
	lines = append(lines,
		`{"specversion":"1.0","id":"x","source":"/s","type":"bulk.cloudevent","subject":"/c/1","data":{"ok":true}}`,
		``,
		`not json`,
		`{"event_type":"bad type!"}`,
		`{"event_type":"typo.t","mesage":{"n":3}}`,
		`{"Event_Type":"case.t"}`)
	file := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	r := herald(t, h, "publish", "--file", file, "-o", "json")
	assert.Equal(t, 1, r.code, "some events failed: %s", r.stderr)
	type summary struct {
		Published int `json:"published"`
		Failed    int `json:"failed"`
		Failures  []struct {
			Line      int    `json:"line"`
			EventType string `json:"event_type"`
			Reason    string `json:"failure_reason"`
		} `json:"failures"`
	}
	s := jsonOf[summary](t, r)
	assert.Equal(t, 151, s.Published)
	assert.Equal(t, 4, s.Failed)
	require.Len(t, s.Failures, 4)
	// Lines that do not decode fail before anything is sent, so they come
	// first; the server's refusal follows.
	assert.Equal(t, 153, s.Failures[0].Line)
	assert.Equal(t, 155, s.Failures[1].Line)
	assert.Contains(t, s.Failures[1].Reason, `unknown field "mesage"`, "a misspelt member is not dropped")
	assert.Equal(t, 156, s.Failures[2].Line)
	assert.Contains(t, s.Failures[2].Reason, `unknown field "Event_Type"`, "member names are case-sensitive")
	assert.Equal(t, 154, s.Failures[3].Line)
	assert.Equal(t, "bad type!", s.Failures[3].EventType)

	// Standard input, the reviewer's case: nothing is published, exit 1.
	r = heraldIn(t, h, strings.NewReader(`{"event_type":"typo.t","mesage":{"n":3}}`+"\n"), "publish", "--file", "-")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stdout, "published 0, failed 1")
	assert.Contains(t, r.stdout, `unknown field "mesage"`)

	// Standard input, table output.
	r = heraldIn(t, h, strings.NewReader(`{"event_type":"stdin.item"}`+"\n"), "publish", "--file", "-")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "published 1, failed 0\n", r.stdout)
	assert.NotContains(t, r.stderr, "publishing", "no progress bar off a terminal")
}

// startTail starts `herald tail args…` and waits until it has opened its
// stream (its first line on standard error).
func startTail(t *testing.T, h *local.Instance, args ...string) (wait func() result, firstLine string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	cmd := exec.CommandContext(ctx, bin, append([]string{"tail"}, args...)...)
	cmd.Env = env("HERALD_URL="+h.URL, "HERALD_TOKEN="+h.Token)
	var out bytes.Buffer
	cmd.Stdout = &out
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	rd := bufio.NewReader(errPipe)
	line, err := rd.ReadString('\n')
	require.NoError(t, err, "tail wrote nothing on stderr")
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(rd); rest <- string(b) }()
	return func() result {
		defer cancel()
		err := cmd.Wait()
		res := result{stdout: out.String(), stderr: line + <-rest}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("tail: %v", err)
		}
		return res
	}, line
}

func TestTailNonDurable(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	c := clientOf(t, h)
	wait, first := startTail(t, h, "--type", "myapp.file.uploaded", "--prefix", "/projects/42/", "--count", "1", "-o", "json")
	require.Regexp(t, `^reconnect token: \S+`, first)
	for _, sub := range []string{"/projects/7/a.pdf", "/projects/42/b.pdf"} { // the first is filtered out
		e, err := client.NewEvent("myapp.file.uploaded", sub, map[string]string{"file": filepath.Base(sub)})
		require.NoError(t, err)
		_, err = c.Publish(t.Context(), e)
		require.NoError(t, err)
	}
	r := wait()
	require.Equal(t, 0, r.code, r.stderr)
	var line struct {
		EventType string          `json:"event_type"`
		Message   json.RawMessage `json:"message"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &line), r.stdout)
	assert.Equal(t, "myapp.file.uploaded", line.EventType)
	assert.JSONEq(t, `{"file":"b.pdf"}`, string(line.Message))
}

func TestTailDurableQueue(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	c := clientOf(t, h)
	q := jsonOf[client.Queue](t, herald(t, h, "queues", "ensure", "orders", "--type", "shop.order.placed", "-o", "json"))
	assert.True(t, q.Created)
	again := jsonOf[client.Queue](t, herald(t, h, "queues", "ensure", "orders", "-o", "json"))
	assert.False(t, again.Created)
	for i := range 2 {
		e, err := client.NewEvent("shop.order.placed", "", map[string]int{"n": i})
		require.NoError(t, err)
		_, err = c.Publish(t.Context(), e)
		require.NoError(t, err)
	}

	// A look without --ack settles nothing.
	wait, _ := startTail(t, h, "--queue", "orders", "--count", "2")
	r := wait()
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, regexp.MustCompile(`(?s)PUBLISHED.*shop\.order\.placed.*shop\.order\.placed`), r.stdout)

	wait, _ = startTail(t, h, "--queue", "orders", "--count", "2", "--ack", "-o", "json")
	r = wait()
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	d, err := c.GetConsumer(t.Context(), "orders")
	require.NoError(t, err)
	assert.Zero(t, d.InFlight, "--ack settled both")
	require.NotNil(t, d.Committed)

	r = herald(t, h, "queues", "update", "orders", "--type", "shop.order.cancelled")
	require.Equal(t, 0, r.code, r.stderr)
	d, err = c.GetConsumer(t.Context(), "orders")
	require.NoError(t, err)
	assert.Equal(t, "shop.order.cancelled", d.FilterGroups[0].EventType)
	require.Equal(t, 0, herald(t, h, "queues", "delete", "orders").code)
	assert.Equal(t, 3, herald(t, h, "queues", "delete", "orders").code)
	assert.Equal(t, 3, herald(t, h, "tail", "--queue", "orders").code)
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	h := local.Start(t, func(c *local.Config) { c.DeliveryLimit = 1 })
	c := clientOf(t, h)
	ctx := t.Context()
	d, err := c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	const n = 3
	for i := range n {
		e, err := client.NewEvent("poison.pill", fmt.Sprintf("/p/%d", i), nil)
		require.NoError(t, err)
		_, err = c.Publish(ctx, e)
		require.NoError(t, err)
	}
	// Fail the batch once; its redelivery would pass the limit of 1.
	l, err := c.Pull(ctx, d.ID, client.PullOptions{Limit: n, WorkerID: "w"})
	require.NoError(t, err)
	require.Len(t, l.Events, n)
	_, err = c.Acknowledge(ctx, d.ID, l, client.AckFailed)
	require.NoError(t, err)
	l, err = c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w"})
	require.NoError(t, err)
	require.Nil(t, l)

	page := jsonOf[client.DeadLetterPage](t, herald(t, h, "dlq", "list", "-o", "json"))
	require.Len(t, page.DeadLetters, n)
	assert.Equal(t, d.ID, page.DeadLetters[0].OriginQueue)
	r := herald(t, h, "dlq", "list")
	require.Equal(t, 0, r.code)
	assert.Equal(t, n+1, strings.Count(r.stdout, "\n"), "a header and a row each:\n%s", r.stdout)

	// Discard one by id, replay the rest with --all.
	r = herald(t, h, "dlq", "discard", page.DeadLetters[0].ID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `DISCARDED\s+1`, r.stdout)

	type outcomes struct {
		Asked  int            `json:"asked"`
		Counts map[string]int `json:"counts"`
	}
	o := jsonOf[outcomes](t, herald(t, h, "dlq", "replay", "--all", "-o", "json"))
	assert.Equal(t, n-1, o.Asked)
	assert.Equal(t, map[string]int{"REPLAYED": n - 1}, o.Counts)
	back := 0 // each replay is a lease of its own
	for {
		l, err := c.Pull(ctx, d.ID, client.PullOptions{Limit: n, WorkerID: "w2"})
		require.NoError(t, err)
		if l == nil {
			break
		}
		back += len(l.Events)
		_, err = c.Acknowledge(ctx, d.ID, l, client.AckOK)
		require.NoError(t, err)
	}
	assert.Equal(t, n-1, back, "the replayed events are back on their consumer")

	// An id that is not there: the outcome says so, and the exit code is 1.
	r = herald(t, h, "dlq", "replay", "no-such-dead-letter")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Regexp(t, `REPLAY_FAILED\s+1`, r.stdout)
	assert.Contains(t, r.stdout, "no-such-dead-letter: REPLAY_FAILED: no dead letter has this id")

	// Discarding it: it is gone either way (DISCARDED, exit 0), and the
	// server's detail that it was not there is shown.
	r = herald(t, h, "dlq", "discard", "no-such-dead-letter")
	assert.Equal(t, 0, r.code, r.stdout)
	assert.Regexp(t, `DISCARDED\s+1`, r.stdout)
	assert.Contains(t, r.stdout, "no-such-dead-letter: DISCARDED: it was not in the dead-letter queue")
}

// TestServe runs `herald serve` as make run does and talks to it.
func TestServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = env("HERALD_DEV_TOKEN=serve-test-token-0123456789")
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()
	sc := bufio.NewScanner(errPipe)
	addr := ""
	for addr == "" && sc.Scan() {
		if m := regexp.MustCompile(`addr=(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	require.NotEmpty(t, addr, "serve logged no address")
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()

	c := exec.CommandContext(ctx, bin, "publish", "--type", "served.ok")
	c.Env = env("HERALD_URL="+addr, "HERALD_DEV_TOKEN=serve-test-token-0123456789")
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "published served.ok")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "serve stops cleanly on SIGTERM")
}

// TestServeAddressInUse: `herald serve` on an address another process
// holds (make run with a Herald already on 8080) says it cannot listen
// there and how to pick another address, exit 1; not "cannot reach
// Herald … Start one with 'herald serve'" and exit 5, which is for
// commands that talk to a deployment.
func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", ln.Addr().String())
	cmd.Env = env()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 1, exit.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "herald: cannot listen on "+ln.Addr().String()+": bind: address already in use\n")
	assert.Contains(t, string(out), "Serve on another address with --addr or HERALD_ADDR")
	assert.NotContains(t, string(out), "cannot reach Herald")
	assert.NotContains(t, string(out), "Is Herald running")
	assert.NotContains(t, string(out), "level=WARN", "a server stopped before it served has nothing to warn about (the stream hub's setup, cut short)")
}

// TestServeDefaultTokenOnAnyLoopbackPort: `herald serve` on a free port
// with its default token, and commands given only HERALD_URL (by IP and by
// localhost) use that token rather than none.
func TestServeDefaultTokenOnAnyLoopbackPort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = env()
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()
	sc := bufio.NewScanner(errPipe)
	port := ""
	for port == "" && sc.Scan() {
		if m := regexp.MustCompile(`addr=http://127\.0\.0\.1:(\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	require.NotEmpty(t, port, "serve logged no address")
	require.NotEqual(t, "8080", port)
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()

	for _, u := range []string{"http://127.0.0.1:" + port, "http://localhost:" + port + "/"} {
		c := exec.CommandContext(ctx, bin, "publish", "--type", "served.default")
		c.Env = env("HERALD_URL=" + u)
		out, err := c.CombinedOutput()
		require.NoError(t, err, "HERALD_URL=%s: %s", u, out)
		assert.Contains(t, string(out), "published served.default")
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "serve stops cleanly on SIGTERM")
}

// TestServeOffLoopback: `herald serve --addr` beyond loopback has no
// built-in development token, so with no other token it refuses to start
// and says how to set one; with HERALD_TOKENS it starts, and the built-in
// token is refused there.
func TestServeOffLoopback(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	refused := exec.CommandContext(ctx, bin, "serve", "--addr", "0.0.0.0:0")
	refused.Env = env()
	out, err := refused.CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "HERALD_DEV_TOKEN")
	assert.Contains(t, string(out), "not a loopback address")

	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "0.0.0.0:0")
	cmd.Env = env(`HERALD_TOKENS={"svc-token-0123456789": {"id": "svc", "permissions": ["publish:*"]}}`)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()
	sc := bufio.NewScanner(errPipe)
	port := ""
	for port == "" && sc.Scan() {
		if m := regexp.MustCompile(`addr=http://[^ ]*:(\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	require.NotEmpty(t, port, "serve logged no address")
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()
	for token, want := range map[string]string{"svc-token-0123456789": "published served.off", "dev-token": "401"} {
		c := exec.CommandContext(ctx, bin, "publish", "--type", "served.off")
		c.Env = env("HERALD_URL=http://127.0.0.1:"+port, "HERALD_TOKEN="+token)
		out, _ := c.CombinedOutput()
		assert.Contains(t, string(out), want, "token %s", token)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "serve stops cleanly on SIGTERM")
}

// TestProgressBarOnATerminal runs `dlq replay --all` and `publish --file`
// with standard error on a pseudo-terminal: both draw a progress bar
// there (and only there: the other tests' pipes get none).
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	h := local.Start(t, func(c *local.Config) { c.DeliveryLimit = 1 })
	c := clientOf(t, h)
	ctx := t.Context()
	d, err := c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	for i := range 2 {
		e, err := client.NewEvent("poison.pill", fmt.Sprintf("/p/%d", i), nil)
		require.NoError(t, err)
		_, err = c.Publish(ctx, e)
		require.NoError(t, err)
	}
	l, err := c.Pull(ctx, d.ID, client.PullOptions{Limit: 2, WorkerID: "w"})
	require.NoError(t, err)
	_, err = c.Acknowledge(ctx, d.ID, l, client.AckFailed)
	require.NoError(t, err)
	_, err = c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w"})
	require.NoError(t, err)

	onTerminal := func(args ...string) (stdout, terminal string) {
		ptmx, tty, err := pty.Open()
		require.NoError(t, err)
		defer ptmx.Close()
		rctx, cancel := context.WithTimeout(ctx, runTimeout)
		defer cancel()
		cmd := exec.CommandContext(rctx, bin, args...)
		cmd.Env = env("HERALD_URL="+h.URL, "HERALD_TOKEN="+h.Token)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, tty
		read := make(chan string, 1)
		go func() { b, _ := io.ReadAll(ptmx); read <- string(b) }()
		require.NoError(t, cmd.Run())
		_ = tty.Close()
		// Linux reports EIO once the last tty end is closed: ReadAll ends.
		return out.String(), <-read
	}
	out, term := onTerminal("dlq", "replay", "--all")
	assert.Regexp(t, `REPLAYED\s+2`, out)
	assert.Contains(t, term, "replay")
	assert.Contains(t, term, "2/2")

	file := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"event_type":"a.b"}`+"\n"+`{"event_type":"a.c"}`+"\n"), 0o600))
	out, term = onTerminal("publish", "--file", file)
	assert.Equal(t, "published 2, failed 0\n", out)
	assert.Contains(t, term, "publishing")
	assert.Contains(t, term, "2/2")
}
