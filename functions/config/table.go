package config

import (
	"strconv"
	"time"

	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/internal/connlimit"
	"github.com/heraldevents/herald/leasestore"
)

// Variable names.
const (
	EnvFunction        = "HERALD_FUNCTION"
	EnvAddr            = "HERALD_ADDR"
	EnvPort            = "PORT"
	EnvDevToken        = "HERALD_DEV_TOKEN"
	EnvTokens          = "HERALD_TOKENS"
	EnvTokensFile      = "HERALD_TOKENS_FILE"
	EnvTopicURL        = "HERALD_TOPIC_URL"
	EnvStoreURL        = "HERALD_STORE_URL"
	EnvSource          = "HERALD_SOURCE"
	EnvReceiveWait     = "HERALD_RECEIVE_WAIT"
	EnvMaxLeaseBytes   = "HERALD_MAX_LEASE_BYTES"
	EnvReconnectGrace  = "HERALD_RECONNECT_GRACE"
	EnvQueueIdleWindow = "HERALD_QUEUE_IDLE_WINDOW"
	EnvDeliveryLimit   = "HERALD_DELIVERY_LIMIT"
	EnvQueueMessageTTL = "HERALD_QUEUE_MESSAGE_TTL"
	EnvQueueMaxLength  = "HERALD_QUEUE_MAX_LENGTH"
	EnvSSEKeepAlive    = "HERALD_SSE_KEEPALIVE"
	EnvSSEAckDelay     = "HERALD_SSE_ACK_DELAY"
	EnvReapInterval    = "HERALD_REAP_INTERVAL"
	// EnvStreamWriteTimeout is read by the servers (local, Cloud Run).
	EnvStreamWriteTimeout = "HERALD_STREAM_WRITE_TIMEOUT"
	// EnvPprofAddr, local only, serves Go's net/http/pprof profiles on a
	// second listener: for profiling the server under a benchmark.
	EnvPprofAddr      = "HERALD_PPROF_ADDR"
	EnvClaimRetention = "HERALD_CLAIM_RETENTION"
	EnvPublishTimeout = "HERALD_PUBLISH_TIMEOUT"
	// EnvIdempotencyWindow is how long a publish's idempotency key is
	// remembered.
	EnvIdempotencyWindow = "HERALD_IDEMPOTENCY_WINDOW"
	EnvWSPollWait        = "HERALD_WS_POLL_WAIT"
	EnvWSSessionTTL      = "HERALD_WS_SESSION_TTL"
	EnvWSPingInterval    = "HERALD_WS_PING_INTERVAL"
	// EnvHTTP2PingInterval is read by the servers (local, Cloud Run).
	EnvHTTP2PingInterval = "HERALD_HTTP2_PING_INTERVAL"
	// EnvProcessHeartbeat is read by the servers (local, Cloud Run): the
	// hub's heartbeat, 0 to serve non-durable streams without a hub.
	EnvProcessHeartbeat = "HERALD_PROCESS_HEARTBEAT"
	// EnvLogLevel is read by every entrypoint.
	EnvLogLevel = "HERALD_LOG_LEVEL"
	// The identity-provider variables (package auth/jwtauth, docs/auth.md).
	EnvJWTIssuer           = "HERALD_JWT_ISSUER"
	EnvJWTJWKSURL          = "HERALD_JWT_JWKS_URL"
	EnvJWTAudience         = "HERALD_JWT_AUDIENCE"
	EnvJWTPermissionsClaim = "HERALD_JWT_PERMISSIONS_CLAIM"
	EnvJWTPrincipalClaim   = "HERALD_JWT_PRINCIPAL_CLAIM"
	EnvJWTAlgorithms       = "HERALD_JWT_ALGORITHMS"
	EnvJWTScopePrefix      = "HERALD_JWT_SCOPE_PREFIX"
	EnvJWTGrants           = "HERALD_JWT_GRANTS"
	// EnvCORSOrigins lists the browser origins allowed to call Herald
	// (CORS) and to open its WebSocket.
	EnvCORSOrigins = "HERALD_CORS_ORIGINS"
	// EnvMaxInflightBytes and EnvMaxConcurrentPublishes are the admission
	// bounds of the servers (local, Cloud Run; functions/httpx.Admission).
	EnvMaxInflightBytes       = "HERALD_MAX_INFLIGHT_BYTES"
	EnvMaxConcurrentPublishes = "HERALD_MAX_CONCURRENT_PUBLISHES"
	// EnvMaxConcurrentStreamOpens bounds the stream opens in progress at
	// once (delivery.StreamConfig.MaxOpening).
	EnvMaxConcurrentStreamOpens = "HERALD_MAX_CONCURRENT_STREAM_OPENS"
	// EnvMaxConns, EnvMaxConnsPerClient and EnvHealthConnReserve bound the
	// client connections of the servers (local, Cloud Run;
	// internal/connlimit).
	EnvMaxConns          = "HERALD_MAX_CONNS"
	EnvMaxConnsPerClient = "HERALD_MAX_CONNS_PER_CLIENT"
	EnvHealthConnReserve = "HERALD_HEALTH_CONN_RESERVE"
	// EnvConsole switches the web console (package functions/console)
	// on or off where a process serves every route.
	EnvConsole = "HERALD_CONSOLE"
	// The console's sign-in through the identity provider (package
	// functions/consoleauth, docs/console.md).
	EnvConsoleOIDCClientID     = "HERALD_CONSOLE_OIDC_CLIENT_ID"
	EnvConsoleOIDCClientSecret = "HERALD_CONSOLE_OIDC_CLIENT_SECRET"
	EnvConsoleOIDCScopes       = "HERALD_CONSOLE_OIDC_SCOPES"
	EnvConsoleOIDCRedirectURL  = "HERALD_CONSOLE_OIDC_REDIRECT_URL"
	EnvConsoleSessionKey       = "HERALD_CONSOLE_SESSION_KEY"
	// EnvWebhookAllow and EnvWebhookConcurrency configure webhook
	// delivery (docs/webhooks.md).
	EnvWebhookAllow       = "HERALD_WEBHOOK_ALLOW"
	EnvWebhookConcurrency = "HERALD_WEBHOOK_CONCURRENCY"
	// EnvWebhookBreakerThreshold and EnvWebhookBreakerCooldown tune the
	// circuit breaker of each webhook endpoint (docs/webhooks.md).
	EnvWebhookBreakerThreshold = "HERALD_WEBHOOK_BREAKER_THRESHOLD"
	EnvWebhookBreakerCooldown  = "HERALD_WEBHOOK_BREAKER_COOLDOWN"
)

