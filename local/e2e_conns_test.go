package local_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/local"
)

// TestIdleConnectionsCannotExhaustTheServer: clients that each send one
// GET /health on a keep-alive connection and then leave it idle used to
// hold a file descriptor each until the idle timeout (620 s), until the
// process had none left and new clients timed out. With
// HERALD_MAX_CONNS=4 and a reserve of 1, twenty such clients leave at
// most five connections open — the longest-idle ones are closed to make
// room — every one of them was answered, and a new client is served.
func TestIdleConnectionsCannotExhaustTheServer(t *testing.T) {
	t.Parallel()
	const maxConns, reserve, clients = 4, 1, 20
	h := local.Start(t, func(c *local.Config) {
		c.MaxConns, c.MaxConnsPerClient, c.HealthConnReserve = maxConns, 0, reserve
	})
	addr := strings.TrimPrefix(h.URL, "http://")

	// health sends GET /health on a new keep-alive connection and keeps
	// the connection. A 503 (every connection busy at that instant: the
	// server marks a connection idle just after its answer) is retried
	// after its Retry-After, as clients are told to.
	health := func() net.Conn {
		for {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_, err = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: herald\r\n\r\n")
			require.NoError(t, err)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable {
				_ = c.Close()
				time.Sleep(time.Second)
				continue
			}
			require.Equal(t, http.StatusOK, res.StatusCode)
			_ = c.SetDeadline(time.Time{})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
	}
	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = health()
	}

	// Count the connections the server still holds: a read on one it
	// closed ends at once; one it holds has nothing to read. The wait
	// bounds a broken test, it measures nothing.
	var mu sync.Mutex
	open := 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, open, maxConns+reserve, "idle connections are closed for new ones; %d of %d stayed open", open, clients)

	res, err := (&http.Client{Timeout: 30 * time.Second}).Get(h.URL + "/api/v1beta/health")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "a new client is served")
}
