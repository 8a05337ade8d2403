package local_test

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/local"
)

// TestPprofAddr: HERALD_PPROF_ADDR serves the runtime profiles on its own
// listener with expvar's memstats, and Herald's own port serves neither.
func TestPprofAddr(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	h := local.Start(t, func(c *local.Config) { c.PprofAddr = addr })

	get := func(url string) int {
		res, err := http.Get(url)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, get("http://"+addr+"/debug/pprof/cmdline"))
	require.Equal(t, http.StatusOK, get("http://"+addr+"/debug/vars"))
	require.NotEqual(t, http.StatusOK, get(h.URL+"/debug/pprof/cmdline"))
	require.NotEqual(t, http.StatusOK, get(h.URL+"/debug/vars"))
}
