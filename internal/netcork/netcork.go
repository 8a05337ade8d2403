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
