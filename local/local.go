// Package local is Herald's local adapter: every function on one port, over
// in-memory drivers by default or any supported broker and store URL.
//
// It is also a library for users' tests: Start runs an in-process Herald on
// a free loopback port and stops it when the test ends, the way pstest or
// miniredis serve theirs.
//
//	func TestMyConsumer(t *testing.T) {
//		h := local.Start(t)
//		req, _ := http.NewRequest("POST", h.URL+"/api/v1beta/events", body)
//		req.Header.Set("Authorization", "Bearer "+h.Token)
//		…
//	}
package local

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Defaults of the local adapter (docs/configuration.md; the table lives in
// package functions/config).
const (
	DefaultAddr     = config.DefaultAddr
	DefaultDevToken = config.DefaultDevToken
	DefaultTopicURL = config.DefaultTopicURL
	DefaultStoreURL = config.DefaultStoreURL
)

// Config configures a Server: the settings of package functions/config
// (the same table, defaults and checks as the HERALD_* variables), plus
// what only a process in code can set. Start from DefaultConfig or
// ConfigFromEnv and change fields; New refuses a value out of range,
// naming the field.
type Config struct {
	config.Config
	// SessionTTL replaces how long a stream session counts as attached
	// without a heartbeat (tests; 0 means delivery.DefaultSessionTTL).
	SessionTTL time.Duration
	// WebhookTransport, when set, adjusts the webhook client's HTTP
	// transport (tests: trust the self-signed CA of an HTTPS receiver).
	WebhookTransport func(*http.Transport)
	// WebhookSchedule replaces the waits between failed webhook delivery
	// attempts (tests: a short schedule instead of
	// delivery.DefaultWebhookSchedule's minutes and hours); nil keeps the
	// default.
	WebhookSchedule []time.Duration
	// Now, if set, replaces the clock of the lease store and publisher.
	Now func() time.Time
	// Logger defaults to text lines on standard error at LogLevel.
	Logger *slog.Logger

	envErr error // what ConfigFromEnv could not parse; New reports it
}

// DefaultConfig returns the local adapter's defaults
// (config.Defaults(config.Local); docs/configuration.md).
func DefaultConfig() Config { return Config{Config: config.Defaults(config.Local)} }

// ConfigFromEnv reads the HERALD_* variables (see package functions/config).
// A value it cannot parse makes New fail with a message naming the
// variable.
func ConfigFromEnv() Config {
	c, err := config.FromEnv(config.Local)
	return Config{Config: c, envErr: err}
}

// Server is a running local Herald: its broker, store and handler.
type Server struct {
	cfg Config
	app *app.App
	// stopPprof stops the pprof listener (Config.PprofAddr); nil when
	// there is none.
	stopPprof func()
}

// New opens the broker and store and builds the handler. Bad configuration
// fails with a message naming the variable.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.envErr != nil {
		return nil, cfg.envErr
	}
	if cfg.Profile != config.Local || cfg.Function != config.All {
		return nil, fmt.Errorf("local: the Config's Profile is %s and Function %s; the local adapter is %s and %s (start from DefaultConfig)", cfg.Profile, cfg.Function, config.Local, config.All)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	a, err := app.Open(ctx, cfg.Config, app.Options{Now: cfg.Now, Logger: cfg.Logger, SessionTTL: cfg.SessionTTL,
		WebhookTransport: cfg.WebhookTransport, WebhookSchedule: cfg.WebhookSchedule})
	if err != nil {
		return nil, err
	}
	cfg.Logger = a.Logger() // HERALD_LOG_LEVEL applied
	// An in-process broker starts empty; a durable store (PostgreSQL) does not.
	if strings.HasPrefix(cfg.TopicURL, "mem:") {
		if n, err := a.Service().RestoreSubscriptions(ctx); err != nil {
			_ = a.Close()
			return nil, fmt.Errorf("restore subscriptions: %w", err)
		} else if n > 0 {
			cfg.Logger.Info("restored the in-memory subscriptions of stored consumers", "count", n)
		}
	}
	srv := &Server{cfg: cfg, app: a}
	if cfg.PprofAddr != "" {
		// Listening here, not in Serve, so the profiles are reachable as
		// soon as New returns.
		if srv.stopPprof, err = servePprof(cfg.PprofAddr, cfg.Logger); err != nil {
			_ = a.Close()
			return nil, err
		}
	}
	return srv, nil
}

