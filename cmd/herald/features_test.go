package main_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

// freeAddr is a 127.0.0.1 address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// noDoublePrefix checks the error wording: one "herald: " and none of
// the client's own prefixes.
func noDoublePrefix(t *testing.T, stderr string) {
	t.Helper()
	assert.NotContains(t, stderr, "herald client:")
	assert.NotContains(t, stderr, "herald: herald")
}

func TestContexts(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	cfg := t.TempDir()
	ctxEnv := []string{"XDG_CONFIG_HOME=" + cfg}
	run := func(stdin io.Reader, args ...string) result {
		t.Helper()
		return heraldEnv(t, ctxEnv, stdin, args...)
	}
	// A context whose token comes from standard input, kept out of the
	// shell's history.
	r := run(strings.NewReader(h.Token+"\n"), "context", "add", "local", "--url", h.URL, "--token-stdin", "--description", "in-process")
	require.Equal(t, 0, r.code, r.stderr)
	far := "http://" + freeAddr(t)
	const farToken = "far-away-secret-token-0123456789"
	require.Equal(t, 0, run(nil, "context", "add", "far", "--url", far, "--token", farToken).code)
	assert.Equal(t, 2, run(nil, "context", "add", "far", "--url", far).code, "an existing name needs --force")

	// The file is the user's alone and holds the tokens.
	st, err := os.Stat(filepath.Join(cfg, "herald", "contexts.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// No context in use yet: the default URL.
	r = run(nil, "context", "show", "-o", "json")
	show := jsonOf[map[string]string](t, r)
	assert.Equal(t, "http://127.0.0.1:8080", show["url"])

	// --context selects one; its token goes with its URL.
	r = run(nil, "--context", "local", "publish", "--type", "ctx.selected")
	require.Equal(t, 0, r.code, r.stderr)
	r = heraldEnv(t, append(ctxEnv, "HERALD_CONTEXT=local"), nil, "consumers", "list", "-o", "json")
	require.Equal(t, 0, r.code, "HERALD_CONTEXT selects one too: %s", r.stderr)

	// use makes it current; ls marks it and masks every token.
	require.Equal(t, 0, run(nil, "context", "use", "local").code)
	r = run(nil, "context", "ls")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `\*\s+local\s+`+h.URL, r.stdout)
	assert.Contains(t, r.stdout, "****6789")
	for _, out := range []string{r.stdout, run(nil, "context", "ls", "-o", "json").stdout, run(nil, "context", "show", "far", "-o", "yaml").stdout,
		run(nil, "context", "show").stdout, run(nil, "--context", "far", "context", "show", "-o", "json").stdout} {
		assert.NotContains(t, out, farToken)
		assert.NotContains(t, out, h.Token)
	}
	show = jsonOf[map[string]string](t, run(nil, "context", "show", "-o", "json"))
	assert.Equal(t, map[string]string{"context": "local", "context_source": "herald context use", "url": h.URL, "url_source": `context "local"`,
		"token": "****", "token_source": `context "local"`, "contexts_file": filepath.Join(cfg, "herald", "contexts.json")}, show)
	r = run(nil, "consumers", "list")
	require.Equal(t, 0, r.code, "the current context: %s", r.stderr)

	// --url wins over the context, and the context's token is not sent to
	// another URL.
	show = jsonOf[map[string]string](t, run(nil, "--url", far, "context", "show", "-o", "json"))
	assert.Equal(t, far, show["url"])
	assert.NotEqual(t, `context "local"`, show["token_source"])
	r = run(nil, "--context", "far", "consumers", "list")
	assert.Equal(t, 5, r.code, "far is nowhere: %s", r.stderr)
	assert.Contains(t, r.stderr, "cannot reach Herald at "+far)
	assert.NotContains(t, r.stderr, farToken)

	// rm of the current one leaves none current.
	require.Equal(t, 0, run(nil, "context", "rm", "local").code)
	show = jsonOf[map[string]string](t, run(nil, "context", "show", "-o", "json"))
	assert.Equal(t, "", show["context"])
	r = run(nil, "--context", "local", "consumers", "list")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `context "local" does not exist`)
	names := jsonOf[[]map[string]any](t, run(nil, "context", "ls", "-o", "json"))
	require.Len(t, names, 1)
	assert.Equal(t, "far", names[0]["name"])
}

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	d := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--type", "fmt.a", "-o", "json"))

	r := herald(t, h, "consumers", "get", d.ID, "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "id: "+d.ID+"\n")
	assert.Contains(t, r.stdout, "  - event_type: fmt.a\n")

	r = herald(t, h, "consumers", "get", d.ID, "-o", "template={{.id}} {{.type}} {{(index .filter_groups 0).event_type}}")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, d.ID+" DURABLE_CONSUMER fmt.a\n", r.stdout)
	r = herald(t, h, "consumers", "list", "--template", `{{range .}}{{.id}}{{"\n"}}{{end}}`)
	assert.Equal(t, d.ID+"\n", r.stdout)

	r = herald(t, h, "consumers", "list", "--jq", ".[].id")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, d.ID+"\n", r.stdout, "a string is printed raw")
	r = herald(t, h, "consumers", "get", d.ID, "-o", "jq={paused, in_flight}")
	assert.Equal(t, `{"in_flight":0,"paused":false}`+"\n", r.stdout)

	// A jq error at run time: exit 1, the reason, nothing half-written.
	r = herald(t, h, "consumers", "get", d.ID, "--jq", `error("no such field")`)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "", r.stdout)
	assert.Contains(t, r.stderr, "no such field")

	// A stream: one item each.
	c := clientOf(t, h)
	wait, _ := startTail(t, h, "--type", "fmt.b", "--count", "2", "--jq", ".message.n")
	for i := range 2 {
		e, err := client.NewEvent("fmt.b", "", map[string]int{"n": i})
		require.NoError(t, err)
		_, err = c.Publish(t.Context(), e)
		require.NoError(t, err)
	}
	r = wait()
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "0\n1\n", r.stdout)
}

