package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/internal/connlimit"
	"github.com/heraldevents/herald/internal/safedial"
)

// Config is the parsed environment. Every field holds its value, not a
// marker: a Config built in code starts from Defaults and is checked by
// Validate (see the package doc, "Config values").
type Config struct {
	Profile Profile
	// Function is HERALD_FUNCTION in the cloud; All locally.
	Function Function
	// Addr is the listen address: HERALD_ADDR locally, 0.0.0.0:$PORT on
	// Cloud Run, "" on Lambda.
	Addr string
	// DevToken is HERALD_DEV_TOKEN ("" for none): a token with every
	// permission, as principal auth.DevPrincipalID. The built-in
	// DefaultDevToken is the local adapter's default only on a loopback
	// Addr without an identity provider, and is refused elsewhere; a
	// token of one's own is the explicit opt-in, at least
	// MinCloudTokenLength characters beyond loopback (Validate).
	DevToken string
	// Tokens are the tokens of HERALD_TOKENS and HERALD_TOKENS_FILE.
	Tokens auth.StaticTokens
	// JWT configures the JWT verifier (the HERALD_JWT_* variables); none
	// runs unless JWT.Issuer or JWT.JWKSURL is set (JWTEnabled).
	JWT jwtauth.Config
	// WebhookAllow is HERALD_WEBHOOK_ALLOW: the hosts and prefixes a
	// webhook may reach past the address policy (package safedial).
	WebhookAllow safedial.Policy
	// WebhookConcurrency is HERALD_WEBHOOK_CONCURRENCY: deliveries in
	// flight per webhook destination.
	WebhookConcurrency int
	// WebhookBreakerThreshold is HERALD_WEBHOOK_BREAKER_THRESHOLD: the
	// consecutive failures that open an endpoint's circuit breaker.
	WebhookBreakerThreshold int
	// WebhookBreakerCooldown is HERALD_WEBHOOK_BREAKER_COOLDOWN: how long
	// an open breaker makes no attempt before one probe.
	WebhookBreakerCooldown time.Duration
	// CORSOrigins is HERALD_CORS_ORIGINS: the browser origins allowed
	// (nil for none; "*" for any).
	CORSOrigins []string
	// Console is HERALD_CONSOLE: whether a process that serves every
	// route serves the web console at /console/ (default on).
	Console bool
	// ConsoleOIDC configures the console's sign-in through the identity
	// provider (HERALD_CONSOLE_OIDC_*, HERALD_CONSOLE_SESSION_KEY); off
	// unless ConsoleOIDC.ClientID is set.
	ConsoleOIDC ConsoleOIDC
	// TopicURL is HERALD_TOPIC_URL (a pubsubx broker URL), StoreURL
	// HERALD_STORE_URL (a gocloud docstore collection URL keyed by "key"),
	// Source HERALD_SOURCE (the CloudEvents source of published events).
	TopicURL string
	StoreURL string
	Source   string
	// ReceiveWait is HERALD_RECEIVE_WAIT: how long a pull waits at the
	// broker (0–20s).
	ReceiveWait time.Duration
	// MaxLeaseBytes is HERALD_MAX_LEASE_BYTES: most encoded event bytes in
	// one lease.
	MaxLeaseBytes int
	// PublishTimeout is HERALD_PUBLISH_TIMEOUT: how long a publish waits
	// for the broker.
	PublishTimeout time.Duration
	// IdempotencyWindow is HERALD_IDEMPOTENCY_WINDOW: how long a
	// publish's idempotency key is remembered.
	IdempotencyWindow time.Duration
	// ReconnectGrace, QueueIdleWindow and DeliveryLimit are the notifications API's
	// queue lifetimes and redelivery budget.
	ReconnectGrace  time.Duration
	QueueIdleWindow time.Duration
	DeliveryLimit   int
	// ClaimRetention is HERALD_CLAIM_RETENTION: how long the
	// reap-idle-queues job keeps a claim-check claim.
	ClaimRetention time.Duration
	// QueueMessageTTL and QueueMaxLength configure queues created from
	// now on (0 = none).
	QueueMessageTTL time.Duration
	QueueMaxLength  int
	// SSEKeepAlive and SSEAckDelay tune the SSE streams; an SSEAckDelay of
	// 0 acknowledges at once (HERALD_SSE_ACK_DELAY=0s).
	SSEKeepAlive time.Duration
	SSEAckDelay  time.Duration
	// StreamWriteTimeout is HERALD_STREAM_WRITE_TIMEOUT: how long a stream
	// waits for its client to take one frame (local and Cloud Run).
	StreamWriteTimeout time.Duration
	// ReapInterval is how often the local adapter reaps idle queues
	// (HERALD_REAP_INTERVAL; local only). A test that runs the
	// reap-idle-queues job itself sets MaxReapInterval, which no test
	// outlasts.
	ReapInterval time.Duration
	// PprofAddr is where the local adapter serves net/http/pprof, as
	// host:port; "" for nowhere (HERALD_PPROF_ADDR; local only).
	PprofAddr string
	// WSPollWait and WSSessionTTL tune the API Gateway WebSocket function
	// (HERALD_WS_POLL_WAIT, HERALD_WS_SESSION_TTL; Lambda only).
	WSPollWait   time.Duration
	WSSessionTTL time.Duration
	// WSPingInterval is how often the WebSocket bridge pings a client
	// (HERALD_WS_PING_INTERVAL; local and Cloud Run).
	WSPingInterval time.Duration
	// HTTP2PingInterval is HERALD_HTTP2_PING_INTERVAL: how long an HTTP/2
	// connection may go without a frame before the server PINGs it; 0
	// sends no PINGs (local and Cloud Run).
	HTTP2PingInterval time.Duration
	// ProcessHeartbeat is HERALD_PROCESS_HEARTBEAT: the hub's heartbeat
	// (delivery.HubConfig.Heartbeat); 0 runs no hub (local and Cloud Run).
	ProcessHeartbeat time.Duration
	// LogLevel is HERALD_LOG_LEVEL: the least severe level logged (the
	// zero value is slog.LevelInfo, the default).
	LogLevel slog.Level
	// MaxInflightBytes and MaxConcurrentPublishes are
	// HERALD_MAX_INFLIGHT_BYTES and HERALD_MAX_CONCURRENT_PUBLISHES, the
	// servers' admission bounds (local and Cloud Run); 0 is no bound.
	MaxInflightBytes int64
	// MaxConcurrentStreamOpens is HERALD_MAX_CONCURRENT_STREAM_OPENS
	// (delivery.StreamConfig.MaxOpening; local and Cloud Run); 0 is no
	// bound.
	MaxConcurrentStreamOpens int64
	MaxConcurrentPublishes   int64
	// MaxConns, MaxConnsPerClient and HealthConnReserve are
	// HERALD_MAX_CONNS, HERALD_MAX_CONNS_PER_CLIENT and
	// HERALD_HEALTH_CONN_RESERVE, the servers' connection bounds (local
	// and Cloud Run; ConnLimits); 0 is no bound. "auto" lands here as
	// the number it derives.
	MaxConns          int
	MaxConnsPerClient int
	HealthConnReserve int
}

