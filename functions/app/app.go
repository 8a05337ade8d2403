// Package app wires one Herald process from a config.Config: it opens the
// broker and the lease store the configured function needs, once per
// process, and builds that function's http.Handler. The local adapter, the
// Lambda bootstrap and the Cloud Run server all start through Open, so
// every entrypoint supports the same URL schemes (see drivers.go).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/consoleauth"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/internal/connlimit"
	"github.com/heraldevents/herald/internal/logredact"
	"github.com/heraldevents/herald/internal/netcork"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/internal/version"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// Options adjust Open beyond what the environment says.
type Options struct {
	// Now replaces the clock of the lease store and the publisher (tests).
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// SessionTTL replaces how long a stream session counts as attached
	// without a heartbeat (tests; default delivery.DefaultSessionTTL).
	SessionTTL time.Duration
	// WebhookTransport, when set, adjusts the webhook client's HTTP
	// transport (tests: trust a receiver's self-signed CA); see
	// delivery.WebhookConfig.Transport.
	WebhookTransport func(*http.Transport)
	// WebhookSchedule replaces the waits between failed webhook delivery
	// attempts (tests: seconds instead of delivery.DefaultWebhookSchedule's
	// minutes and hours); nil keeps the default.
	WebhookSchedule []time.Duration
	// Jobs adjusts the scheduled jobs (RunJob and POST /v1/jobs/{job}):
	// the Lambda bootstrap gives the reaper the API Gateway WebSocket
	// function's connection closer (jobs.Options).
	Jobs jobs.Options
}

// App is one process's Herald: its backends and its handler.
type App struct {
	cfg     config.Config
	svc     *delivery.Service
	store   *leasestore.Store // nil when the function does not use one
	handler http.Handler
	broker  *pubsubx.Broker      // nil when the function does not use one
	coll    *docstore.Collection // nil when the function does not use one
	logger  *slog.Logger
	authn   auth.Authenticator
	jwt     *jwtauth.Verifier // nil without an identity provider
	// admission sheds load past the configured bounds; nil when off.
	admission *httpx.Admission
	// jobs adjusts the scheduled jobs (Options.Jobs).
	jobs jobs.Options
	// unregisterGauges stops the consumer gauges (telemetry.
	// RegisterConsumerGauges); nil when none were registered.
	unregisterGauges func() error
	// hub serves non-durable streams from memory (HERALD_PROCESS_HEARTBEAT;
	// docs/streams-at-scale.md); nil when off, and on Lambda.
	hub *delivery.Hub
}

// minLevel drops records below min (HERALD_LOG_LEVEL) before the wrapped
// handler sees them, whatever level that handler was made with.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// Admission returns the App's load-shedding bounds and counters, or nil
// when they are off (HERALD_MAX_INFLIGHT_BYTES and
// HERALD_MAX_CONCURRENT_PUBLISHES).
func (a *App) Admission() *httpx.Admission { return a.admission }

