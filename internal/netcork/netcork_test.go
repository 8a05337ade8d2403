package netcork

import (
	"net"
	"testing"
)

// TestCorkOtherConns: a connection that is no socket is left alone.
func TestCorkOtherConns(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	Cork(a)()
}