// The standard OpenTelemetry variables every entrypoint honours. Package
// internal/telemetry reads them through the OpenTelemetry SDK and its
// autoexport package when the process starts (telemetry.Setup), not
// through Load; docs/telemetry.md says what each does.
const (
	EnvOTelSDKDisabled        = "OTEL_SDK_DISABLED"
	EnvOTelServiceName        = "OTEL_SERVICE_NAME"
	EnvOTelResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
	EnvOTelTracesExporter     = "OTEL_TRACES_EXPORTER"
	EnvOTelMetricsExporter    = "OTEL_METRICS_EXPORTER"
	EnvOTelOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTelOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTelPrometheusHost     = "OTEL_EXPORTER_PROMETHEUS_HOST"
	EnvOTelPrometheusPort     = "OTEL_EXPORTER_PROMETHEUS_PORT"
)

// Defaults.
const (
	DefaultAddr          = "127.0.0.1:8080"
	DefaultPort          = "8080"
	DefaultDevToken      = "dev-token"
	DefaultTopicURL      = "mem://herald"
	DefaultStoreURL      = "mem://herald/key"
	DefaultSource        = "/herald"
	DefaultReceiveWait   = time.Duration(0)
	DefaultMaxLeaseBytes = leasestore.DefaultMaxPayloadBytes
	// MaxReceiveWait bounds HERALD_RECEIVE_WAIT: a pull should answer well
	// inside API Gateway's 30-second integration timeout.
	MaxReceiveWait = 20 * time.Second
	// MinLeaseBytes and MaxLeaseBytes bound HERALD_MAX_LEASE_BYTES; above
	// 350,000 a lease may not fit a DynamoDB item (Firestore allows up to
	// 1 MiB).
	MinLeaseBytes = 4 << 10
	MaxLeaseBytes = 1_000_000
	// MinCloudTokenLength is the shortest token a cloud profile accepts.
	MinCloudTokenLength = 16
	// The notifications API defaults: the reconnect grace of a non-durable queue, the
	// idle window of a durable queue, the delivery limit past which an
	// event is dead-lettered.
	DefaultReconnectGrace  = delivery.DefaultReconnectGrace
	DefaultQueueIdleWindow = delivery.DefaultQueueIdleWindow
	DefaultDeliveryLimit   = leasestore.DefaultDeliveryLimit
	// DefaultSSEKeepAlive is the interval of SSE keep-alive comments, well
	// inside the idle timeouts of common proxies and load balancers
	// (delivery.DefaultKeepAlive).
	DefaultSSEKeepAlive = delivery.DefaultKeepAlive
	// DefaultSSEAckDelay is how long the durable SSE stream waits before it
	// acknowledges an event it wrote (delivery.DefaultAutoAckDelay).
	DefaultSSEAckDelay = delivery.DefaultAutoAckDelay
	// DefaultClaimRetention is how long a claim-check claim is kept:
	// delivery.DefaultClaimRetention, 336h (SQS's 14-day maximum
	// retention).
	DefaultClaimRetention = delivery.DefaultClaimRetention
	// MinClaimRetention and MaxClaimRetention bound HERALD_CLAIM_RETENTION.
	MinClaimRetention = time.Hour
	MaxClaimRetention = 8760 * time.Hour
	// DefaultPublishTimeout bounds the broker's part of a publish:
	// delivery.DefaultPublishTimeout, 5s.
	DefaultPublishTimeout = delivery.DefaultPublishTimeout
	// MinPublishTimeout and MaxPublishTimeout bound HERALD_PUBLISH_TIMEOUT;
	// the maximum stays inside API Gateway's 29-second integration
	// timeout, so the client gets success:false rather than a gateway 504.
	MinPublishTimeout = 100 * time.Millisecond
	MaxPublishTimeout = 25 * time.Second
	// DefaultReapInterval is how often the local adapter runs the
	// idle-queue reaper; MinReapInterval and MaxReapInterval bound it.
	DefaultReapInterval = 5 * time.Second
	MinReapInterval     = 100 * time.Millisecond
	MaxReapInterval     = time.Hour
	// MaxReconnectGrace bounds HERALD_RECONNECT_GRACE, MaxQueueIdleWindow
	// HERALD_QUEUE_IDLE_WINDOW and MaxQueueMessageTTL
	// HERALD_QUEUE_MESSAGE_TTL (a year).
	MaxReconnectGrace  = 24 * time.Hour
	MaxQueueIdleWindow = 8760 * time.Hour
	MaxQueueMessageTTL = 8760 * time.Hour
	// MaxSSEKeepAlive and MaxSSEAckDelay bound the SSE settings.
	MaxSSEKeepAlive = 5 * time.Minute
	MaxSSEAckDelay  = time.Minute
	// DefaultStreamWriteTimeout is how long a stream waits for its client
	// to take one frame (delivery.DefaultStreamWriteTimeout);
	// MinStreamWriteTimeout and MaxStreamWriteTimeout bound it.
	DefaultStreamWriteTimeout = delivery.DefaultStreamWriteTimeout
	MinStreamWriteTimeout     = time.Second
	MaxStreamWriteTimeout     = 5 * time.Minute
	// DefaultWSPingInterval is how often the WebSocket bridge pings a
	// client; a client that answers nothing for two intervals is
	// disconnected (docs/websocket.md, "Keep-alive"). Package
	// functions/wsbridge uses it as its own default.
	DefaultWSPingInterval = 30 * time.Second
	// MinWSPingInterval and MaxWSPingInterval bound HERALD_WS_PING_INTERVAL.
	MinWSPingInterval = time.Second
	MaxWSPingInterval = 5 * time.Minute
	// MaxDeliveryLimit bounds HERALD_DELIVERY_LIMIT.
	MaxDeliveryLimit = 1000
	// DefaultWSPollWait is how long the API Gateway WebSocket function's
	// pull for one demand frame waits at the broker for events; MaxWSPollWait
	// bounds it well inside API Gateway's 29-second integration timeout
	// (the invocation also posts the events and persists the state).
	// Package functions/wslambda uses them as its own defaults.
	DefaultWSPollWait = 5 * time.Second
	MaxWSPollWait     = 20 * time.Second
	// DefaultWSSessionTTL is how long a session of the API Gateway
	// WebSocket function stays attached without a frame: API Gateway's
	// idle timeout, 10 minutes. MinWSSessionTTL and MaxWSSessionTTL bound
	// it (API Gateway's maximum connection duration is 2 hours).
	DefaultWSSessionTTL = 10 * time.Minute
	MinWSSessionTTL     = time.Minute
	MaxWSSessionTTL     = 2 * time.Hour
	// DefaultHTTP2PingInterval is how long an HTTP/2 connection may go
	// without a frame from the client before the server sends it a PING:
	// half the shortest common load-balancer idle timeout (60 s), so an idle
	// gRPC stream is never quiet for long enough to be cut. The notifications API defines
	// no keep-alive message; see package functions/grpcapi, "Keep-alive".
	DefaultHTTP2PingInterval = 30 * time.Second
	// DefaultProcessHeartbeat is the hub's heartbeat
	// (docs/streams-at-scale.md); MinProcessHeartbeat and
	// MaxProcessHeartbeat bound a non-zero HERALD_PROCESS_HEARTBEAT. The
	// store counts a process dead after five missed heartbeats of the
	// default (leasestore.DefaultProcessTTL), so a longer heartbeat needs
	// a longer TTL: the bound keeps three within it.
	DefaultProcessHeartbeat = delivery.DefaultHubHeartbeat
	MinProcessHeartbeat     = 100 * time.Millisecond
	MaxProcessHeartbeat     = 3 * time.Second
	// MinHTTP2PingInterval and MaxHTTP2PingInterval bound a non-zero
	// HERALD_HTTP2_PING_INTERVAL ("0s" turns the PINGs off).
	MinHTTP2PingInterval = time.Second
	MaxHTTP2PingInterval = 10 * time.Minute
	// DefaultLogLevel logs one access line per request and every warning;
	// warn keeps only warnings and errors (no access lines).
	DefaultLogLevel = "info"
	// DefaultMaxInflightBytes bounds the request body bytes one server
	// process holds at once (64 MiB: two of the largest publish batches);
	// past it requests get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED).
	// MinMaxInflightBytes and MaxMaxInflightBytes bound a non-zero
	// HERALD_MAX_INFLIGHT_BYTES ("0" removes the bound).
	DefaultMaxInflightBytes = 64 << 20
	MinMaxInflightBytes     = 1 << 20
	MaxMaxInflightBytes     = 64 << 30
	// DefaultMaxConcurrentPublishes bounds the publish requests (REST and
	// gRPC, single or batch) one server process handles at once; past it
	// they get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED).
	// MaxMaxConcurrentPublishes bounds HERALD_MAX_CONCURRENT_PUBLISHES
	// ("0" removes the bound).
	DefaultMaxConcurrentPublishes = 256
	MaxMaxConcurrentPublishes     = 100_000
	// DefaultMaxConcurrentStreamOpens bounds the stream opens (SSE, gRPC,
	// WebSocket; every kind) one server process has in progress at once;
	// past it an open gets 503 (gRPC UNAVAILABLE) with a Retry-After of
	// 1–3 s, so that a reconnect storm is spread out instead of queueing
	// on the store. MaxMaxConcurrentStreamOpens bounds the variable.
	DefaultMaxConcurrentStreamOpens = 256
	MaxMaxConcurrentStreamOpens     = 100_000
	// ConnsAuto is the value of HERALD_MAX_CONNS and
	// HERALD_MAX_CONNS_PER_CLIENT that derives the bound from the
	// process's file-descriptor limit (connlimit.Derived): the local
	// default of both, and Cloud Run's of HERALD_MAX_CONNS. Cloud Run's
	// HERALD_MAX_CONNS_PER_CLIENT defaults to 0 (none): its connections
	// all come from Google's front end.
	ConnsAuto = "auto"
	// MinMaxConns and MaxMaxConns bound a number in HERALD_MAX_CONNS and
	// HERALD_MAX_CONNS_PER_CLIENT ("0" removes the bound).
	MinMaxConns = 1
	MaxMaxConns = 10_000_000
	// DefaultHealthConnReserve is how many connections past
	// HERALD_MAX_CONNS serve health checks only; MaxHealthConnReserve
	// bounds HERALD_HEALTH_CONN_RESERVE.
	DefaultHealthConnReserve = connlimit.DefaultHealthReserve
	MaxHealthConnReserve     = 1000
)