func TestConsumerPolicies(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	d := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--type", "pol.a",
		"--retry-min-backoff", "1", "--retry-max-backoff", "30", "--max-delivery-attempts", "3", "-o", "json"))
	require.NotNil(t, d.RetryPolicy)
	assert.Equal(t, client.ConsumerRetryPolicy{MinimumBackoff: time.Second, MaximumBackoff: 30 * time.Second}, *d.RetryPolicy)
	require.NotNil(t, d.DeadLetterPolicy)
	assert.Equal(t, 3, d.DeadLetterPolicy.MaxDeliveryAttempts)
	r := herald(t, h, "consumers", "get", d.ID)
	assert.Contains(t, r.stdout, "retry 1-30s,dlq after 3")

	// One backoff alone takes Herald's default for the other.
	one := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--retry-max-backoff", "60", "-o", "json"))
	require.NotNil(t, one.RetryPolicy)
	assert.Equal(t, 10*time.Second, one.RetryPolicy.MinimumBackoff)
	assert.Nil(t, one.DeadLetterPolicy)

	got := jsonOf[client.Destination](t, herald(t, h, "consumers", "update", d.ID, "--max-delivery-attempts", "7", "-o", "json"))
	assert.Equal(t, 7, got.DeadLetterPolicy.MaxDeliveryAttempts)
	require.NotNil(t, got.RetryPolicy, "a policy not named stays")
	got = jsonOf[client.Destination](t, herald(t, h, "consumers", "update", d.ID, "--no-retry-policy", "-o", "json"))
	assert.Nil(t, got.RetryPolicy)
	assert.NotNil(t, got.DeadLetterPolicy)
	got = jsonOf[client.Destination](t, herald(t, h, "consumers", "update", d.ID, "--no-dead-letter-policy", "-o", "json"))
	assert.Nil(t, got.DeadLetterPolicy)
	// Checked by Herald too: a value out of its range is a 4xx, exit 1.
	r = herald(t, h, "consumers", "update", "no-such-consumer", "--max-delivery-attempts", "2")
	assert.Equal(t, 3, r.code, r.stderr)
}

