package netcork

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func setCork(raw syscall.RawConn, on bool) bool {
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v)
	}); err != nil {
		return false
	}
	return serr == nil
}