var (
	allProfiles   = []Profile{Local, Lambda, CloudRun}
	cloudProfiles = []Profile{Lambda, CloudRun}
	usesBroker    = Function.UsesBroker
	usesStore     = Function.UsesStore
	// authed functions check tokens: every function, all of whose routes
	// but GET /health need one.
	usesPull   = func(f Function) bool { return f == Pull || f == All }
	usesPub    = func(f Function) bool { return f == Publish || f == All }
	usesJobs   = func(f Function) bool { return f == Jobs || f == All }
	usesStream = func(f Function) bool { return f == Pull || f == All }
	usesWS     = func(f Function) bool { return f == Websocket || f == All }
	// usesLeases: functions that write leases (pulls and WebSocket streams).
	usesLeases = func(f Function) bool { return f == Pull || f == Websocket || f == All }
	// usesWebhooks: functions that check webhook URLs (destinations) or
	// push to them (jobs).
	usesWebhooks = func(f Function) bool { return f == Destinations || f == Jobs || f == All }
	// usesCORS: functions that answer browsers over HTTP (the API Gateway
	// WebSocket function answers API Gateway events only).
	usesCORS = func(f Function) bool { return f != Websocket }
	// The WebSocket bridge runs where connections can be hijacked: the
	// local adapter and Cloud Run (API Gateway pings on its own).
	wsProfiles = []Profile{Local, CloudRun}
)