func TestPullSettles(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	c := clientOf(t, h)
	d, err := c.CreateConsumer(t.Context(), nil)
	require.NoError(t, err)
	publish := func(typ string) {
		e, err := client.NewEvent(typ, "", nil)
		require.NoError(t, err)
		_, err = c.Publish(t.Context(), e)
		require.NoError(t, err)
	}
	publish("pull.one")

	type pulled struct {
		LeaseID      string               `json:"leaseId"`
		Generation   int64                `json:"generation"`
		Attempt      int64                `json:"attempt"`
		ExpiresAt    time.Time            `json:"expiresAt"`
		Acknowledged *client.AckResult    `json:"acknowledged"`
		Extended     *client.ExtendResult `json:"extended"`
	}
	// --extend: the same worker gets its lease back, kept longer.
	p := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--worker", "w1", "--visibility", "5", "-o", "json"))
	e := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--worker", "w1", "--extend", "600", "-o", "json"))
	assert.Equal(t, p.LeaseID, e.LeaseID)
	require.NotNil(t, e.Extended)
	assert.Equal(t, client.OutcomeExtended, e.Extended.Outcome)
	assert.True(t, e.Extended.ExpiresAt.After(p.ExpiresAt), "%v after %v", e.Extended.ExpiresAt, p.ExpiresAt)

	// --fail --retry-after: requeued, and not handed out before it passes.
	f := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--worker", "w1", "--fail", "--retry-after", "3600", "-o", "json"))
	require.NotNil(t, f.Acknowledged)
	assert.Equal(t, client.OutcomeRequeued, f.Acknowledged.Outcome)
	r := herald(t, h, "pull", "--consumer", d.ID, "--worker", "w2", "-o", "json")
	assert.JSONEq(t, `{"caught_up": true}`, r.stdout, "the failed lease waits its hour")

	// --reject: straight to the dead-letter queue, reason REJECTED.
	publish("pull.two")
	rj := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--worker", "w3", "--reject", "-o", "json"))
	require.NotNil(t, rj.Acknowledged)
	assert.Equal(t, client.OutcomeDeadLettered, rj.Acknowledged.Outcome)
	page := jsonOf[client.DeadLetterPage](t, herald(t, h, "dlq", "list", "-o", "json"))
	require.Len(t, page.DeadLetters, 1)
	assert.Equal(t, "REJECTED", page.DeadLetters[0].Reason)
	assert.Equal(t, "pull.two", page.DeadLetters[0].Event.Type)

	// --wait: a pull that starts caught up gets the event published while
	// it waits.
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "pull", "--consumer", d.ID, "--worker", "w4", "--wait", "50s", "--ack", "-o", "jq=.events[].type")
	cmd.Env = env("HERALD_URL="+h.URL, "HERALD_TOKEN="+h.Token)
	var out bytes.Buffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	publish("pull.three")
	require.NoError(t, cmd.Wait())
	assert.Equal(t, "pull.three\n", out.String())
	// A caught-up --wait ends when its wait does.
	r = herald(t, h, "pull", "--consumer", d.ID, "--wait", "200ms")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stderr, "caught up")
}

func TestQueuesList(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	require.Equal(t, 0, herald(t, h, "queues", "ensure", "orders", "--type", "shop.order.placed").code)
	_ = jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "-o", "json")) // not a queue
	qs := jsonOf[[]client.Destination](t, herald(t, h, "queues", "list", "-o", "json"))
	require.Len(t, qs, 1)
	assert.Equal(t, "orders", qs[0].ID)
	assert.Equal(t, "DURABLE_QUEUE", qs[0].Type)
	r := herald(t, h, "queues", "list")
	assert.Regexp(t, `(?m)^orders\s+DURABLE_QUEUE\s+0\s+`, r.stdout)

	// --all adds the non-durable ones, such as a tail's.
	wait, _ := startTail(t, h, "--type", "q.x", "--count", "1")
	all := jsonOf[[]client.Destination](t, herald(t, h, "queues", "list", "--all", "-o", "json"))
	types := map[string]int{}
	for _, q := range all {
		types[q.Type]++
	}
	assert.Equal(t, map[string]int{"DURABLE_QUEUE": 1, "NON_DURABLE_QUEUE": 1}, types)
	c := clientOf(t, h)
	e, err := client.NewEvent("q.x", "", nil)
	require.NoError(t, err)
	_, err = c.Publish(t.Context(), e)
	require.NoError(t, err)
	require.Equal(t, 0, wait().code)
}