// Open opens what cfg.Function needs (the broker for publish, pull and
// destinations; the store for pull, acknowledge, destinations and jobs)
// and builds its handler. Errors name the variable at fault; a cfg that
// config.Config.Validate refuses is refused first (build one from
// config.Load or config.Defaults). The caller closes the App.
func Open(ctx context.Context, cfg config.Config, opts Options) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// Every line goes out with reconnect tokens and JWTs cut out
	// (logredact): the last defence behind logging route patterns and
	// redacted queue ids, since store and broker errors quote consumer ids.
	opts.Logger = slog.New(logredact.Handler(telemetry.LogHandler(minLevel{opts.Logger.Handler(), cfg.LogLevel})))
	a := &App{cfg: cfg, logger: opts.Logger, jobs: opts.Jobs}
	var err error
	if cfg.Profile.Cloud() {
		for _, u := range []struct{ name, value string }{{config.EnvTopicURL, cfg.TopicURL}, {config.EnvStoreURL, cfg.StoreURL}} {
			if strings.HasPrefix(u.value, "mem://") {
				opts.Logger.Warn(u.name + " is in memory: every instance has its own, so instances disagree and state is lost on exit; use it only for tests")
			}
		}
	}
	if cfg.DevToken != "" && (cfg.Profile.Cloud() || cfg.JWTEnabled()) {
		opts.Logger.Warn(config.EnvDevToken + " is set: it grants every permission, beside any identity provider")
	}
	if cfg.Function.UsesBroker() {
		if a.broker, err = pubsubx.Open(ctx, cfg.TopicURL); err != nil {
			return nil, fmt.Errorf("%s %s: %w", config.EnvTopicURL, config.Redact(cfg.TopicURL), err)
		}
		// With telemetry on, every broker call is a child span of the
		// operation that made it (no-op off).
		a.broker = telemetry.Broker(a.broker, scheme(cfg.TopicURL))
	}
	var store *leasestore.Store
	if cfg.Function.UsesStore() {
		if a.coll, err = openStore(ctx, cfg.StoreURL); err != nil {
			_ = a.Close()
			return nil, fmt.Errorf("%s %s: %w", config.EnvStoreURL, config.Redact(cfg.StoreURL), err)
		}
		store = leasestore.New(a.coll, leasestore.Options{
			Now: opts.Now, MaxPayloadBytes: cfg.MaxLeaseBytes, DeliveryLimit: cfg.DeliveryLimit,
			// Compression saves what a cloud store bills per byte; an
			// in-memory store bills nothing, so it keeps the CPU instead.
			Uncompressed: strings.HasPrefix(cfg.StoreURL, "mem://"),
			// A process is dead after five missed heartbeats.
			ProcessTTL: 5 * cfg.ProcessHeartbeat,
		})
		a.store = store
		if cfg.Function == config.Jobs || cfg.Function == config.All {
			if a.unregisterGauges, err = telemetry.RegisterConsumerGauges(consumerStates(store), telemetry.GaugeOptions{}); err != nil {
				_ = a.Close()
				return nil, fmt.Errorf("telemetry: %w", err)
			}
		}
	}
	a.svc = delivery.New(delivery.Config{
		Broker: a.broker, Store: store, Source: cfg.Source, ReceiveWait: cfg.ReceiveWait,
		ClaimRetention: cfg.ClaimRetention, PublishTimeout: cfg.PublishTimeout, IdempotencyWindow: cfg.IdempotencyWindow,
		Webhooks: delivery.WebhookConfig{Policy: cfg.WebhookAllow, Concurrency: cfg.WebhookConcurrency,
			BreakerThreshold: cfg.WebhookBreakerThreshold, BreakerCooldown: cfg.WebhookBreakerCooldown,
			Transport: opts.WebhookTransport, Schedule: opts.WebhookSchedule},
		Streams: delivery.StreamConfig{
			ReconnectGrace: cfg.ReconnectGrace, IdleWindow: cfg.QueueIdleWindow,
			KeepAlive: cfg.SSEKeepAlive, AutoAckDelay: cfg.SSEAckDelay, AutoAckAtOnce: cfg.SSEAckDelay == 0, SessionTTL: opts.SessionTTL,
			MessageTTL: cfg.QueueMessageTTL, MaxLength: cfg.QueueMaxLength,
			WSPingInterval: cfg.WSPingInterval, WriteTimeout: cfg.StreamWriteTimeout,
			MaxOpening: int(cfg.MaxConcurrentStreamOpens),
		},
		Now: opts.Now, Logger: opts.Logger,
	})
	if cfg.Profile != config.Lambda && cfg.ProcessHeartbeat > 0 && a.broker != nil && store != nil && (cfg.Function == config.Pull || cfg.Function == config.All) {
		if a.hub, err = a.svc.StartHub(ctx, delivery.HubConfig{Heartbeat: cfg.ProcessHeartbeat}); err != nil {
			_ = a.Close()
			return nil, fmt.Errorf("start the stream hub: %w", err)
		}
	}
	chain := auth.Chain{Static: cfg.Authenticator()}
	if cfg.JWTEnabled() {
		jc := cfg.JWT
		jc.Logger = opts.Logger
		if a.jwt, err = jwtauth.New(jc); err != nil {
			_ = a.Close()
			return nil, err
		}
		chain.JWT = a.jwt
		if jc.Issuer == "" {
			opts.Logger.Warn(config.EnvJWTJWKSURL + " is set without " + config.EnvJWTIssuer + ": tokens of any issuer signed by those keys are accepted")
		}
	}
	a.authn = chain
	var signIn *consoleauth.Sessions
	if cfg.Console && cfg.Function == config.All && cfg.ConsoleOIDC.Enabled() && a.jwt != nil {
		o := cfg.ConsoleOIDC
		if signIn, err = consoleauth.New(consoleauth.Config{
			Issuer: cfg.JWT.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes,
			RedirectURL: o.RedirectURL, Key: o.SessionKey, Verifier: a.jwt, Authenticator: chain, Logger: opts.Logger,
			Now: opts.Now,
		}); err != nil {
			_ = a.Close()
			return nil, err
		}
		if o.SessionKey == nil && cfg.Profile.Cloud() {
			opts.Logger.Warn(config.EnvConsoleSessionKey + " is not set: each instance seals console sessions with its own random key, so a session ends when its instance does and fails on any other instance")
		}
	}
	a.admission = admission(cfg, opts.Logger)
	a.handler = telemetry.Handler(accesslog.Middleware(opts.Logger, telemetry.Route(
		router.Build(a.svc, chain, cfg.Function, router.Options{
			Ready: a.readiness(opts.Logger), CORSOrigins: cfg.CORSOrigins, Admission: a.admission,
			RequestTimeout: router.RequestTimeout(cfg.ReceiveWait, cfg.PublishTimeout),
			Jobs:           opts.Jobs,
			Console:        cfg.Console,
			ConsoleSignIn:  signIn,
			Summary:        a.summary,
		}))))
	return a, nil
}

