package connlimit_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/connlimit"
)

// server serves on a bounded loopback listener: /busy and /health/busy
// hold their request until release is closed, anything else answers 204
// at once; the paths under /health are its health routes.
type server struct {
	addr    string
	ln      *connlimit.Listener
	release chan struct{}
	entered chan struct{}
}

func serve(t *testing.T, limits connlimit.Limits) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &server{addr: raw.Addr().String(), ln: connlimit.NewListener(raw, limits, slog.New(slog.NewTextHandler(io.Discard, nil))),
		release: make(chan struct{}), entered: make(chan struct{}, 100)}
	mux := http.NewServeMux()
	busy := func(w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		<-s.release
	}
	mux.HandleFunc("/busy", busy)
	mux.HandleFunc("/health/busy", busy)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := &http.Server{
		Handler:   connlimit.Guard(mux, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/health") }),
		ConnState: s.ln.ConnState, ConnContext: connlimit.ConnContext,
	}
	// As app.Serve: HTTP/1.1 and cleartext HTTP/2 on one port.
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(s.ln) }()
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		_ = srv.Close()
		<-done
	})
	return s
}

// client is one raw keep-alive HTTP/1.1 connection.
type client struct {
	net.Conn
	r *bufio.Reader
}

func (s *server) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &client{Conn: c, r: bufio.NewReader(c)}
}

// get sends GET path and returns the answer's status, or 0 when the
// connection ended first.
func (c *client) get(t *testing.T, path string) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// closedByServer reports whether the server has closed c: a read ends
// with EOF (or a reset). The wait is a bound on a broken test, not a
// measurement: a closed connection answers at once.
func (c *client) closedByServer(t *testing.T) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	_, err := c.r.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	require.Error(t, err, "no bytes were due")
	return true
}

// waitIdle waits until the server counts n idle connections (a server
// marks a connection idle just after its answer is sent).
func (s *server) waitIdle(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.ln.Stats().Idle == n }, 10*time.Second, time.Millisecond)
}

// TestIdleConnectionsMakeRoom: at MaxConns, a new client is served and
// the longest-idle keep-alive connection is closed for it, so idle
// connections (one GET /health each) cannot lock new clients out.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	t.Parallel()
	s := serve(t, connlimit.Limits{MaxConns: 3})
	var cs []*client
	for i := range 3 {
		c := s.dial(t)
		require.Equal(t, http.StatusNoContent, c.get(t, "/health"))
		cs = append(cs, c)
		s.waitIdle(t, i+1)
	}
	for i := range 5 {
		c := s.dial(t)
		require.Equal(t, http.StatusNoContent, c.get(t, "/anything"), "new client %d is served", i)
		require.True(t, cs[i].closedByServer(t), "the longest-idle connection %d made room", i)
		cs = append(cs, c)
		s.waitIdle(t, 3)
	}
	st := s.ln.Stats()
	require.Equal(t, 3, st.Open)
	require.EqualValues(t, 5, st.Evicted)
	require.Zero(t, st.Refused)
}