func TestConnectionFailure(t *testing.T) {
	t.Parallel()
	url := "http://" + freeAddr(t)
	for _, args := range [][]string{
		{"tail", "--type", "a"},
		{"tail", "--queue", "q"},
		{"consumers", "list"},
		{"pull", "--consumer", "c", "--wait", "1m"},
		{"publish", "--type", "a"},
	} {
		r := herald(t, nil, append([]string{"--url", url}, args...)...)
		assert.Equal(t, 5, r.code, "%v: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "herald: cannot reach Herald at "+url+": connect: connection refused\n", args)
		assert.Contains(t, r.stderr, "Is Herald running at "+url+"?", args)
		noDoublePrefix(t, r.stderr)
	}
	r := herald(t, nil, "--url", "http://no-such-host.invalid", "consumers", "list")
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Contains(t, r.stderr, "herald: cannot reach Herald at http://no-such-host.invalid: lookup no-such-host.invalid")
}

// proxy forwards 127.0.0.1 connections to target until stop, which closes
// the listener and every connection: Herald vanishes for its clients.
type proxy struct {
	addr  string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{addr: ln.Addr().String(), ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func TestTailGivesUpWhenHeraldGoes(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	p := startProxy(t, strings.TrimPrefix(h.URL, "http://"))
	url := "http://" + p.addr
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--url", url, "--connect-timeout", "1s", "tail", "--type", "gone.a")
	cmd.Env = env("HERALD_TOKEN=" + h.Token)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	rd := bufio.NewReader(errPipe)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, first, "reconnect token:", "the stream is open")
	p.stop()
	rest, _ := io.ReadAll(rd)
	err = cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "tail ends by itself: %v\n%s", err, rest)
	assert.Equal(t, 5, ee.ExitCode(), "%s", rest)
	assert.Contains(t, string(rest), "herald: stream interrupted")
	assert.Contains(t, string(rest), "herald: cannot reach Herald at "+url+" (connect: connection refused); retrying for up to 1s")
	assert.Regexp(t, `herald: cannot reach Herald at `+url+`: connect: connection refused \(gave up after \d+s\)`, string(rest))
	noDoublePrefix(t, string(rest))
}

func TestErrorWording(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	for _, args := range [][]string{
		{"consumers", "get", "no-such-consumer"},
		{"pull", "--consumer", "no-such-consumer"},
		{"queues", "delete", "no-such-queue"},
		{"--token", "wrong", "consumers", "list"},
		{"consumers", "update", "x", "--max-delivery-attempts", "1"},
	} {
		r := herald(t, h, args...)
		assert.NotEqual(t, 0, r.code, args)
		assert.True(t, strings.HasPrefix(r.stderr, "herald: "), "%v: %s", args, r.stderr)
		noDoublePrefix(t, r.stderr)
	}
}

func TestDLQHelp(t *testing.T) {
	t.Parallel()
	r := herald(t, nil, "dlq", "replay", "--help")
	require.Equal(t, 0, r.code)
	assert.NotContains(t, r.stdout, "for discard", "replay's help speaks of replay")
	assert.Contains(t, r.stdout, "REPLAY_FAILED")
	r = herald(t, nil, "dlq", "discard", "--help")
	assert.Contains(t, r.stdout, "counts as\nDISCARDED")
	for _, sub := range []string{"replay", "discard"} {
		r := herald(t, nil, "dlq", sub, "--help")
		long, _, _ := strings.Cut(r.stdout, "Usage:")
		for _, line := range strings.Split(long, "\n") {
			assert.LessOrEqual(t, len(line), 100, "%s --help wraps its lines: %q", sub, line)
		}
	}
}
