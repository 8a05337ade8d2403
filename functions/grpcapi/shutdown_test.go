package grpcapi_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// TestShutdownEndsStreams: when the server shuts down, open gRPC streams
// end UNAVAILABLE (the notifications API: reconnect) and SSE responses end, at once,
// instead of holding the shutdown to its grace period (10 s); Serve then
// returns cleanly, not with the grace period's deadline error.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	cfg := local.DefaultConfig()
	cfg.DevToken = "shutdown-token-0123456789"
	cfg.TopicURL, cfg.StoreURL = "mem://herald-shutdown", "mem://herald-shutdown/key"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := local.New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	addr, stop, served := testkit.Serve(t, srv.Serve)
	h := &grpcHerald{Instance: &local.Instance{URL: "http://" + addr, Token: "shutdown-token-0123456789", Server: srv}}
	h.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.conn.Close() })

	const typ = "shop.shutdown"
	h.createQueue(t, "shutdown-q", typ)
	acks := h.acksStream(t, h.ctx(t, h.Token), "shutdown-q")
	h.publish(t, typ, 1)
	_, n := recvAck(t, acks)
	require.Equal(t, 1.0, n)

	// An SSE stream too.
	req, err := http.NewRequest("GET", h.URL+"/api/v1beta/events/stream?filter_groups="+url.QueryEscape(`[{"event_type":"shop.other"}]`), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	sse := bufio.NewReader(res.Body)
	line, err := sse.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "event: connected\n", line)

	stop()
	err = recvErr(t, acks, &cpb.ConsumeDurableEventsWithAcksResponse{})
	require.Equal(t, codes.Unavailable, status.Code(err), "error: %v", err)
	require.Contains(t, status.Convert(err).Message(), "shutting down")

	_, err = io.ReadAll(sse) // ends: EventSource would reconnect
	require.NoError(t, err)

	select {
	case err := <-served:
		// Not the grace period's deadline: every stream ended and detached.
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("Serve did not return")
	}
}
