package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/internal/emulators"
)

const token = "cloudrun-test-token-0123456789"

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestServesOnPortAndStopsGracefully runs the server as Cloud Run would:
// on 0.0.0.0:$PORT, until SIGTERM (here: ctx canceled).
func TestServesOnPortAndStopsGracefully(t *testing.T) {
	// A free port can be taken by another process before run binds it
	// (tests run beside others): try again with another one.
	var (
		port   int
		cancel context.CancelFunc
		done   chan error
		addr   string
	)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for attempt := 0; addr == ""; attempt++ {
		port = emulators.FreePort(t)
		var ctx context.Context
		ctx, cancel = context.WithCancel(t.Context())
		ready := make(chan string, 1)
		done = make(chan error, 1)
		go func() {
			done <- run(ctx, logger, env(map[string]string{
				"PORT": strconv.Itoa(port), "HERALD_FUNCTION": "publish",
				"HERALD_TOPIC_URL": "mem://cloudrun-test",
				"HERALD_STORE_URL": "mem://cloudrun-test/key",
				"HERALD_TOKENS":    `{"` + token + `": {"id": "pub", "permissions": ["publish:*"]}}`,
			}), func(addr string) { ready <- addr })
		}()
		select {
		case addr = <-ready:
		case err := <-done:
			cancel()
			if attempt < 5 && errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			t.Fatalf("run: %v", err)
		}
	}
	host, gotPort, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(port), gotPort)
	require.True(t, net.ParseIP(host).IsUnspecified(), "listens on every interface, not %s", host)
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	res, err := http.Get(base + "/health")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	req, _ := http.NewRequest("POST", base+"/api/v1beta/events", strings.NewReader(`{"event":{"event_type":"a.b"}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.Contains(t, string(body), `"success":true`)

	// The publish function does not serve destinations.
	req, _ = http.NewRequest("GET", base+"/v1/event-destinations", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	cancel()
	require.NoError(t, <-done)
	_, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.Error(t, err, "the server stopped listening")
}

func TestRefusesBadConfiguration(t *testing.T) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	err := run(t.Context(), logger, env(map[string]string{"HERALD_FUNCTION": "pull"}), nil)
	require.Error(t, err)
	for _, name := range []string{"HERALD_TOPIC_URL", "HERALD_STORE_URL", "HERALD_TOKENS"} {
		require.Contains(t, err.Error(), name)
	}
}

func TestCloudLoggingKeys(t *testing.T) {
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: cloudLogging})).Warn("careful", "k", "v")
	require.Contains(t, b.String(), `"severity":"WARNING"`)
	require.Contains(t, b.String(), `"message":"careful"`)
	require.Contains(t, b.String(), `"k":"v"`)
}

// TestWebSocketOnCloudRun: the Cloud Run server serves the WebSocket
// bridge (HERALD_FUNCTION=pull) and closes it with 1001 on SIGTERM.
func TestWebSocketOnCloudRun(t *testing.T) {
	port := emulators.FreePort(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, slog.New(slog.NewJSONHandler(io.Discard, nil)), env(map[string]string{
			"PORT": strconv.Itoa(port), "HERALD_FUNCTION": "pull",
			"HERALD_TOPIC_URL": "mem://cloudrun-ws-test", "HERALD_STORE_URL": "mem://cloudrun-ws-test/key",
			"HERALD_TOKENS": `{"` + token + `": {"id": "consumer", "permissions": ["receive:*"]}}`,
		}), func(addr string) { ready <- addr })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	h := &wstest.Harness{Dial: wstest.Dialer("ws://127.0.0.1:" + strconv.Itoa(port) + wsbridge.Path), Push: true}
	c := wstest.Dial(t, h, token)
	c.Open(map[string]any{"stream": "non_durable"})
	c.Quiet()
	cancel()
	c.ExpectClose(wsframe.CloseGoingAway)
	require.NoError(t, <-done)
}
