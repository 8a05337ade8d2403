//go:build !linux

package netcork

import "syscall"

func setCork(syscall.RawConn, bool) bool { return false }
