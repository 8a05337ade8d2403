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

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/router"
)

// Defaults of the local adapter (docs/configuration.md; the table lives in
// package functions/config).
const (
	DefaultAddr     = config.DefaultAddr
	DefaultDevToken = config.DefaultDevToken
	DefaultTopicURL = config.DefaultTopicURL
	DefaultStoreURL = config.DefaultStoreURL
)

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	Addr     string // HERALD_ADDR
	DevToken string // HERALD_DEV_TOKEN: grants every permission
	TopicURL string // HERALD_TOPIC_URL: a pubsubx broker URL
	StoreURL string // HERALD_STORE_URL: a gocloud docstore collection URL keyed by "key"
	Source   string // HERALD_SOURCE: CloudEvents source of published events
	// Tokens are more bearer tokens (HERALD_TOKENS, HERALD_TOKENS_FILE).
	Tokens auth.StaticTokens
	// JWT accepts an identity provider's JWTs beside the tokens when its
	// Issuer or JWKSURL is set (the HERALD_JWT_* variables; docs/auth.md).
	JWT jwtauth.Config
	// CORSOrigins are the browser origins allowed to call Herald and open
	// its WebSocket (HERALD_CORS_ORIGINS; default none).
	CORSOrigins []string
	// ReceiveWait is how long a pull waits at the broker
	// (HERALD_RECEIVE_WAIT; default 0).
	ReceiveWait time.Duration
	// MaxLeaseBytes caps one lease's encoded events
	// (HERALD_MAX_LEASE_BYTES; default 350,000).
	MaxLeaseBytes int
	// PublishTimeout bounds how long a publish waits for the broker
	// (HERALD_PUBLISH_TIMEOUT; default 5s).
	PublishTimeout time.Duration
	// ReconnectGrace, QueueIdleWindow and DeliveryLimit are the notifications API's
	// queue lifetimes and redelivery budget (HERALD_RECONNECT_GRACE,
	// default 20s; HERALD_QUEUE_IDLE_WINDOW, default 24h;
	// HERALD_DELIVERY_LIMIT, default 20).
	ReconnectGrace  time.Duration
	QueueIdleWindow time.Duration
	DeliveryLimit   int
	// ClaimRetention is how long the idle-queue reaper keeps a
	// claim-check claim (HERALD_CLAIM_RETENTION; default 336h).
	ClaimRetention time.Duration
	// MaxInflightBytes and MaxConcurrentPublishes are the admission
	// bounds (HERALD_MAX_INFLIGHT_BYTES, default 64 MiB;
	// HERALD_MAX_CONCURRENT_PUBLISHES, default 256); 0 means the default,
	// negative no bound.
	MaxInflightBytes       int64
	MaxConcurrentPublishes int64
	// QueueMessageTTL and QueueMaxLength configure queues created from
	// now on (HERALD_QUEUE_MESSAGE_TTL, HERALD_QUEUE_MAX_LENGTH; 0 = none).
	QueueMessageTTL time.Duration
	QueueMaxLength  int
	// SSEKeepAlive and SSEAckDelay tune the SSE streams
	// (HERALD_SSE_KEEPALIVE, default 15s; HERALD_SSE_ACK_DELAY, default 1s,
	// negative for none).
	SSEKeepAlive time.Duration
	SSEAckDelay  time.Duration
	// WSPingInterval is how often the WebSocket bridge pings a client
	// (HERALD_WS_PING_INTERVAL, default 30s); tests set it shorter.
	WSPingInterval time.Duration
	// ReapInterval is how often the idle-queue reaper runs
	// (HERALD_REAP_INTERVAL, default 5s); negative turns it off (tests
	// that run the reap-idle-queues job themselves).
	ReapInterval time.Duration
	// PprofAddr, when set, is a second listen address serving Go's
	// runtime profiles (net/http/pprof under /debug/pprof/, no
	// authentication) from New to Close (HERALD_PPROF_ADDR; default
	// none). For profiling on a development machine only.
	PprofAddr string
	// SessionTTL replaces how long a stream session counts as attached
	// without a heartbeat (tests; default 30s).
	SessionTTL time.Duration
	// HTTP2PingInterval is how long an HTTP/2 connection may go without a
	// frame from the client before the server PINGs it
	// (HERALD_HTTP2_PING_INTERVAL, default 30s); negative for none.
	HTTP2PingInterval time.Duration
	// LogLevel is the least severe level logged (HERALD_LOG_LEVEL; the
	// zero value is info: one access-log line per request).
	LogLevel slog.Level
	// Now, if set, replaces the clock of the lease store and publisher.
	Now func() time.Time
	// Logger defaults to text lines on standard error at LogLevel.
	Logger *slog.Logger

	envErr error // what ConfigFromEnv could not parse; New reports it
}

