package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/internal/logcheck"
)

// Instance is a Herald started by Start.
type Instance struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Token is a bearer token with every permission.
	Token string
	// Server is the running server.
	Server *Server
}

// Option adjusts the Config that Start uses.
type Option func(*Config)

// WithConfig replaces the whole Config (Addr is ignored: Start picks a free
// port); build c from DefaultConfig.
func WithConfig(c Config) Option { return func(dst *Config) { *dst = c } }

// WithClock makes the store and publisher read time from now.
func WithClock(now func() time.Time) Option { return func(c *Config) { c.Now = now } }

var startCount atomic.Int64

// Start runs an in-process Herald on a free 127.0.0.1 port with fresh
// in-memory drivers, and stops it with t.Cleanup. It fails the test if
// Herald cannot start.
//
// Every line the instance logs is checked (package internal/logcheck):
// when the test ends, Start fails it for each line that held one of the
// instance's static tokens (the development token, Config.Tokens), a
// reconnect token or a JWT. Herald never logs a credential, so such a
// line is a bug in Herald. The lines go on to Config.Logger (by default
// nowhere).
func Start(t testing.TB, opts ...Option) *Instance {
	t.Helper()
	n := startCount.Add(1)
	cfg := DefaultConfig()
	cfg.DevToken = "test-token"
	// A fresh named broker and collection per instance, so parallel
	// tests never share state.
	cfg.TopicURL = fmt.Sprintf("mem://herald-test-%d", n)
	cfg.StoreURL = fmt.Sprintf("mem://herald-test-%d/key", n)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// The tokens are secrets, the principal ids are logged on purpose
	// (the access log's principal): a token that is a principal's id too,
	// as tests write them ("reader" for principal "reader"), is left out.
	secrets := []string{cfg.DevToken}
	for token := range cfg.Tokens {
		if !slices.ContainsFunc(slices.Collect(maps.Values(cfg.Tokens)), func(p *auth.Principal) bool { return strings.Contains(p.ID, token) }) {
			secrets = append(secrets, token)
		}
	}
	leaks := logcheck.New(secrets...)
	cfg.Logger = slog.New(leaks.Handler(cfg.Logger.Handler()))
	// Registered first, so it runs last: after the server has stopped
	// and logged its last line.
	t.Cleanup(func() { leaks.Check(t) })
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("local.Start: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("local.Start: listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("local.Start: serve: %v", err)
		}
		_ = srv.Close()
	})
	return &Instance{URL: "http://" + ln.Addr().String(), Token: srv.cfg.DevToken, Server: srv}
}
