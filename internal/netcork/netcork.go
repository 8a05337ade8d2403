// Package netcork batches a stream's many small writes into few TCP
// segments. A stream that sends a batch of events writes one WebSocket
// or SSE frame per event; on a socket each write is sent as its own
// segment at once (Herald's listeners set TCP_NODELAY, as Go's do), and
// over loopback the sender's write also runs the receiver's side of TCP,
// so a hundred frames cost a hundred trips through both stacks. Corked,
// the writes only fill the socket's buffer, and the batch leaves in as
// few segments as fit when it is uncorked.
//
// Cork uses TCP_CORK on Linux (tcp(7)): the kernel sends nothing short of
// a full segment until uncorked, and at most 200 ms late should the
// uncork never come. On other systems, and on a connection that is not
// a plain TCP socket (TLS, a wrapper), it does nothing.
package netcork

import (
	"context"
	"net"
	"syscall"
)

// Cork holds back c's partial segments until uncork is called; call it
// once, after the batch's last write. Errors are ignored: a connection
// that cannot be corked is written as it would be without Cork.
func Cork(c net.Conn) (uncork func()) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil || !setCork(raw, true) {
		return func() {}
	}
	return func() { setCork(raw, false) }
}

type connKey struct{}

// WithConn returns ctx carrying c, the connection a request arrived on
// (for http.Server.ConnContext), so that a handler whose writes the
// server makes for it (HTTP/2) can Cork the socket under them.
func WithConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// CorkContext corks the connection WithConn put in ctx; without one it
// does nothing. A connection carries many HTTP/2 streams: corking it for
// one stream's batch delays the others' writes by as long, and no more.
func CorkContext(ctx context.Context) (uncork func()) {
	c, ok := ctx.Value(connKey{}).(net.Conn)
	if !ok {
		return func() {}
	}
	return Cork(c)
}