// admission returns the server's load-shedding bounds (see
// functions/httpx.Admission; HERALD_MAX_INFLIGHT_BYTES and
// HERALD_MAX_CONCURRENT_PUBLISHES, 0 for no bound), or nil when both are
// off. A Lambda function gets nil: Lambda runs one request per instance
// and sheds load itself.
func admission(cfg config.Config, logger *slog.Logger) *httpx.Admission {
	if cfg.Profile == config.Lambda || (cfg.MaxInflightBytes == 0 && cfg.MaxConcurrentPublishes == 0) {
		return nil
	}
	return &httpx.Admission{MaxBytes: cfg.MaxInflightBytes, MaxPublishes: cfg.MaxConcurrentPublishes, Logger: logger}
}

// Authenticator returns what resolves bearer tokens: the static tokens,
// then the identity provider's JWTs when one is configured.
func (a *App) Authenticator() auth.Authenticator { return a.authn }

// readiness returns the Checker of GET /health/ready and gRPC health: the
// broker and the store, where the function uses them.
func (a *App) readiness(logger *slog.Logger) *health.Checker {
	var deps []health.Dependency
	if a.broker != nil {
		deps = append(deps, health.Broker(a.broker))
	}
	if a.store != nil {
		deps = append(deps, health.Store(a.store))
	}
	return health.NewChecker(deps, health.Options{Logger: logger})
}

// summary is the configuration summary of GET /v1/info: what the
// start-up line tells (broker and store schemes, auth mode, telemetry
// exporters, version), never a credential.
func (a *App) summary() health.Summary {
	cfg := a.cfg
	out := health.Summary{Version: version.Get(), Profile: cfg.Profile.String(), Function: string(cfg.Function),
		Auth: cfg.AuthMode(), Telemetry: telemetry.Exporters(), ConsoleSignIn: "off"}
	if a.broker != nil {
		out.Broker = scheme(cfg.TopicURL)
	}
	if a.store != nil {
		out.Store = scheme(cfg.StoreURL)
	}
	if cfg.Console && cfg.Function == config.All {
		out.ConsoleSignIn = "token"
		if cfg.ConsoleOIDC.Enabled() && a.jwt != nil {
			out.ConsoleSignIn = "token, oidc"
		}
	}
	return out
}

