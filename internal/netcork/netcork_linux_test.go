package netcork

import (
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// corked reads TCP_CORK of c (Linux).
func corked(t *testing.T, c net.Conn) bool {
	raw, err := c.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var v int
	require.NoError(t, raw.Control(func(fd uintptr) {
		v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK)
	}))
	require.NoError(t, err)
	return v != 0
}

// TestCorkDeliversEverything: writes made while corked all arrive once
// uncorked, and the socket is corked exactly in between.
func TestCorkDeliversEverything(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	uncork := Cork(c)
	require.True(t, corked(t, c))
	var want []byte
	for i := range 100 {
		frame := []byte{byte(i), 'x', 'y'}
		want = append(want, frame...)
		_, err := c.Write(frame)
		require.NoError(t, err)
	}
	uncork()
	require.False(t, corked(t, c))
	require.NoError(t, c.Close())
	require.Equal(t, want, <-got)
}
