package local

import (
	"errors"
	"expvar"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves net/http/pprof's handlers, and expvar's /debug/vars
// (the runtime's memstats: allocations, GC, heap), on addr
// (Config.PprofAddr) until stop is called. They get a mux of their own:
// importing net/http/pprof or expvar registers on http.DefaultServeMux,
// which Herald's router never serves, so they are reachable on addr only.
func servePprof(addr string, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("HERALD_PPROF_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/vars", expvar.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Warn("serving Go runtime profiles without authentication", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("the pprof listener stopped", "err", err)
		}
	}()
	return func() { _ = srv.Close(); <-done }, nil
}