// ConfigFromEnv reads the HERALD_* variables (see package functions/config).
// A value it cannot parse makes New fail with a message naming the
// variable.
func ConfigFromEnv() Config {
	c, err := config.FromEnv(config.Local)
	return Config{
		Addr: c.Addr, DevToken: c.DevToken, TopicURL: c.TopicURL, StoreURL: c.StoreURL,
		Source: c.Source, Tokens: c.Tokens, ReceiveWait: c.ReceiveWait, MaxLeaseBytes: c.MaxLeaseBytes,
		ReconnectGrace: c.ReconnectGrace, QueueIdleWindow: c.QueueIdleWindow, DeliveryLimit: c.DeliveryLimit,
		ClaimRetention: c.ClaimRetention, PublishTimeout: c.PublishTimeout,
		SSEKeepAlive: c.SSEKeepAlive, SSEAckDelay: c.SSEAckDelay, ReapInterval: c.ReapInterval,
		QueueMessageTTL: c.QueueMessageTTL, QueueMaxLength: c.QueueMaxLength,
		WSPingInterval:    c.WSPingInterval,
		HTTP2PingInterval: c.HTTP2PingInterval,
		PprofAddr:         c.PprofAddr,
		LogLevel:          c.LogLevel,
		JWT:               c.JWT, CORSOrigins: c.CORSOrigins,
		MaxInflightBytes: c.MaxInflightBytes, MaxConcurrentPublishes: c.MaxConcurrentPublishes,
		envErr: err,
	}
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DevToken == "" {
		c.DevToken = DefaultDevToken
	}
	if c.TopicURL == "" {
		c.TopicURL = DefaultTopicURL
	}
	if c.StoreURL == "" {
		c.StoreURL = DefaultStoreURL
	}
	if c.Source == "" {
		c.Source = config.DefaultSource
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = config.DefaultReapInterval
	}
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
	cfg.setDefaults()
	a, err := app.Open(ctx, config.Config{
		Profile: config.Local, Function: router.All, Addr: cfg.Addr,
		DevToken: cfg.DevToken, Tokens: cfg.Tokens,
		TopicURL: cfg.TopicURL, StoreURL: cfg.StoreURL, Source: cfg.Source,
		ReceiveWait: cfg.ReceiveWait, MaxLeaseBytes: cfg.MaxLeaseBytes,
		ReconnectGrace: cfg.ReconnectGrace, QueueIdleWindow: cfg.QueueIdleWindow, DeliveryLimit: cfg.DeliveryLimit,
		ClaimRetention: cfg.ClaimRetention, PublishTimeout: cfg.PublishTimeout,
		SSEKeepAlive: cfg.SSEKeepAlive, SSEAckDelay: cfg.SSEAckDelay,
		QueueMessageTTL: cfg.QueueMessageTTL, QueueMaxLength: cfg.QueueMaxLength,
		WSPingInterval:    cfg.WSPingInterval,
		HTTP2PingInterval: cfg.HTTP2PingInterval,
		LogLevel:          cfg.LogLevel,
		JWT:               cfg.JWT, CORSOrigins: cfg.CORSOrigins,
		MaxInflightBytes: cfg.MaxInflightBytes, MaxConcurrentPublishes: cfg.MaxConcurrentPublishes,
	}, app.Options{Now: cfg.Now, Logger: cfg.Logger, SessionTTL: cfg.SessionTTL})
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

// Serve serves on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.cfg.DevToken == DefaultDevToken {
		s.cfg.Logger.Warn("HERALD_DEV_TOKEN is not set: the built-in default token grants every permission; use it only for local development, never on a shared or public address")
	}
	s.cfg.Logger.Info("herald listening", "addr", "http://"+ln.Addr().String(), "topic", config.Redact(s.cfg.TopicURL), "store", config.Redact(s.cfg.StoreURL))
	reapCtx, stopReaper := context.WithCancel(ctx)
	reaped := make(chan struct{})
	go func() { defer close(reaped); s.reap(reapCtx) }()
	defer func() { stopReaper(); <-reaped }()
	return app.Serve(ctx, ln, s.app.Handler(), app.ServeOptions{Grace: 10 * time.Second, PingInterval: s.app.Config().PingInterval(), Logger: s.cfg.Logger})
}

// reap runs the idle-queue reaper (the reap-idle-queues job) every
// ReapInterval until ctx is done; the clouds run the job on a schedule.
func (s *Server) reap(ctx context.Context) {
	if s.cfg.ReapInterval < 0 {
		return
	}
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
