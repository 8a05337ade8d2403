package local_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/local"
)

// TestRestartWithDurableStore restarts a local Herald whose store is
// PostgreSQL and whose broker is in memory: the consumer comes back, and so
// does its subscription, so pulls answer 204 and then deliver new events
// instead of 404. (The in-memory store keeps nothing across a restart; the
// kill -9 tests in local/cmd/herald hold the durable one to a crash.)
func TestRestartWithDurableStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := local.DefaultConfig()
	cfg.DevToken = "restart-token-0123456789"
	cfg.TopicURL = "mem://restart-" + strings.ReplaceAll(t.Name(), "/", "-")
	cfg.StoreURL = emulators.PostgreSQL(t) + "?table=herald"

	call := func(srv *httptest.Server, method, path, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+cfg.DevToken)
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}

	first, err := local.New(ctx, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(first.Handler())
	status, body := call(srv, "POST", "/v1/event-destinations", `{"type":"DURABLE_CONSUMER"}`)
	require.Equal(t, http.StatusCreated, status, body)
	id := body[strings.Index(body, `"id":"`)+6:]
	id = id[:strings.IndexByte(id, '"')]
	srv.Close()
	require.NoError(t, first.Close())

	second, err := local.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = second.Close() })
	srv = httptest.NewServer(second.Handler())
	t.Cleanup(srv.Close)
	status, body = call(srv, "POST", "/v1/event-destinations/"+id+"/pull", "")
	require.Equal(t, http.StatusNoContent, status, body)
	status, body = call(srv, "POST", "/api/v1beta/events", `{"event":{"event_type":"a.b","message":{"n":1}}}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(srv, "POST", "/v1/event-destinations/"+id+"/pull", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"n":1`)
}