// Config returns the configuration the App was opened with.
func (a *App) Config() config.Config { return a.cfg }

// Logger returns the process's logger: Options.Logger, holding back what
// is below HERALD_LOG_LEVEL. The entrypoints log through it.
func (a *App) Logger() *slog.Logger { return a.logger }

// Handler returns the handler of the configured function's routes, each
// request logged by package functions/accesslog and, when telemetry is on
// (package internal/telemetry), traced and measured by otelhttp.
func (a *App) Handler() http.Handler { return a.handler }

// Service returns the core service.
func (a *App) Service() *delivery.Service { return a.svc }

// Store returns the lease store, or nil when the function uses none (the
// API Gateway WebSocket function keeps its connection records there).
func (a *App) Store() *leasestore.Store { return a.store }

// RunJob runs job name as jobs.SchedulerPrincipal: for a platform
// scheduler that invokes the jobs function directly, authorized by the
// platform's IAM instead of a token. Only the jobs and all functions run
// jobs; others answer herr.NotFound.
func (a *App) RunJob(ctx context.Context, name string) (*jobs.Result, error) {
	if a.cfg.Function != config.Jobs && a.cfg.Function != config.All {
		return nil, errNoJobs(a.cfg.Function)
	}
	return jobs.Run(ctx, a.svc, jobs.SchedulerPrincipal, name, a.jobs)
}

// Close releases the broker and the store (saving a file-backed store).
// The hub goes first: it hands its non-durable queues, with what they
// hold, back to the store, within 10 s.
func (a *App) Close() error {
	var errs []error
	if a.hub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, a.hub.Close(ctx))
		cancel()
	}
	if a.unregisterGauges != nil {
		errs = append(errs, a.unregisterGauges())
	}
	if a.jwt != nil {
		errs = append(errs, a.jwt.Close())
	}
	if a.broker != nil {
		errs = append(errs, a.broker.Close())
	}
	if a.coll != nil {
		errs = append(errs, a.coll.Close())
	}
	return errors.Join(errs...)
}

// consumerStates adapts the store's consumer listing to the consumer
// gauges, which read it when metrics are collected.
func consumerStates(s *leasestore.Store) telemetry.ConsumerLister {
	return func(ctx context.Context) ([]telemetry.ConsumerState, error) {
		cs, err := s.ListConsumers(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]telemetry.ConsumerState, len(cs))
		for i, c := range cs {
			out[i] = telemetry.ConsumerState{ID: c.ID, Type: c.Type, InFlight: c.InFlight, Requeued: c.Requeued}
		}
		return out, nil
	}
}

// scheme returns the scheme of a broker URL ("mem", "awssns", …), which
// names the driver on broker spans; never the rest, which may hold
// credentials.
func scheme(rawURL string) string {
	if s, _, ok := strings.Cut(rawURL, "://"); ok && s != "" && !strings.ContainsAny(s, "/@:?") {
		return s
	}
	return "unknown"
}

// ServeOptions tune Serve.
type ServeOptions struct {
	// Grace is how long requests in flight may run after ctx is done
	// (Cloud Run allows 10 s after SIGTERM).
	Grace time.Duration
	// PingInterval is how long an HTTP/2 connection may go without a frame
	// from the client before the server sends it a PING
	// (HERALD_HTTP2_PING_INTERVAL, config.Config.PingInterval); 0 sends
	// none. A PING not acknowledged within PingAckTimeout closes the
	// connection.
	PingInterval time.Duration
	// Logger receives the server's own messages (TLS handshake errors, an
	// unacknowledged PING, a panicking handler) as warnings, in the
	// process's log format; nil means slog.Default().
	Logger *slog.Logger
	// Conns bounds the client connections the server holds (package
	// internal/connlimit: HERALD_MAX_CONNS, HERALD_MAX_CONNS_PER_CLIENT,
	// HERALD_HEALTH_CONN_RESERVE; config.Config.ConnLimits); the zero
	// value bounds none.
	Conns connlimit.Limits
}