// ConnLimits returns the servers' connection bounds
// (internal/connlimit).
func (c Config) ConnLimits() connlimit.Limits {
	return connlimit.Limits{MaxConns: c.MaxConns, MaxPerClient: c.MaxConnsPerClient, HealthReserve: c.HealthConnReserve}
}

// PingInterval returns how long an HTTP/2 connection may go without a
// frame from the client before the server PINGs it; 0 means never.
func (c Config) PingInterval() time.Duration { return c.HTTP2PingInterval }

// JWTEnabled reports whether JWT bearer tokens are accepted.
func (c Config) JWTEnabled() bool { return c.JWT.Issuer != "" || c.JWT.JWKSURL != "" }

// AuthMode names the kinds of bearer token accepted, for the start-up
// log line: "development token (the built-in default)" or "development
// token", "static tokens (N)"
// and "JWT (issuer URL)" joined by " + ", or "none" (every request
// refused). It holds no token: the tokens are counted, the issuer is
// public.
func (c Config) AuthMode() string {
	var kinds []string
	switch {
	case c.UsesDefaultDevToken():
		kinds = append(kinds, "development token (the built-in default)")
	case c.DevToken != "":
		kinds = append(kinds, "development token")
	}
	if n := len(c.Tokens); n > 0 {
		kinds = append(kinds, fmt.Sprintf("static tokens (%d)", n))
	}
	if c.JWTEnabled() {
		src := c.JWT.Issuer
		if src == "" {
			src = Redact(c.JWT.JWKSURL)
		}
		kinds = append(kinds, "JWT ("+src+")")
	}
	if len(kinds) == 0 {
		return "none"
	}
	return strings.Join(kinds, " + ")
}

