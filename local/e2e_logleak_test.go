package local_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// TestNoCredentialInLogsWhenStoreFails is the case: a 5xx on
// /v1/event-destinations/{id} for a non-durable queue, whose id is its
// reconnect token, and on a stream reconnecting with that token. The
// lease store (PostgreSQL, through a proxy the test controls) refuses
// every connection; each call answers 5xx, each 5xx is logged once with
// its route pattern, and no line anywhere — the instance's logger (checked
// by local.Start as well) or slog.Default (checked by this package's
// TestMain) — holds the token or the bearer token.
func TestNoCredentialInLogsWhenStoreFails(t *testing.T) {
	t.Parallel()
	db := emulators.PostgreSQL(t)
	hole := blackhole.Start(t)
	hole.Forward(emulators.PostgreSQLAddr)
	logs := &testkit.SyncBuffer{}
	const bearer = "leak-test-token-0123456789"
	h := local.Start(t, func(c *local.Config) {
		c.StoreURL = strings.Replace(db, emulators.PostgreSQLAddr, hole.Addr(), 1) + "?table=herald"
		c.ReapInterval = config.MaxReapInterval
		c.DevToken = bearer
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		// Every reconnect reads the store (the stream hub would resume a
		// queue from its memory without it).
		c.ProcessHeartbeat = 0
	})
	c := &client{base: h.URL, token: h.Token, hc: &http.Client{Timeout: time.Minute}}
	s := c.mustStream(t, streamPath("filter_groups", `[{"event_type":"leak.x"}]`), nil)
	token := s.connected(t)
	s.close()
	<-s.done

	hole.Forward("127.0.0.1:1") // nothing listens there: every new connection is refused
	hole.Drop()
	for _, call := range []struct{ method, path string }{
		{"GET", "/v1/event-destinations/" + token},
		{"DELETE", "/v1/event-destinations/" + token},
		{"POST", "/v1/event-destinations/" + token + "/pause"},
	} {
		r, err := c.raw(call.method, call.path, c.token, nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, r.Status, 500, "%s %s with the store down: %s", call.method, call.path, r.Body)
		require.NotContains(t, string(r.Body), token)
	}
	conn, r := c.openStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
	require.Nil(t, conn)
	require.GreaterOrEqual(t, r.Status, 500, "%s", r.Body)

	failed := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		line := sc.Text()
		require.NotContains(t, line, token, "a log line holds the reconnect token")
		require.NotContains(t, line, bearer, "a log line holds the bearer token")
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		require.NotContains(t, rec, "path", "log lines name routes, not paths: %s", line)
		if rec["msg"] == "request failed" {
			failed[rec["method"].(string)+" "+rec["route"].(string)]++
		}
	}
	require.Equal(t, map[string]int{
		"GET /v1/event-destinations/{id}":        1,
		"DELETE /v1/event-destinations/{id}":     1,
		"POST /v1/event-destinations/{id}/pause": 1,
		"GET /api/v1beta/events/stream":          1,
	}, failed, "every 5xx is logged with its route pattern, through the instance's logger")
}
