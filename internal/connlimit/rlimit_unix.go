//go:build unix

package connlimit

import "syscall"

func fdLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	if r.Cur > 1<<30 { // RLIM_INFINITY, or near enough
		return 1 << 30
	}
	return int(r.Cur)
}
