package conntrack

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// listen accepts connections and holds them open without answering, until
// the test ends; it reports each accepted connection's end on gone.
func listen(t *testing.T) (addr string, gone <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	ch := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(io.Discard, c) // returns when the peer closes
				_ = c.Close()
				ch <- struct{}{}
			}()
		}
	}()
	return ln.Addr().String(), ch
}

func TestCloseClosesEveryConnection(t *testing.T) {
	addr, gone := listen(t)
	tr := New(nil)
	var conns []net.Conn
	for range 3 {
		c, err := tr.Dial(t.Context(), "tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	require.NoError(t, conns[0].Close(), "a connection closed by its user")
	require.Equal(t, 2, tr.Open(), "a closed connection is forgotten")

	require.NoError(t, tr.Close())
	require.Equal(t, 0, tr.Open())
	for range 3 {
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the server still holds a connection the tracker closed")
		}
	}
	_, err := conns[1].Write([]byte("x"))
	require.Error(t, err, "a write on a connection closed by the tracker")

	_, err = tr.Dial(t.Context(), "tcp", addr)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, tr.Close(), "Close is idempotent")
}

func TestDialFinishingAfterCloseIsClosed(t *testing.T) {
	addr, gone := listen(t)
	dialing, release := make(chan struct{}), make(chan struct{})
	tr := New(func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, a)
		close(dialing)
		<-release // Close happens while this dial is in flight
		return c, err
	})
	errc := make(chan error, 1)
	go func() {
		_, err := tr.Dial(context.Background(), "tcp", addr)
		errc <- err
	}()
	<-dialing
	require.NoError(t, tr.Close())
	close(release)
	require.True(t, errors.Is(<-errc, ErrClosed), "a dial that lands after Close fails")
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the late connection was left open")
	}
	require.Equal(t, 0, tr.Open())
}