// TestBusyConnectionsUseTheHealthReserve: when every connection is busy,
// a new one is admitted into the health reserve, which serves health
// checks and answers anything else 503 and closes; past the reserve a
// new connection is refused with 503.
func TestBusyConnectionsUseTheHealthReserve(t *testing.T) {
	t.Parallel()
	s := serve(t, connlimit.Limits{MaxConns: 2, HealthReserve: 1})
	for range 2 {
		c := s.dial(t)
		_, err := io.WriteString(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		<-s.entered
	}

	r := s.dial(t)
	require.Equal(t, http.StatusNoContent, r.get(t, "/health"), "a health check gets in")
	require.Equal(t, 1, s.ln.Stats().Reserve)
	s.waitIdle(t, 1)

	// The idle reserve connection gives its place to a new one, which is
	// in the reserve too.
	o := s.dial(t)
	require.Equal(t, http.StatusServiceUnavailable, o.get(t, "/events"), "the reserve serves health checks only")
	require.True(t, r.closedByServer(t), "the idle reserve connection made room")
	require.True(t, o.closedByServer(t), "a refused request's reserve connection is closed")

	// A busy health check holds the reserve: the next connection is
	// refused.
	h := s.dial(t)
	_, err := io.WriteString(h, "GET /health/busy HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	<-s.entered
	z := s.dial(t)
	require.Equal(t, http.StatusServiceUnavailable, z.get(t, "/health"))
	st := s.ln.Stats()
	require.Equal(t, 3, st.Open, "MaxConns plus the reserve, and no more")
	require.Equal(t, 1, st.Reserve)
	require.EqualValues(t, 1, st.Refused)
}

// TestRefusedWhenAllBusy: a connection that finds every connection busy
// and the reserve full is answered 503 with Retry-After and closed.
func TestRefusedWhenAllBusy(t *testing.T) {
	t.Parallel()
	s := serve(t, connlimit.Limits{MaxConns: 1})
	c := s.dial(t)
	_, err := io.WriteString(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	<-s.entered

	n := s.dial(t)
	_ = n.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(n, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(n.r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), `"code":"unavailable"`)
	require.True(t, n.closedByServer(t))
	require.EqualValues(t, 1, s.ln.Stats().Refused)
	require.Equal(t, 1, s.ln.Stats().Open)
}

// TestPerClientBound: a client at MaxPerClient loses its own
// longest-idle connection to its new one, and is refused when none is
// idle.
func TestPerClientBound(t *testing.T) {
	t.Parallel()
	s := serve(t, connlimit.Limits{MaxPerClient: 2})
	a, b := s.dial(t), s.dial(t)
	require.Equal(t, http.StatusNoContent, a.get(t, "/health"))
	s.waitIdle(t, 1)
	require.Equal(t, http.StatusNoContent, b.get(t, "/health"))
	s.waitIdle(t, 2)
	c := s.dial(t)
	require.Equal(t, http.StatusNoContent, c.get(t, "/health"))
	require.True(t, a.closedByServer(t), "the client's longest-idle connection made room")
	require.False(t, b.closedByServer(t))

	// Both of its connections busy: the third is refused.
	for _, x := range []*client{b, c} {
		_, err := io.WriteString(x, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		<-s.entered
	}
	d := s.dial(t)
	require.Equal(t, http.StatusServiceUnavailable, d.get(t, "/health"))
	require.EqualValues(t, 1, s.ln.Stats().Refused)
}

// TestDerived: the defaults follow the descriptor limit.
func TestDerived(t *testing.T) {
	t.Parallel()
	require.Equal(t, connlimit.Limits{MaxConns: 18_976, MaxPerClient: 4_744, HealthReserve: 16}, connlimit.Derived(20_000, true),
		"20,000 descriptors: 1,024 kept back")
	require.Equal(t, connlimit.Limits{MaxConns: 18_976, HealthReserve: 16}, connlimit.Derived(20_000, false))
	require.Equal(t, 1024-128, connlimit.Derived(1024, false).MaxConns)
	require.Equal(t, connlimit.MinMaxConns, connlimit.Derived(10, false).MaxConns)
	require.Equal(t, connlimit.MaxDerivedConns, connlimit.Derived(1<<20, false).MaxConns)
	require.Equal(t, 1024-128, connlimit.Derived(0, false).MaxConns, "unknown: as 1,024")
	if _, err := os.Stat("/proc/self"); err == nil {
		require.Positive(t, connlimit.FDLimit())
	}
}

// TestBusyHTTP2ConnectionIsNotEvicted: an HTTP/2 connection (gRPC, h2c)
// with a stream in progress is busy, not new: it is never closed for
// room, however long it has been open.
func TestBusyHTTP2ConnectionIsNotEvicted(t *testing.T) {
	t.Parallel()
	s := serve(t, connlimit.Limits{MaxConns: 1})
	h2 := new(http.Protocols)
	h2.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: h2}
	t.Cleanup(tr.CloseIdleConnections)
	done := make(chan int, 1)
	go func() {
		res, err := (&http.Client{Transport: tr}).Get("http://" + s.addr + "/busy")
		if err != nil {
			done <- 0
			return
		}
		_ = res.Body.Close()
		done <- res.StatusCode
	}()
	<-s.entered

	n := s.dial(t)
	require.Equal(t, http.StatusServiceUnavailable, n.get(t, "/health"), "the only connection is busy: the new one is refused")
	close(s.release)
	require.Equal(t, http.StatusOK, <-done, "the HTTP/2 stream was not cut")
	require.Zero(t, s.ln.Stats().Evicted)
}
