package local_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/local"
)

// TestReadinessFollowsRabbitMQ: with RabbitMQ unreachable (an address
// that accepts TCP and never answers), GET /health/ready answers 503
// naming the broker, and nothing of its URL; once the address forwards to
// the real RabbitMQ it answers 200; when the connection is cut again, 503.
// GET /health answers 200 throughout.
func TestReadinessFollowsRabbitMQ(t *testing.T) {
	t.Parallel()
	server := emulators.RabbitMQ(t)
	target := strings.TrimSuffix(strings.TrimPrefix(server, "amqp://guest:guest@"), "/")
	hole := blackhole.Start(t)
	h := local.Start(t, func(c *local.Config) {
		c.TopicURL = "rabbit://herald-ready-" + strings.ReplaceAll(t.Name(), "/", "-") +
			"?url=" + url.QueryEscape("amqp://guest:guest@"+hole.Addr()+"/")
		c.ReapInterval = config.MaxReapInterval
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	hc := &http.Client{Timeout: time.Minute}
	ready := func() (int, map[string]any, string) {
		res, err := hc.Get(h.URL + "/health/ready")
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.Unmarshal(b, &body), string(b))
		return res.StatusCode, body, string(b)
	}
	// until polls readiness until it answers want: the answer is cached
	// for a second, and a reconnect takes a moment.
	until := func(want int) map[string]any {
		var body map[string]any
		require.Eventually(t, func() bool {
			var status int
			status, body, _ = ready()
			return status == want
		}, 2*time.Minute, 100*time.Millisecond, "readiness never answered %d", want)
		return body
	}

	status, body, raw := ready()
	require.Equal(t, http.StatusServiceUnavailable, status, raw)
	require.Equal(t, []any{"broker"}, body["failed"])
	require.Equal(t, map[string]any{"broker": "unavailable", "store": "ok"}, body["checks"])
	for _, leak := range []string{"guest", "amqp", hole.Addr(), "127.0.0.1"} {
		require.NotContains(t, raw, leak)
	}
	res, err := hc.Get(h.URL + "/health")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode, "liveness does not depend on the broker")

	hole.Forward(target) // RabbitMQ is back
	body = until(http.StatusOK)
	require.Equal(t, map[string]any{"broker": "ok", "store": "ok"}, body["checks"])

	hole.Forward("") // and gone again
	hole.Drop()
	body = until(http.StatusServiceUnavailable)
	require.Equal(t, []any{"broker"}, body["failed"])
}
