package accesslog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/accesslog"
)

// lines collects JSON log lines.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.Write(p) }

func (l *lines) all(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m), s)
		out = append(out, m)
	}
	return out
}

func (l *lines) raw() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

func setup(t *testing.T, mux *http.ServeMux) (*httptest.Server, *lines) {
	t.Helper()
	logs := &lines{}
	srv := httptest.NewServer(accesslog.Middleware(slog.New(slog.NewJSONHandler(logs, nil)), mux))
	t.Cleanup(srv.Close)
	return srv, logs
}

func TestOneLinePerRequestWithThePatternNotThePath(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/event-destinations/{id}/pull", func(w http.ResponseWriter, r *http.Request) {
		accesslog.SetPrincipal(r.Context(), "billing")
		require.Equal(t, r.Header.Get("X-Request-Id"), accesslog.RequestID(r.Context()))
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("12345"))
	})
	srv, logs := setup(t, mux)

	req, _ := http.NewRequest("POST", srv.URL+"/v1/event-destinations/dest-42/pull?access_token=s3cret-query&reconnect_token=rt-s3cret", nil)
	req.Header.Set("Authorization", "Bearer s3cret-header")
	req.Header.Set("X-Request-Id", "req-1.a:b_c")
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, "req-1.a:b_c", res.Header.Get(accesslog.Header), "the id is returned")

	got := logs.all(t)
	require.Len(t, got, 1)
	l := got[0]
	require.Equal(t, "request", l["msg"])
	require.Equal(t, "INFO", l["level"])
	require.Equal(t, "POST", l["method"])
	require.Equal(t, "/v1/event-destinations/{id}/pull", l["route"])
	require.EqualValues(t, http.StatusTeapot, l["status"])
	require.EqualValues(t, 5, l["bytes"])
	require.Equal(t, "billing", l["principal"])
	require.Equal(t, "req-1.a:b_c", l["request_id"])
	require.Contains(t, l, "duration_ms")
	for _, secret := range []string{"s3cret", "dest-42", "access_token", "reconnect_token"} {
		require.NotContains(t, logs.raw(), secret)
	}
}

func TestRequestIDSources(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x", func(http.ResponseWriter, *http.Request) {})
	srv, _ := setup(t, mux)
	id := func(h map[string]string) string {
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res.Header.Get(accesslog.Header)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", id(map[string]string{"Traceparent": tp}))
	require.Equal(t, "mine", id(map[string]string{"Traceparent": tp, "X-Request-Id": "mine"}), "X-Request-Id wins")

	random := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for name, h := range map[string]map[string]string{
		"none":                  nil,
		"id with a space":       {"X-Request-Id": "a b"},
		"id with markup":        {"X-Request-Id": "a<b>;c"},
		"id too long":           {"X-Request-Id": strings.Repeat("a", accesslog.MaxRequestIDLength+1)},
		"all-zero trace id":     {"Traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		"upper-case trace id":   {"Traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"},
		"version ff":            {"Traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"short trace id":        {"Traceparent": "00-4bf92f35-00f067aa0ba902b7-01"},
		"version 00 with extra": {"Traceparent": tp + "-extra"},
	} {
		got := id(h)
		require.Regexp(t, random, got, name)
		require.NotEqual(t, got, id(h), "%s: a fresh id per request", name)
	}
	require.Len(t, id(map[string]string{"X-Request-Id": strings.Repeat("a", accesslog.MaxRequestIDLength)}), accesslog.MaxRequestIDLength)
}

func TestStatusOfSilentHandlersStreamsAndUpgrades(t *testing.T) {
	t.Parallel()
	// Handlers run on the server's goroutines, where require must not be
	// called: they record their errors, and the test asserts them once
	// every handler has returned (its log line is written).
	var (
		mu          sync.Mutex
		handlerErrs []error
	)
	record := func(err error, what string) {
		if err != nil {
			mu.Lock()
			handlerErrs = append(handlerErrs, fmt.Errorf("%s: %w", what, err))
			mu.Unlock()
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /silent", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 3 {
			_, _ = w.Write([]byte("data: x\n\n"))
			record(http.NewResponseController(w).Flush(), "flushing still works through the middleware")
		}
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		record(err, "hijacking still works through the middleware")
		if err == nil {
			_ = c.Close()
		}
	})
	mux.HandleFunc("/pkg.Service/", func(w http.ResponseWriter, r *http.Request) {})
	srv, logs := setup(t, mux)

	for _, p := range []string{"/silent", "/stream", "/pkg.Service/Publish", "/pkg.Service/bad%20name", "/no/such/path"} {
		res, err := srv.Client().Get(srv.URL + p)
		require.NoError(t, err)
		// Read to the end, so the handler's every Flush reaches an open
		// connection and it has returned before the next request.
		_, err = io.Copy(io.Discard, res.Body)
		require.NoError(t, err, p)
		require.NoError(t, res.Body.Close())
	}
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	require.NoError(t, err)
	_ = c.Close()

	require.Eventually(t, func() bool { return len(logs.all(t)) == 6 }, 10e9, 1e7, "the WebSocket's line is written when its handler returns")
	mu.Lock()
	require.Empty(t, handlerErrs)
	mu.Unlock()
	byRoute := map[string]map[string]any{}
	for _, l := range logs.all(t) {
		byRoute[l["route"].(string)] = l
	}
	require.EqualValues(t, 200, byRoute["/silent"]["status"])
	require.EqualValues(t, 0, byRoute["/silent"]["bytes"])
	require.EqualValues(t, 200, byRoute["/stream"]["status"])
	require.EqualValues(t, 27, byRoute["/stream"]["bytes"])
	require.EqualValues(t, 101, byRoute["/ws"]["status"])
	require.Contains(t, byRoute, "/pkg.Service/Publish", "a gRPC route is its procedure")
	require.Contains(t, byRoute, "/pkg.Service/", "a path that is not a procedure name is not logged")
	require.EqualValues(t, 404, byRoute[""]["status"], "an unrouted request has no route")
}