// Logger returns the server's logger: Config.Logger with HERALD_LOG_LEVEL
// applied and credentials held back (what `herald serve` installs as the
// process's one log, package internal/proclog).
func (s *Server) Logger() *slog.Logger { return s.cfg.Logger }

// Handler returns the handler serving every endpoint.
func (s *Server) Handler() http.Handler { return s.app.Handler() }

// Close releases the broker and the store.
func (s *Server) Close() error {
	if s.stopPprof != nil {
		s.stopPprof()
	}
	return s.app.Close()
}

// ListenAndServe serves on cfg.Addr until ctx is done, then shuts down
// gracefully.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("HERALD_ADDR: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done. With the built-in development
// token (DefaultDevToken) it serves only a loopback listener: it returns
// an error naming HERALD_DEV_TOKEN, having served nothing, for any other
// (docs/auth.md, "The development token").
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	switch {
	case s.cfg.DevToken == DefaultDevToken && !config.LoopbackAddr(ln.Addr().String()):
		return fmt.Errorf("%s: the built-in development token is accepted only on a loopback address, and %s is not one: set %s to a token of your own (at least %d characters), or leave it unset and configure other tokens",
			config.EnvDevToken, ln.Addr(), config.EnvDevToken, config.MinCloudTokenLength)
	case s.cfg.DevToken == DefaultDevToken:
		s.cfg.Logger.Warn("HERALD_DEV_TOKEN is not set: the built-in development token grants every permission on this loopback address; it is off on any other address and beside an identity provider")
	case s.cfg.DevToken != "" && !config.LoopbackAddr(ln.Addr().String()):
		s.cfg.Logger.Warn("HERALD_DEV_TOKEN is set and Herald listens beyond loopback: that token grants every permission to whoever holds it")
	}
	startAttrs := []any{"addr", "http://" + ln.Addr().String(), "topic", config.Redact(s.cfg.TopicURL), "store", config.Redact(s.cfg.StoreURL),
		"auth", s.cfg.AuthMode(), "telemetry", telemetry.Exporters()}
	if s.cfg.PprofAddr != "" {
		startAttrs = append(startAttrs, "pprof_addr", s.cfg.PprofAddr)
	}
	s.cfg.Logger.Info("herald listening", startAttrs...)
	reapCtx, stopReaper := context.WithCancel(ctx)
	reaped := make(chan struct{})
	go func() { defer close(reaped); s.reap(reapCtx) }()
	pushed := make(chan struct{})
	go func() { defer close(pushed); s.push(reapCtx) }()
	defer func() { stopReaper(); <-reaped; <-pushed }()
	return app.Serve(ctx, ln, s.app.Handler(), app.ServeOptions{Grace: 10 * time.Second, PingInterval: s.app.Config().PingInterval(), Logger: s.cfg.Logger,
		Conns: s.app.Config().ConnLimits()})
}

// PushInterval is how long the local adapter waits between webhook
// pushes (the push-webhooks job) that found nothing to deliver; a push
// that delivered something is followed by the next at once. The clouds
// run the job every minute.
const PushInterval = 500 * time.Millisecond

// push runs the push-webhooks job continuously until ctx is done.
func (s *Server) push(ctx context.Context) {
	t := time.NewTimer(PushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := s.app.RunJob(ctx, jobs.PushWebhooks)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("webhook push failed; it runs again", "err", err)
		}
		next := PushInterval
		if res != nil && res.Delivered != nil && *res.Delivered > 0 {
			next = 0
		}
		t.Reset(next)
	}
}

// reap runs the idle-queue reaper (the reap-idle-queues job) every
// ReapInterval until ctx is done; the clouds run the job on a schedule.
func (s *Server) reap(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.app.RunJob(ctx, jobs.ReapIdleQueues); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("idle-queue reaper failed; it runs again", "err", err)
		}
	}
}
