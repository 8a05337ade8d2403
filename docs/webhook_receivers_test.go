package docs_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/whsign"
)

// receiverCase is one delivery a receiver snippet is asked about.
type receiverCase struct {
	Name    string            `json:"name"`
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"` // lower-case names
	Body    string            `json:"body"`    // base64
	Now     int64             `json:"now"`     // Unix seconds
	Want    bool              `json:"want"`
}

// receiverCases are deliveries Herald's signer (package whsign, what the
// push uses) made: plain, during a rotation (checked under either
// secret), and spoiled ways a receiver must refuse.
func receiverCases(t *testing.T) []receiverCase {
	t.Helper()
	oldS, newS, other := whsign.NewSecret(), whsign.NewSecret(), whsign.NewSecret()
	now := time.Now().Truncate(time.Second)
	body := []byte(`{"specversion":"1.0","id":"evt-1","type":"orders.created","data":{"n":1}}`)
	sign := func(id string, at time.Time, b []byte, secrets ...whsign.Secret) map[string]string {
		h := http.Header{}
		whsign.Set(h, id, at, b, secrets...)
		out := map[string]string{}
		for k := range h {
			out[strings.ToLower(k)] = h.Get(k)
		}
		return out
	}
	mk := func(name string, secret whsign.Secret, h map[string]string, b []byte, want bool) receiverCase {
		return receiverCase{Name: name, Secret: secret.Reveal(), Headers: h, Body: base64.StdEncoding.EncodeToString(b), Now: now.Unix(), Want: want}
	}
	plain := sign("evt-1", now, body, oldS)
	rotated := sign("evt-1", now, body, newS, oldS)
	spoiledID := sign("evt-1", now, body, oldS)
	spoiledID["webhook-id"] = "evt-2"
	noSig := sign("evt-1", now, body, oldS)
	delete(noSig, "webhook-signature")
	cases := []receiverCase{
		mk("plain", oldS, plain, body, true),
		mk("rotation, old secret", oldS, rotated, body, true),
		mk("rotation, new secret", newS, rotated, body, true),
		mk("body changed", oldS, plain, append(bytes.Clone(body[:len(body)-2]), []byte(`2}}`)...), false),
		mk("wrong secret", other, plain, body, false),
		mk("id changed", oldS, spoiledID, body, false),
		mk("no signature", oldS, noSig, body, false),
		mk("ten minutes old", oldS, sign("evt-1", now.Add(-10*time.Minute), body, oldS), body, false),
		mk("four minutes old", oldS, sign("evt-1", now.Add(-4*time.Minute), body, oldS), body, true),
	}
	// The cases are right by an implementation that is not ours.
	for _, c := range cases {
		wh, err := standardwebhooks.NewWebhook(c.Secret)
		require.NoError(t, err)
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		b, _ := base64.StdEncoding.DecodeString(c.Body)
		if c.Name != "ten minutes old" && c.Name != "four minutes old" {
			require.Equal(t, c.Want, wh.Verify(b, h) == nil, "the reference library on %q", c.Name)
		}
	}
	return cases
}

// snippet returns the one block of docs/webhooks.md fenced with info.
func snippet(t *testing.T, info string) string {
	t.Helper()
	b, err := os.ReadFile("webhooks.md")
	require.NoError(t, err)
	var out []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```"+info:
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	require.Len(t, out, 1, "docs/webhooks.md has one ```%s block", info)
	return out[0]
}

// runSnippet runs prog (written to dir/name) with cmd, the cases as JSON
// on its standard input, and checks its answers, one JSON bool a line.
func runSnippet(t *testing.T, cases []receiverCase, dir string, cmd ...string) {
	t.Helper()
	in, err := json.Marshal(cases)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir = dir
	c.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	require.NoError(t, c.Run(), "%v: %s", cmd, errb.String())
	got := strings.Fields(out.String())
	require.Len(t, got, len(cases), "one answer per case: %q", out.String())
	for i, tc := range cases {
		require.Equal(t, map[bool]string{true: "true", false: "false"}[tc.Want], got[i], "case %q", tc.Name)
	}
}

func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	require.NoError(t, err, "the receiver snippets' test runs %s (the CI machine has it)", tool)
	return p
}

// TestWebhookReceiverGo compiles the Go snippet into a program and runs
// it on the cases.
func TestWebhookReceiverGo(t *testing.T) {
	t.Parallel()
	cases := receiverCases(t)
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"crypto/hmac\"\n\t\"crypto/sha256\"\n\t\"encoding/base64\"\n\t\"errors\"\n\t\"net/http\"\n\t\"strconv\"\n\t\"strings\"\n\t\"time\"\n)\n\n" +
		snippet(t, "go verify")
	harness := `package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	var cases []struct {
		Secret  string
		Headers map[string]string
		Body    string
		Now     int64
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		b, _ := base64.StdEncoding.DecodeString(c.Body)
		fmt.Println(verifyWebhook(c.Secret, h, b, time.Unix(c.Now, 0)) == nil)
	}
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "verify.go"), []byte(src), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(harness), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module receiver\n\ngo 1.22\n"), 0o600))
	runSnippet(t, cases, dir, need(t, "go"), "run", ".")
}

// TestWebhookReceiverNode runs the Node snippet on the cases.
func TestWebhookReceiverNode(t *testing.T) {
	t.Parallel()
	cases := receiverCases(t)
	dir := t.TempDir()
	src := snippet(t, "js verify") + `
const cases = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
for (const c of cases) {
  console.log(verifyWebhook(c.secret, c.headers, Buffer.from(c.body, 'base64'), c.now * 1000));
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "verify.js"), []byte(src), 0o600))
	runSnippet(t, cases, dir, need(t, "node"), "verify.js")
}

// TestWebhookReceiverPython runs the Python snippet on the cases.
func TestWebhookReceiverPython(t *testing.T) {
	t.Parallel()
	cases := receiverCases(t)
	dir := t.TempDir()
	src := snippet(t, "python verify") + `

import json
import sys

for c in json.load(sys.stdin):
    print("true" if verify_webhook(c["secret"], c["headers"], base64.b64decode(c["body"]), c["now"]) else "false")
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "verify.py"), []byte(src), 0o600))
	runSnippet(t, cases, dir, need(t, "python3"), "verify.py")
}