// healthRoute reports whether r asks for a health check — GET /health,
// GET /api/v1beta/health, GET /health/ready, or gRPC health checking —
// the only requests a connection of the health reserve serves.
func healthRoute(r *http.Request) bool {
	switch r.URL.Path {
	case health.LivePath, health.ReadyPath, "/api/v1beta/health":
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/grpc.health.v1.Health/")
}

// PingAckTimeout is how long Serve waits for the acknowledgement of a
// PING it sent before it closes the connection (net/http's default).
const PingAckTimeout = 15 * time.Second

// Serve serves h on ln until ctx is done, then shuts down gracefully,
// giving requests in flight up to o.Grace to finish. It speaks HTTP/1.1
// and cleartext HTTP/2 (h2c) on the one port: native gRPC clients need
// HTTP/2, and locally nothing terminates TLS in front of Herald, while
// Cloud Run forwards h2c end to end when the service is deployed with
// --use-http2. On HTTP/2 connections it sends PINGs as o.PingInterval
// says, so that idle gRPC streams are not cut by idle timeouts between
// the client and Herald.
//
// Timeouts: httpx.ReadHeaderTimeout for the headers, httpx.ReadTimeout
// for the whole request (streams are exempt: their routes lift it,
// httpx.Unbounded), httpx.IdleTimeout for a keep-alive connection without
// a request. There is no write timeout: streams write for hours, and a
// client that stops reading is bounded by the streams' own write
// deadlines (delivery.StreamConfig.WriteTimeout, per write) and
// keep-alives.
//
// With o.Conns set, the listener holds the connections to those bounds
// (package internal/connlimit): at a bound the longest-idle connection is
// closed for the new one, a new one that finds every connection busy
// takes a place of the health reserve (health checks only) or is refused
// with 503, so idle keep-alive connections can never take every file
// descriptor of the process.
//
// Long-lived requests — WebSockets, gRPC streams, SSE — are tracked with
// an httpx.LongLived in the server's base context: on shutdown they are
// told to go away (a WebSocket closes with 1001, a gRPC stream ends
// UNAVAILABLE, an SSE response ends so that EventSource reconnects) and
// waited for within the same grace, where http.Server.Shutdown alone would
// leave hijacked connections open and wait streams out to its deadline.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	longLived := httpx.NewLongLived()
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	var conns *connlimit.Listener
	if o.Conns.Enabled() {
		conns = connlimit.NewListener(ln, o.Conns, logger)
		ln, h = conns, connlimit.Guard(h, healthRoute)
		logger.Info("connection bounds", "max_conns", o.Conns.MaxConns, "max_conns_per_client", o.Conns.MaxPerClient,
			"health_conn_reserve", o.Conns.HealthReserve, "fd_limit", connlimit.FDLimit())
	}
	srv := &http.Server{
		Handler: h, ReadHeaderTimeout: httpx.ReadHeaderTimeout,
		ReadTimeout: httpx.ReadTimeout, IdleTimeout: httpx.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return httpx.WithLongLived(context.Background(), longLived) },
		// A stream's handler may cork its connection while it writes a
		// batch (internal/netcork); the connection bounds' guard reads
		// the connection too.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return netcork.WithConn(connlimit.ConnContext(ctx, c), c)
		},
	}
	if conns != nil {
		srv.ConnState = conns.ConnState
	}
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	if o.PingInterval > 0 {
		srv.HTTP2 = &http.HTTP2Config{SendPingTimeout: o.PingInterval, PingTimeout: PingAckTimeout}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Grace)
	defer cancel()
	longLivedDone := make(chan error, 1)
	go func() { longLivedDone <- longLived.Shutdown(shutdownCtx) }()
	err := srv.Shutdown(shutdownCtx)
	return errors.Join(err, <-longLivedDone)
}