// UsesDefaultDevToken reports whether the development token is the
// well-known default.
func (c Config) UsesDefaultDevToken() bool { return c.DevToken == DefaultDevToken }

// Defaults returns profile p's defaults: every field the profile reads
// holds its table default. No environment is read and nothing is
// required, so a cloud profile's Config still lacks its URLs and tokens.
func Defaults(p Profile) Config {
	c := Config{Profile: p, Function: All}
	for _, v := range vars {
		if v.field == nil || !v.readIn(p) {
			continue
		}
		if s := v.defaultFor(p); s != "" {
			// The table's defaults are in range (TestDefaultsAreValid).
			_ = v.field.set(&c, s)
		}
	}
	c.JWT.PermissionsClaim, c.JWT.PrincipalClaim = jwtauth.DefaultPermissionsClaim, jwtauth.DefaultPrincipalClaim
	return c
}

// Validate checks every field profile c.Profile reads against its row of
// the table: a value that means nothing (a negative duration or count, 0
// where 0 is not a value, an unknown function or log level) is refused.
// The table's ranges themselves are operational bounds (API Gateway's
// timeouts, DynamoDB's item size) that Load holds the environment to; a
// Config built in code, such as a test's 20ms keep-alive, may go past
// them. Each error names the field and its variable, e.g. `SSEKeepAlive
// (HERALD_SSE_KEEPALIVE): 0s is not a positive Go duration (the
// variable's range is 1s–5m)`; a Config that is not from Load should
// start from Defaults. DevToken is held to the development token's rules
// too: the built-in DefaultDevToken only in the local profile, on a
// loopback Addr, without an identity provider (docs/auth.md).
func (c Config) Validate() error {
	var errs []error
	for _, v := range vars {
		if v.field == nil || !v.readIn(c.Profile) {
			continue
		}
		if err := v.field.check(&c); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w; start from config.Defaults(%s)", v.field.name(), v.Name, err, c.Profile))
		}
	}
	if err := c.checkDevToken(); err != nil {
		errs = append(errs, fmt.Errorf("DevToken (%s): %w", EnvDevToken, err))
	}
	return errors.Join(errs...)
}

// FromEnv reads the process environment for profile p.
func FromEnv(p Profile) (Config, error) { return Load(p, os.LookupEnv) }

// Load reads the variables through lookup (os.LookupEnv in production):
// each row of the table that profile p reads lands in its field, from
// the environment or else the row's default. Every error names the
// variable and says what is expected; none repeats a token.
func Load(p Profile, lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	var errs []error
	fail := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	c := Config{Profile: p, Function: All}
	for _, v := range vars {
		if v.field == nil || !v.readIn(p) {
			continue
		}
		s := get(v.Name)
		if s == "" {
			s = v.defaultFor(p)
		}
		if s == "" {
			continue
		}
		if err := v.field.set(&c, s); err != nil {
			fail(v.Name, "%v", err)
		}
	}
	if p.Cloud() {
		if c.Function.UsesBroker() && c.TopicURL == "" {
			fail(EnvTopicURL, "required for HERALD_FUNCTION=%s: the broker URL, e.g. awssnssqs://… or gcppubsub://…", c.Function)
		}
		if c.Function.UsesStore() && c.StoreURL == "" {
			fail(EnvStoreURL, "required for HERALD_FUNCTION=%s: the lease store URL, e.g. dynamodb://TABLE?partition_key=key or firestore://…", c.Function)
		}
	}
	val := func(name string) string {
		if s := get(name); s != "" {
			return s
		}
		for _, v := range vars {
			if v.Name == name {
				return v.defaultFor(p)
			}
		}
		return ""
	}
	c.loadJWT(get, val, fail)
	c.loadConsoleOIDC(get, val, fail)
	c.loadTokens(get, fail)
	if allow, err := safedial.ParseAllowList(get(EnvWebhookAllow)); err != nil {
		fail(EnvWebhookAllow, "%v", err)
	} else {
		c.WebhookAllow = allow
	}
	c.CORSOrigins = list(get(EnvCORSOrigins))
	for _, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			fail(EnvCORSOrigins, "%v", err)
		}
	}
	return c, errors.Join(errs...)
}
