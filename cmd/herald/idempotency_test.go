package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

// TestPublishIdempotencyKey: two invocations with one --idempotency-key
// publish one event; another event under the key fails.
func TestPublishIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	d := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--type", "myapp.user.created", "-o", "json"))
	for range 2 {
		r := herald(t, h, "publish", "--type", "myapp.user.created", "--data", `{"user_id":"7"}`, "--idempotency-key", "user-7-created")
		require.Equal(t, 0, r.code, r.stderr)
	}
	r := herald(t, h, "publish", "--type", "myapp.user.created", "--data", `{"user_id":"8"}`, "--idempotency-key", "user-7-created")
	require.NotEqual(t, 0, r.code, "another event under the key: %s", r.stdout)

	type pulled struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	p := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--limit", "10", "--ack", "-o", "json"))
	require.Len(t, p.Events, 1, "one event for the two invocations")
}

// TestPublishFileEventKeys: lines of a --file with an idempotency_key of
// their own publish once however often the file is sent; a key twice in
// the file, or one outside the rules, fails its line alone.
func TestPublishFileEventKeys(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	d := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--type", "bulk.keyed", "-o", "json"))
	lines := []string{
		`{"event_type":"bulk.keyed","message":{"i":1},"idempotency_key":"line-1"}`,
		`{"event_type":"bulk.keyed","message":{"i":2},"idempotency_key":"line-2"}`,
		`{"event_type":"bulk.keyed","message":{"i":3}}`,
		`{"event_type":"bulk.keyed","message":{"i":4},"idempotency_key":"line-1"}`,
		`{"event_type":"bulk.keyed","message":{"i":5},"idempotency_key":"tab\tkey"}`,
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	type summary struct {
		Published int `json:"published"`
		Failed    int `json:"failed"`
		Failures  []struct {
			Line   int    `json:"line"`
			Reason string `json:"failure_reason"`
		} `json:"failures"`
	}
	for range 2 {
		r := herald(t, h, "publish", "--file", file, "-o", "json")
		require.Equal(t, 1, r.code, "two lines fail: %s", r.stderr)
		s := jsonOf[summary](t, r)
		require.Equal(t, 3, s.Published, "a replay counts as published")
		require.Equal(t, 2, s.Failed)
		require.Equal(t, 4, s.Failures[0].Line)
		require.Contains(t, s.Failures[0].Reason, "also on line 1")
		require.Equal(t, 5, s.Failures[1].Line)
		require.Contains(t, s.Failures[1].Reason, "printable ASCII")
	}
	r := herald(t, h, "publish", "--file", file, "--idempotency-key", "whole-file")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "idempotency_key each")
	type pulled struct {
		Events []struct {
			Data map[string]int `json:"data"`
		} `json:"events"`
	}
	p := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--limit", "10", "--ack", "-o", "json"))
	var got []int
	for _, e := range p.Events {
		got = append(got, e.Data["i"])
	}
	require.ElementsMatch(t, []int{1, 2, 3, 3}, got, "the keyed lines once, the unkeyed line each time")
}
