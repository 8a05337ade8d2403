package local_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// accessLines returns the access-log lines logged so far.
func accessLines(t *testing.T, logs *testkit.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, s := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(s, `"msg":"request"`) {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		out = append(out, m)
	}
	return out
}

// TestAccessLogE2E: every request to a running Herald leaves one line with
// its route pattern, status and principal, and none holds a token, a
// reconnect token or an access_token query value.
func TestAccessLogE2E(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	h := local.Start(t, func(c *local.Config) {
		c.DevToken = "dev-token-s3cr3t-value"
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	do := func(req *http.Request) *http.Response {
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res
	}

	pub, _ := http.NewRequest("POST", h.URL+"/api/v1beta/events", strings.NewReader(`{"event":{"event_type":"shop.order.placed","message":{"id":1}}}`))
	pub.Header.Set("Authorization", "Bearer "+h.Token)
	res := do(pub)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Regexp(t, `^[0-9a-f]{32}$`, res.Header.Get("X-Request-Id"))

	bad, _ := http.NewRequest("GET", h.URL+"/v1/event-destinations/some-destination-id", nil)
	bad.Header.Set("Authorization", "Bearer wrong-token-s3cr3t")
	require.Equal(t, http.StatusUnauthorized, do(bad).StatusCode)

	// An SSE stream authorized by the access_token query parameter, left
	// once its headers arrive, with a reconnect token that is not known.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	q := url.Values{"access_token": {h.Token}, "reconnect_token": {"reconnect-s3cr3t"}}
	sse, _ := http.NewRequestWithContext(ctx, "GET", h.URL+"/api/v1beta/events/stream?"+q.Encode(), nil)
	sse.Header.Set("X-Request-Id", "sse-1")
	res = do(sse)
	require.Equal(t, "sse-1", res.Header.Get("X-Request-Id"))

	require.Eventually(t, func() bool { return len(accessLines(t, logs)) == 3 }, time.Minute, 10*time.Millisecond)
	byRoute := map[string]map[string]any{}
	for _, l := range accessLines(t, logs) {
		byRoute[l["route"].(string)] = l
	}
	require.Equal(t, "herald:dev", byRoute["/api/v1beta/events"]["principal"])
	require.EqualValues(t, 200, byRoute["/api/v1beta/events"]["status"])
	require.EqualValues(t, 401, byRoute["/v1/event-destinations/{id}"]["status"])
	require.Equal(t, "", byRoute["/v1/event-destinations/{id}"]["principal"])
	require.Equal(t, "sse-1", byRoute["/api/v1beta/events/stream"]["request_id"])
	require.Equal(t, "herald:dev", byRoute["/api/v1beta/events/stream"]["principal"])
	for _, secret := range []string{"s3cr3t", "some-destination-id", "access_token"} {
		require.NotContains(t, logs.String(), secret)
	}
}