var vars = []Var{
	{Name: EnvFunction, CloudDefault: string(All), Deploy: true,
		Meaning:  "which routes this process serves: publish, pull, acknowledge, destinations, jobs, websocket (the API Gateway WebSocket integration, Lambda only) or all",
		profiles: cloudProfiles,
		field:    fnField},
	{Name: EnvAddr, LocalDefault: DefaultAddr, Unit: "host:port",
		Meaning:  "listen address of the local adapter",
		profiles: []Profile{Local},
		field:    text{field: "Addr", at: func(c *Config) *string { return &c.Addr }}},
	{Name: EnvPort, CloudDefault: DefaultPort, Unit: "port",
		Meaning:  "Cloud Run's port (set by Cloud Run); the server listens on 0.0.0.0:$PORT",
		profiles: []Profile{CloudRun},
		field:    portField},
	{Name: EnvDevToken, LocalDefault: DefaultDevToken,
		Meaning:  "a bearer token with every permission, as principal \"herald:dev\"; the built-in dev-token is the default only of the local adapter on a loopback HERALD_ADDR without an identity provider, and refused elsewhere; set a token of your own (at least 16 characters beyond loopback) to opt in anywhere; no default in the cloud",
		profiles: allProfiles,
		field:    text{field: "DevToken", at: func(c *Config) *string { return &c.DevToken }}},
	{Name: EnvTokens, Unit: "JSON", Deploy: true,
		Meaning:  `bearer tokens: {"<token>": {"id": "<principal>", "permissions": ["publish:app.*", "read:events", …]}}`,
		profiles: allProfiles},
	{Name: EnvTokensFile, Unit: "path",
		Meaning:  "a file holding more tokens in the HERALD_TOKENS format",
		profiles: allProfiles},
	{Name: EnvJWTIssuer, Unit: "URL", Deploy: true,
		Meaning:  "the identity provider's issuer (iss); its /.well-known/openid-configuration names the signing keys; JWT bearer tokens are accepted beside the static ones when this or HERALD_JWT_JWKS_URL is set (docs/auth.md); https, or http to loopback",
		profiles: allProfiles},
	{Name: EnvJWTJWKSURL, Unit: "URL", Deploy: true,
		Meaning:  "the signing keys' JWKS URL, instead of discovery (iss is then checked only if HERALD_JWT_ISSUER is set too)",
		profiles: allProfiles},
	{Name: EnvJWTAudience, Unit: "list", Deploy: true,
		Meaning:  "required with either of the two above: comma-separated audiences; a token's aud (or, without aud, its client_id) must be one",
		profiles: allProfiles},
	{Name: EnvJWTPermissionsClaim, LocalDefault: jwtauth.DefaultPermissionsClaim, CloudDefault: jwtauth.DefaultPermissionsClaim, Unit: "claim", Deploy: true,
		Meaning:  "the claim holding permissions: a space-separated string or an array (with `scope`, `scp` is read too)",
		profiles: allProfiles},
	{Name: EnvJWTPrincipalClaim, LocalDefault: jwtauth.DefaultPrincipalClaim, CloudDefault: jwtauth.DefaultPrincipalClaim, Unit: "claim", Deploy: true,
		Meaning:  "the string claim that names the principal (principal_identity of published events)",
		profiles: allProfiles},
	{Name: EnvJWTAlgorithms, Unit: "list", Deploy: true,
		Meaning:  "accepted signing algorithms, comma-separated (default every asymmetric one: RS256–512, PS256–512, ES256–512, EdDSA, as the keys allow); none and HMAC are never accepted",
		profiles: allProfiles},
	{Name: EnvJWTScopePrefix, Unit: "string", Deploy: true,
		Meaning:  "cut from the front of each permission value before it is read, e.g. `herald/` for Amazon Cognito's RESOURCE-SERVER/SCOPE custom scopes; values without it grant nothing",
		profiles: allProfiles},
	{Name: EnvJWTGrants, Unit: "JSON", Deploy: true,
		Meaning:  `more permissions by principal, for issuers that mint no scopes (Google ID tokens): {"<principal>": ["publish:app.*", …]}`,
		profiles: allProfiles},
	{Name: EnvCORSOrigins, Unit: "list", Deploy: true,
		Meaning:  "browser origins (`https://app.example.com`, comma-separated; `*` for any) allowed to call the REST, stream and gRPC-Web endpoints (CORS) and to open the WebSocket; default none",
		profiles: allProfiles, uses: usesCORS},
	{Name: EnvTopicURL, LocalDefault: DefaultTopicURL, Unit: "URL", Deploy: true,
		Meaning:  "broker URL (`mem://NAME?ackdeadline=60s`, or a cloud driver's URL); required in the cloud",
		profiles: allProfiles, uses: usesBroker,
		field: text{field: "TopicURL", at: func(c *Config) *string { return &c.TopicURL }, valid: urlWithScheme}},
	{Name: EnvStoreURL, LocalDefault: DefaultStoreURL, Unit: "URL", Deploy: true,
		Meaning:  "lease store: a gocloud docstore collection URL keyed by `key` (`mem://herald/key` lives in memory only; `postgres://USER@HOST:5432/DB?table=herald` survives restarts and crashes and is shared by several Herald processes); required in the cloud",
		profiles: allProfiles, uses: usesStore,
		field: text{field: "StoreURL", at: func(c *Config) *string { return &c.StoreURL }, valid: urlWithScheme}},
	{Name: EnvSource, LocalDefault: DefaultSource, CloudDefault: DefaultSource, Deploy: true,
		Meaning:  "CloudEvents `source` of published events",
		profiles: allProfiles, uses: usesPub,
		field: text{field: "Source", at: func(c *Config) *string { return &c.Source }, valid: uriReference}},
	{Name: EnvPublishTimeout, LocalDefault: FormatDuration(DefaultPublishTimeout), CloudDefault: FormatDuration(DefaultPublishTimeout), Unit: "Go duration",
		Meaning:  "how long a publish (or a whole batch) waits for the broker to accept its events; past it, or at once while the broker is known to be unreachable, the event answers success:false and can be retried (100ms–25s)",
		profiles: allProfiles, uses: usesPub,
		field: duration("PublishTimeout", func(c *Config) *time.Duration { return &c.PublishTimeout }, MinPublishTimeout, MaxPublishTimeout)},
	{Name: EnvIdempotencyWindow, LocalDefault: FormatDuration(leasestore.DefaultIdempotencyWindow), CloudDefault: FormatDuration(leasestore.DefaultIdempotencyWindow), Unit: "Go duration",
		Meaning:  "how long a publish's Idempotency-Key is remembered: a repeat of the key within it answers the first result and publishes nothing (1m–168h)",
		profiles: allProfiles, uses: usesPub,
		field: duration("IdempotencyWindow", func(c *Config) *time.Duration { return &c.IdempotencyWindow }, leasestore.MinIdempotencyWindow, leasestore.MaxIdempotencyWindow)},
	{Name: EnvReceiveWait, LocalDefault: FormatDuration(DefaultReceiveWait), CloudDefault: FormatDuration(DefaultReceiveWait), Unit: "Go duration", Deploy: true,
		Meaning:  "how long a pull waits at the broker for new events before answering 204 (0s–20s)",
		profiles: allProfiles, uses: usesPull,
		field: duration("ReceiveWait", func(c *Config) *time.Duration { return &c.ReceiveWait }, 0, MaxReceiveWait)},
	{Name: EnvMaxLeaseBytes, LocalDefault: strconv.Itoa(DefaultMaxLeaseBytes), CloudDefault: strconv.Itoa(DefaultMaxLeaseBytes), Unit: "bytes", Deploy: true,
		Meaning:  "most encoded event bytes in one lease; a pull returns fewer events rather than pass it (4096–1000000; keep ≤ 350,000 on DynamoDB)",
		profiles: allProfiles, uses: usesLeases,
		field: count("MaxLeaseBytes", func(c *Config) *int { return &c.MaxLeaseBytes }, MinLeaseBytes, MaxLeaseBytes)},
	{Name: EnvReconnectGrace, LocalDefault: FormatDuration(DefaultReconnectGrace), CloudDefault: FormatDuration(DefaultReconnectGrace), Unit: "Go duration",
		Meaning:  "how long a non-durable queue outlives its last stream before the reaper deletes it; a reconnect token is NOT_FOUND after it (1s–24h)",
		profiles: allProfiles, uses: usesJobs,
		field: duration("ReconnectGrace", func(c *Config) *time.Duration { return &c.ReconnectGrace }, time.Second, MaxReconnectGrace)},
	{Name: EnvQueueIdleWindow, LocalDefault: FormatDuration(DefaultQueueIdleWindow), CloudDefault: FormatDuration(DefaultQueueIdleWindow), Unit: "Go duration",
		Meaning:  "how long a durable queue lives without an attached consumer before the reaper deletes it with what it holds (1s–8760h)",
		profiles: allProfiles, uses: usesJobs,
		field: duration("QueueIdleWindow", func(c *Config) *time.Duration { return &c.QueueIdleWindow }, time.Second, MaxQueueIdleWindow)},
	{Name: EnvClaimRetention, LocalDefault: FormatDuration(DefaultClaimRetention), CloudDefault: FormatDuration(DefaultClaimRetention), Unit: "Go duration",
		Meaning:  "how long the reap-idle-queues job keeps a claim-check claim (an event too big for the broker, stored in the lease store); keep it at least the broker's message retention (SQS: 14 days = 336h) or a reference still queued finds its claim gone and is dropped (1h–8760h)",
		profiles: allProfiles, uses: usesJobs,
		field: duration("ClaimRetention", func(c *Config) *time.Duration { return &c.ClaimRetention }, MinClaimRetention, MaxClaimRetention)},
	{Name: EnvWebhookAllow, Unit: "list",
		Meaning:  "webhook endpoints opened past the address policy: comma-separated CIDR prefixes, addresses and host names (`127.0.0.1/32,localhost`) a webhook may reach although they are loopback, private or link-local, and over http; default none: public https endpoints only (see webhooks.md)",
		profiles: allProfiles, uses: usesWebhooks},
	{Name: EnvWebhookConcurrency, LocalDefault: strconv.Itoa(delivery.DefaultWebhookConcurrency), CloudDefault: strconv.Itoa(delivery.DefaultWebhookConcurrency), Unit: "deliveries",
		Meaning:  "deliveries in flight per webhook destination during a push; a destination created with ordered: true has one (1–100)",
		profiles: allProfiles, uses: usesJobs,
		field: count("WebhookConcurrency", func(c *Config) *int { return &c.WebhookConcurrency }, 1, 100)},
	{Name: EnvWebhookBreakerThreshold, LocalDefault: strconv.Itoa(delivery.DefaultBreakerThreshold), CloudDefault: strconv.Itoa(delivery.DefaultBreakerThreshold), Unit: "attempts",
		Meaning:  "consecutive failed attempts that open a webhook endpoint's circuit breaker (1–100)",
		profiles: allProfiles, uses: usesJobs,
		field: count("WebhookBreakerThreshold", func(c *Config) *int { return &c.WebhookBreakerThreshold }, 1, 100)},
	{Name: EnvWebhookBreakerCooldown, LocalDefault: FormatDuration(delivery.DefaultBreakerCooldown), CloudDefault: FormatDuration(delivery.DefaultBreakerCooldown), Unit: "Go duration",
		Meaning:  "how long an open circuit breaker makes no attempt before it lets one probe through (1s–24h)",
		profiles: allProfiles, uses: usesJobs,
		field: duration("WebhookBreakerCooldown", func(c *Config) *time.Duration { return &c.WebhookBreakerCooldown }, time.Second, 24*time.Hour)},
	{Name: EnvDeliveryLimit, LocalDefault: strconv.Itoa(DefaultDeliveryLimit), CloudDefault: strconv.Itoa(DefaultDeliveryLimit), Unit: "deliveries",
		Meaning:  "an event whose lifetime delivery count would pass this is moved to the dead-letter queue instead of delivered again (1–1000)",
		profiles: allProfiles, uses: usesStore,
		field: count("DeliveryLimit", func(c *Config) *int { return &c.DeliveryLimit }, 1, MaxDeliveryLimit)},
	{Name: EnvQueueMessageTTL, LocalDefault: FormatDuration(0), CloudDefault: FormatDuration(0), Unit: "Go duration",
		Meaning:  "a queue's message TTL: an event a queue holds longer than this after it was published is dead-lettered (reason EXPIRED) instead of delivered; 0s = none; applies to queues created afterwards (0s–8760h)",
		profiles: allProfiles, uses: usesStore,
		field: duration("QueueMessageTTL", func(c *Config) *time.Duration { return &c.QueueMessageTTL }, 0, MaxQueueMessageTTL)},
	{Name: EnvQueueMaxLength, LocalDefault: "0", CloudDefault: "0", Unit: "events",
		Meaning:  "a queue's maximum length: past it the oldest events Herald holds for the queue are dead-lettered (reason MAXLEN); 0 = none; counts leased and requeued events, not the broker backlog; applies to queues created afterwards (0–1000)",
		profiles: allProfiles, uses: usesStore,
		field: count("QueueMaxLength", func(c *Config) *int { return &c.QueueMaxLength }, 0, leasestore.MaxInFlight)},
	{Name: EnvSSEKeepAlive, LocalDefault: FormatDuration(DefaultSSEKeepAlive), CloudDefault: FormatDuration(DefaultSSEKeepAlive), Unit: "Go duration",
		Meaning:  "interval of `: keep-alive` comment lines on SSE streams, so idle connections survive proxies (1s–5m)",
		profiles: allProfiles, uses: usesStream,
		field: duration("SSEKeepAlive", func(c *Config) *time.Duration { return &c.SSEKeepAlive }, time.Second, MaxSSEKeepAlive)},
	{Name: EnvSSEAckDelay, LocalDefault: FormatDuration(DefaultSSEAckDelay), CloudDefault: FormatDuration(DefaultSSEAckDelay), Unit: "Go duration",
		Meaning:  "how long GET /api/v1beta/events/stream-durable waits after writing an event before it acknowledges it; 0s = at once (0s–1m)",
		profiles: allProfiles, uses: usesStream,
		field: duration("SSEAckDelay", func(c *Config) *time.Duration { return &c.SSEAckDelay }, 0, MaxSSEAckDelay)},
	{Name: EnvProcessHeartbeat, LocalDefault: FormatDuration(DefaultProcessHeartbeat), CloudDefault: FormatDuration(DefaultProcessHeartbeat), Unit: "Go duration",
		Meaning:  "servers (local, Cloud Run): how often the process writes its process record and reads the notices other processes left it; non-durable streams are served from the process's memory through one broker subscription per process (docs/streams-at-scale.md), and a reconnect on another process waits for the home's next heartbeat; 0s serves them from the store, a subscription per stream, as the Lambda functions do (0s, or 100ms–3s)",
		profiles: []Profile{Local, CloudRun}, uses: usesStream,
		field: orOff(duration("ProcessHeartbeat", func(c *Config) *time.Duration { return &c.ProcessHeartbeat }, MinProcessHeartbeat, MaxProcessHeartbeat))},
	{Name: EnvStreamWriteTimeout, LocalDefault: FormatDuration(DefaultStreamWriteTimeout), CloudDefault: FormatDuration(DefaultStreamWriteTimeout), Unit: "Go duration",
		Meaning:  "servers (local, Cloud Run): how long an SSE, gRPC or WebSocket stream waits for its client to take one frame before it drops the client, whose unsettled events go back to the queue (1s–5m)",
		profiles: []Profile{Local, CloudRun}, uses: usesStream,
		field: duration("StreamWriteTimeout", func(c *Config) *time.Duration { return &c.StreamWriteTimeout }, MinStreamWriteTimeout, MaxStreamWriteTimeout)},
	{Name: EnvHTTP2PingInterval, LocalDefault: FormatDuration(DefaultHTTP2PingInterval), CloudDefault: FormatDuration(DefaultHTTP2PingInterval), Unit: "Go duration",
		Meaning:  "servers (local, Cloud Run): an HTTP/2 connection (gRPC) that has sent no frame for this long gets a PING from the server, so idle streams survive load balancers' idle timeouts; 0s = none (0s, or 1s–10m)",
		profiles: []Profile{Local, CloudRun},
		field:    orOff(duration("HTTP2PingInterval", func(c *Config) *time.Duration { return &c.HTTP2PingInterval }, MinHTTP2PingInterval, MaxHTTP2PingInterval))},
	{Name: EnvMaxInflightBytes, LocalDefault: strconv.Itoa(DefaultMaxInflightBytes), CloudDefault: strconv.Itoa(DefaultMaxInflightBytes), Unit: "bytes",
		Meaning:  "servers (local, Cloud Run): most request body bytes being processed at once; past it requests get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED) unread, which bounds memory (docs/limits.md); 0 = no bound (0, or 1048576–68719476736)",
		profiles: []Profile{Local, CloudRun},
		field:    orOff(count64("MaxInflightBytes", func(c *Config) *int64 { return &c.MaxInflightBytes }, MinMaxInflightBytes, MaxMaxInflightBytes))},
	{Name: EnvMaxConcurrentPublishes, LocalDefault: strconv.Itoa(DefaultMaxConcurrentPublishes), CloudDefault: strconv.Itoa(DefaultMaxConcurrentPublishes), Unit: "requests",
		Meaning:  "servers (local, Cloud Run): most publish requests (REST and gRPC, single or batch) being processed at once; past it they get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED); 0 = no bound (0, or 1–100000)",
		profiles: []Profile{Local, CloudRun}, uses: usesPub,
		field: orOff(count64("MaxConcurrentPublishes", func(c *Config) *int64 { return &c.MaxConcurrentPublishes }, 1, MaxMaxConcurrentPublishes))},
	{Name: EnvMaxConcurrentStreamOpens, LocalDefault: strconv.Itoa(DefaultMaxConcurrentStreamOpens), CloudDefault: strconv.Itoa(DefaultMaxConcurrentStreamOpens), Unit: "opens",
		Meaning:  "servers (local, Cloud Run): most stream opens (SSE, gRPC, WebSocket; durable and non-durable) in progress at once; past it an open gets 503 (gRPC UNAVAILABLE) with a Retry-After of 1–3 s, spread so that a reconnect storm comes back spread out; open streams are never ended for it; 0 = no bound (0, or 1–100000)",
		profiles: []Profile{Local, CloudRun},
		field:    orOff(count64("MaxConcurrentStreamOpens", func(c *Config) *int64 { return &c.MaxConcurrentStreamOpens }, 1, MaxMaxConcurrentStreamOpens))},
	{Name: EnvMaxConns, LocalDefault: ConnsAuto, CloudDefault: ConnsAuto, Unit: "connections",
		Meaning:  "servers (local, Cloud Run): most client connections the process holds, the health reserve aside; past it the longest-idle connection is closed for the new one, and when none is idle the new one is refused with 503 (docs/limits.md); `auto` = the file-descriptor limit (RLIMIT_NOFILE) less an eighth (64–1024) for the broker, store and files, at most 50000; 0 = no bound (auto, 0, or 1–10000000)",
		profiles: []Profile{Local, CloudRun},
		field:    connsField("MaxConns", func(c *Config) *int { return &c.MaxConns }, func() int { return connlimit.Derived(connlimit.FDLimit(), false).MaxConns })},
	{Name: EnvMaxConnsPerClient, LocalDefault: ConnsAuto, CloudDefault: "0", Unit: "connections",
		Meaning:  "servers (local, Cloud Run): most connections from one client address (the TCP peer: an IPv4 address or an IPv6 /64; forwarded headers are not read); past it that client's longest-idle connection is closed for its new one, else the new one is refused with 503; `auto` = a quarter of HERALD_MAX_CONNS's auto value; 0 = no bound, Cloud Run's default, where every connection comes from Google's front end (auto, 0, or 1–10000000)",
		profiles: []Profile{Local, CloudRun},
		field:    connsField("MaxConnsPerClient", func(c *Config) *int { return &c.MaxConnsPerClient }, func() int { return connlimit.Derived(connlimit.FDLimit(), true).MaxPerClient })},
	{Name: EnvHealthConnReserve, LocalDefault: strconv.Itoa(DefaultHealthConnReserve), CloudDefault: strconv.Itoa(DefaultHealthConnReserve), Unit: "connections",
		Meaning:  "servers (local, Cloud Run): connections admitted past HERALD_MAX_CONNS when every connection is busy, which serve health checks only (GET /health, /api/v1beta/health, /health/ready, gRPC health) and answer anything else 503 (0–1000)",
		profiles: []Profile{Local, CloudRun},
		field:    count("HealthConnReserve", func(c *Config) *int { return &c.HealthConnReserve }, 0, MaxHealthConnReserve)},
	{Name: EnvWSPingInterval, LocalDefault: FormatDuration(DefaultWSPingInterval), CloudDefault: FormatDuration(DefaultWSPingInterval), Unit: "Go duration",
		Meaning:  "how often GET /api/v1beta/events/websocket sends a WebSocket ping; a client that sends nothing (no pong, no frame) for two intervals is disconnected (local adapter and Cloud Run) (1s–5m)",
		profiles: wsProfiles, uses: usesStream,
		field: duration("WSPingInterval", func(c *Config) *time.Duration { return &c.WSPingInterval }, MinWSPingInterval, MaxWSPingInterval)},
	{Name: EnvConsole, LocalDefault: "on", CloudDefault: "on", Unit: "on|off",
		Meaning:  "the web console at /console/ (docs/console.md), served by a process that serves every route (the local adapter, Cloud Run's service, a Lambda function with HERALD_FUNCTION=all): static pages that call the API with the operator's own token; `off` leaves it out",
		profiles: allProfiles,
		field:    consoleField},
	{Name: EnvConsoleOIDCClientID, Unit: "string",
		Meaning:  "the console's client id at the identity provider of HERALD_JWT_ISSUER (required with it): the console then signs in there with the authorization-code flow and PKCE, beside pasting a token (docs/console.md); unset: tokens are pasted",
		profiles: allProfiles},
	{Name: EnvConsoleOIDCClientSecret, Unit: "secret",
		Meaning:  "the console client's secret, for an identity provider that registers it as a confidential client; unset: a public client, which PKCE alone protects",
		profiles: allProfiles},
	{Name: EnvConsoleOIDCScopes, LocalDefault: "openid", CloudDefault: "openid", Unit: "list",
		Meaning:  "the scopes the console asks for, comma- or space-separated; `openid` is required, and the others are what makes the identity provider grant Herald's permissions (e.g. `openid manage:destinations inspect-and-replay-all-dlq`)",
		profiles: allProfiles},
	{Name: EnvConsoleOIDCRedirectURL, Unit: "URL",
		Meaning:  "the callback registered at the identity provider, ending in /console/callback; https, or http to loopback; unset: derived from each request's host (`https://HOST/console/callback`, `http://` on a loopback host served without TLS)",
		profiles: allProfiles},
	{Name: EnvConsoleSessionKey, Unit: "base64",
		Meaning:  "32 random bytes, base64, that seal the console's session cookies (AES-256-GCM); give every instance the same key so a session survives restarts and load balancing; unset: a random key per process",
		profiles: allProfiles},
	{Name: EnvLogLevel, LocalDefault: DefaultLogLevel, CloudDefault: DefaultLogLevel, Unit: "level",
		Meaning:  "least severe log level written: debug, info (one access-log line per request, the default), warn or error; logs are JSON lines in the clouds and text locally",
		profiles: allProfiles,
		field:    logLevelField},
	{Name: EnvOTelSDKDisabled, LocalDefault: "false", CloudDefault: "false", Unit: "boolean", Deploy: true,
		Meaning:  "telemetry: `true` turns OpenTelemetry off whatever the other OTEL_* variables say (docs/telemetry.md)",
		profiles: allProfiles},
	{Name: EnvOTelServiceName, LocalDefault: "herald", CloudDefault: "herald", Unit: "name", Deploy: true,
		Meaning:  "telemetry: the `service.name` resource attribute of spans and metrics",
		profiles: allProfiles},
	{Name: EnvOTelResourceAttributes, Unit: "list", Deploy: true,
		Meaning:  "telemetry: more resource attributes, `key=value` comma-separated (`deployment.environment.name=prod`)",
		profiles: allProfiles},
	{Name: EnvOTelTracesExporter, LocalDefault: "none", CloudDefault: "none", Unit: "name", Deploy: true,
		Meaning:  "telemetry: where spans go: `otlp`, `console` or `none`; unset reads as `none` (telemetry off), unlike the specification's `otlp`",
		profiles: allProfiles},
	{Name: EnvOTelMetricsExporter, LocalDefault: "none", CloudDefault: "none", Unit: "name", Deploy: true,
		Meaning:  "telemetry: where metrics go: `otlp`, `prometheus` (local adapter and Cloud Run: nothing scrapes a frozen Lambda function), `console` or `none`; unset reads as `none`",
		profiles: allProfiles},
	{Name: EnvOTelOTLPEndpoint, LocalDefault: "http://localhost:4318", CloudDefault: "http://localhost:4318", Unit: "URL", Deploy: true,
		Meaning:  "telemetry: the OTLP collector (on Lambda a collector extension, on Cloud Run a sidecar, both on localhost)",
		profiles: allProfiles},
	{Name: EnvOTelOTLPProtocol, LocalDefault: "http/protobuf", CloudDefault: "http/protobuf", Unit: "name", Deploy: true,
		Meaning:  "telemetry: the OTLP transport: `http/protobuf` or `grpc`",
		profiles: allProfiles},
	{Name: EnvOTelPrometheusHost, LocalDefault: "localhost", CloudDefault: "localhost", Unit: "host", Deploy: true,
		Meaning:  "telemetry, servers (local, Cloud Run): the address the Prometheus exporter serves `/metrics` on when OTEL_METRICS_EXPORTER=prometheus",
		profiles: []Profile{Local, CloudRun}},
	{Name: EnvOTelPrometheusPort, LocalDefault: "9464", CloudDefault: "9464", Unit: "port", Deploy: true,
		Meaning:  "telemetry, servers (local, Cloud Run): the Prometheus exporter's port",
		profiles: []Profile{Local, CloudRun}},
	{Name: EnvReapInterval, LocalDefault: FormatDuration(DefaultReapInterval), Unit: "Go duration",
		Meaning:  "local only: how often the idle-queue reaper runs (the clouds run the reap-idle-queues job on a schedule) (100ms–1h)",
		profiles: []Profile{Local},
		field:    duration("ReapInterval", func(c *Config) *time.Duration { return &c.ReapInterval }, MinReapInterval, MaxReapInterval)},
	{Name: EnvPprofAddr, Unit: "host:port",
		Meaning:  "local only: serve Go's runtime profiles (net/http/pprof, /debug/pprof/) on this second address, without authentication; unset serves none. For profiling on a development machine: bind it to loopback",
		profiles: []Profile{Local},
		field:    text{field: "PprofAddr", at: func(c *Config) *string { return &c.PprofAddr }, valid: hostPort}},
	{Name: EnvWSPollWait, CloudDefault: FormatDuration(DefaultWSPollWait), Unit: "Go duration", Deploy: true,
		Meaning:  "Lambda only: how long the WebSocket function's pull for one demand frame waits at the broker before it answers with the events found and an idle frame (0s–20s)",
		profiles: []Profile{Lambda}, uses: usesWS,
		field: duration("WSPollWait", func(c *Config) *time.Duration { return &c.WSPollWait }, 0, MaxWSPollWait)},
	{Name: EnvWSSessionTTL, CloudDefault: FormatDuration(DefaultWSSessionTTL), Unit: "Go duration", Deploy: true,
		Meaning:  "Lambda only: how long a WebSocket session stays attached without a demand, ack, nack or ping frame; a client silent for longer gets a fatal error frame and reconnects (1m–2h; API Gateway's idle timeout is 10m)",
		profiles: []Profile{Lambda}, uses: usesWS,
		field: duration("WSSessionTTL", func(c *Config) *time.Duration { return &c.WSSessionTTL }, MinWSSessionTTL, MaxWSSessionTTL)},
}

// Vars returns the table of every variable any profile reads.
func Vars() []Var {
	out := make([]Var, len(vars))
	for i, v := range vars {
		out[i] = v.exported()
	}
	return out
}

// exported fills v's Field and Range from its binding.
func (v Var) exported() Var {
	if v.field != nil {
		v.Field, v.Range = v.field.name(), v.field.rangeText()
	}
	return v
}

// ReadBy returns the variables entrypoint p reads when serving f.
func ReadBy(p Profile, f Function) []Var {
	var out []Var
	for _, v := range vars {
		if v.ReadBy(p, f) {
			out = append(out, v.exported())
		}
	}
	return out
}
