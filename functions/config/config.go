// Package config is the one source of truth for Herald's environment
// variables: the table (Vars) that the README's configuration section, the
// SAM template and the Terraform module are checked against, and the parser
// that the local adapter, the Lambda bootstrap and the Cloud Run server all
// use.
//
// Three profiles read the table. Local (the local adapter) has defaults for
// everything, including an all-powerful development token. Lambda and
// CloudRun have no default broker, store or token: a function that needs
// one refuses to start without it, with a message naming the variable.
//
// # Tokens
//
// HERALD_TOKENS holds a JSON object from bearer token to principal, and
// HERALD_TOKENS_FILE names a file holding the same:
//
//	{"s3cr3t-token-of-32-characters…": {"id": "billing", "permissions": ["publish:billing.*", "read:events", "receive:billing.*"]}}
//
// Permission names are those of package auth: read:events,
// manage:destinations, run:jobs, publish:PATTERN, receive:PATTERN,
// consume-durable-queues, create-durable-queues, delete-durable-queues,
// inspect-and-replay-all-dlq (the last four also with the notifications API's
// "event-consumer-service:" prefix) and *. An unknown name is refused.
//
// Both may be set, together with HERALD_DEV_TOKEN (a token with every
// permission); a token given twice is refused. Errors and logs name a token
// by its principal id, never by its value.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/leasestore"
)

// Profile says which entrypoint reads the environment.
type Profile int

// The profiles.
const (
	Local    Profile = iota // the local adapter (local/cmd/herald, local.Start)
	Lambda                  // the Lambda bootstrap (functions/cmd/lambda)
	CloudRun                // the Cloud Run server (functions/cmd/cloudrun)
)

// String returns the profile's name.
func (p Profile) String() string {
	switch p {
	case Local:
		return "local"
	case Lambda:
		return "lambda"
	case CloudRun:
		return "cloudrun"
	}
	return "profile(" + strconv.Itoa(int(p)) + ")"
}

// Cloud reports whether p runs in a cloud (no development defaults).
func (p Profile) Cloud() bool { return p == Lambda || p == CloudRun }

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
	// EnvPprofAddr, local only, serves Go's net/http/pprof profiles on a
	// second listener: for profiling the server under a benchmark.
	EnvPprofAddr      = "HERALD_PPROF_ADDR"
	EnvClaimRetention = "HERALD_CLAIM_RETENTION"
	EnvPublishTimeout = "HERALD_PUBLISH_TIMEOUT"
	EnvWSPollWait     = "HERALD_WS_POLL_WAIT"
	EnvWSSessionTTL   = "HERALD_WS_SESSION_TTL"
	EnvWSPingInterval = "HERALD_WS_PING_INTERVAL"
	// EnvHTTP2PingInterval is read by the servers (local, Cloud Run).
	EnvHTTP2PingInterval = "HERALD_HTTP2_PING_INTERVAL"
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
	DefaultReconnectGrace  = 20 * time.Second
	DefaultQueueIdleWindow = 24 * time.Hour
	DefaultDeliveryLimit   = leasestore.DefaultDeliveryLimit
	// DefaultSSEKeepAlive is the interval of SSE keep-alive comments, well
	// inside the idle timeouts of common proxies and load balancers.
	DefaultSSEKeepAlive = 15 * time.Second
	// DefaultSSEAckDelay is how long the durable SSE stream waits before it
	// acknowledges an event it wrote.
	DefaultSSEAckDelay = time.Second
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
	// idle-queue reaper.
	DefaultReapInterval = 5 * time.Second
	// DefaultWSPingInterval is how often the WebSocket bridge pings a
	// client; a client that answers nothing for two intervals is
	// disconnected (docs/websocket.md, "Keep-alive").
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
)

// Var describes one environment variable.
type Var struct {
	Name string
	// LocalDefault and CloudDefault are used when the variable is unset;
	// "" means none.
	LocalDefault string
	CloudDefault string
	// Unit of the value, for the README table ("" for plain strings).
	Unit string
	// Meaning is a one-line description.
	Meaning string
	// Deploy says that the SAM template and the Terraform module set it on
	// every function that reads it in the cloud.
	Deploy bool

	profiles []Profile
	uses     func(router.Function) bool
}

// ReadBy reports whether entrypoint p serving function f reads v.
func (v Var) ReadBy(p Profile, f router.Function) bool {
	found := false
	for _, q := range v.profiles {
		found = found || q == p
	}
	return found && (v.uses == nil || v.uses(f))
}

var (
	allProfiles   = []Profile{Local, Lambda, CloudRun}
	cloudProfiles = []Profile{Lambda, CloudRun}
	usesBroker    = router.Function.UsesBroker
	usesStore     = router.Function.UsesStore
	// authed functions check tokens: every function, all of whose routes
	// but GET /health need one.
	usesPull   = func(f router.Function) bool { return f == router.Pull || f == router.All }
	usesPub    = func(f router.Function) bool { return f == router.Publish || f == router.All }
	usesJobs   = func(f router.Function) bool { return f == router.Jobs || f == router.All }
	usesStream = func(f router.Function) bool { return f == router.Pull || f == router.All }
	usesWS     = func(f router.Function) bool { return f == router.Websocket || f == router.All }
	// usesLeases: functions that write leases (pulls and WebSocket streams).
	usesLeases = func(f router.Function) bool { return f == router.Pull || f == router.Websocket || f == router.All }
	// usesCORS: functions that answer browsers over HTTP (the API Gateway
	// WebSocket function answers API Gateway events only).
	usesCORS = func(f router.Function) bool { return f != router.Websocket }
	// The WebSocket bridge runs where connections can be hijacked: the
	// local adapter and Cloud Run (API Gateway pings on its own).
	wsProfiles = []Profile{Local, CloudRun}
)

var vars = []Var{
	{Name: EnvFunction, CloudDefault: string(router.All), Deploy: true,
		Meaning:  "which routes this process serves: publish, pull, acknowledge, destinations, jobs, websocket (the API Gateway WebSocket integration, Lambda only) or all",
		profiles: cloudProfiles},
	{Name: EnvAddr, LocalDefault: DefaultAddr, Unit: "host:port",
		Meaning:  "listen address of the local adapter",
		profiles: []Profile{Local}},
	{Name: EnvPort, CloudDefault: DefaultPort, Unit: "port",
		Meaning:  "Cloud Run's port (set by Cloud Run); the server listens on 0.0.0.0:$PORT",
		profiles: []Profile{CloudRun}},
	{Name: EnvDevToken, LocalDefault: DefaultDevToken,
		Meaning:  "a bearer token with every permission, as principal \"dev\" (a warning is logged when the local default is used); no default in the cloud",
		profiles: allProfiles},
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
		profiles: allProfiles, uses: usesBroker},
	{Name: EnvStoreURL, LocalDefault: DefaultStoreURL, Unit: "URL", Deploy: true,
		Meaning:  "lease store: a gocloud docstore collection URL keyed by `key` (`mem://herald/key` lives in memory only; `postgres://USER@HOST:5432/DB?table=herald` survives restarts and crashes and is shared by several Herald processes); required in the cloud",
		profiles: allProfiles, uses: usesStore},
	{Name: EnvSource, LocalDefault: DefaultSource, CloudDefault: DefaultSource, Deploy: true,
		Meaning:  "CloudEvents `source` of published events",
		profiles: allProfiles, uses: usesPub},
	{Name: EnvPublishTimeout, LocalDefault: "5s", CloudDefault: "5s", Unit: "Go duration",
		Meaning:  "how long a publish (or a whole batch) waits for the broker to accept its events; past it, or at once while the broker is known to be unreachable, the event answers success:false and can be retried (100ms–25s)",
		profiles: allProfiles, uses: usesPub},
	{Name: EnvReceiveWait, LocalDefault: "0s", CloudDefault: "0s", Unit: "Go duration", Deploy: true,
		Meaning:  "how long a pull waits at the broker for new events before answering 204 (at most 20s)",
		profiles: allProfiles, uses: usesPull},
	{Name: EnvMaxLeaseBytes, LocalDefault: strconv.Itoa(DefaultMaxLeaseBytes), CloudDefault: strconv.Itoa(DefaultMaxLeaseBytes), Unit: "bytes", Deploy: true,
		Meaning:  "most encoded event bytes in one lease; a pull returns fewer events rather than pass it (4096–1,000,000; keep ≤ 350,000 on DynamoDB)",
		profiles: allProfiles, uses: usesLeases},
	{Name: EnvReconnectGrace, LocalDefault: "20s", CloudDefault: "20s", Unit: "Go duration",
		Meaning:  "how long a non-durable queue outlives its last stream before the reaper deletes it; a reconnect token is NOT_FOUND after it (1s–24h)",
		profiles: allProfiles, uses: usesJobs},
	{Name: EnvQueueIdleWindow, LocalDefault: "24h", CloudDefault: "24h", Unit: "Go duration",
		Meaning:  "how long a durable queue lives without an attached consumer before the reaper deletes it with what it holds (1s–8760h)",
		profiles: allProfiles, uses: usesJobs},
	{Name: EnvClaimRetention, LocalDefault: "336h", CloudDefault: "336h", Unit: "Go duration",
		Meaning:  "how long the reap-idle-queues job keeps a claim-check claim (an event too big for the broker, stored in the lease store); keep it at least the broker's message retention (SQS: 14 days = 336h) or a reference still queued finds its claim gone and is dropped (1h–8760h)",
		profiles: allProfiles, uses: usesJobs},
	{Name: EnvDeliveryLimit, LocalDefault: strconv.Itoa(DefaultDeliveryLimit), CloudDefault: strconv.Itoa(DefaultDeliveryLimit), Unit: "deliveries",
		Meaning:  "an event whose lifetime delivery count would pass this is moved to the dead-letter queue instead of delivered again (1–1000)",
		profiles: allProfiles, uses: usesStore},
	{Name: EnvQueueMessageTTL, LocalDefault: "0s", CloudDefault: "0s", Unit: "Go duration",
		Meaning:  "a queue's message TTL: an event a queue holds longer than this after it was published is dead-lettered (reason EXPIRED) instead of delivered; 0s = none; applies to queues created afterwards (0s–8760h)",
		profiles: allProfiles, uses: usesStore},
	{Name: EnvQueueMaxLength, LocalDefault: "0", CloudDefault: "0", Unit: "events",
		Meaning:  "a queue's maximum length: past it the oldest events Herald holds for the queue are dead-lettered (reason MAXLEN); 0 = none; counts leased and requeued events, not the broker backlog; applies to queues created afterwards (0–1000)",
		profiles: allProfiles, uses: usesStore},
	{Name: EnvSSEKeepAlive, LocalDefault: "15s", CloudDefault: "15s", Unit: "Go duration",
		Meaning:  "interval of `: keep-alive` comment lines on SSE streams, so idle connections survive proxies (1s–5m)",
		profiles: allProfiles, uses: usesStream},
	{Name: EnvSSEAckDelay, LocalDefault: "1s", CloudDefault: "1s", Unit: "Go duration",
		Meaning:  "how long GET /api/v1beta/events/stream-durable waits after writing an event before it acknowledges it (0s–60s)",
		profiles: allProfiles, uses: usesStream},
	{Name: EnvHTTP2PingInterval, LocalDefault: "30s", CloudDefault: "30s", Unit: "Go duration",
		Meaning:  "servers (local, Cloud Run): an HTTP/2 connection (gRPC) that has sent no frame for this long gets a PING from the server, so idle streams survive load balancers' idle timeouts; 0s = none (0s, or 1s–10m)",
		profiles: []Profile{Local, CloudRun}},
	{Name: EnvMaxInflightBytes, LocalDefault: strconv.Itoa(DefaultMaxInflightBytes), CloudDefault: strconv.Itoa(DefaultMaxInflightBytes), Unit: "bytes",
		Meaning:  "servers (local, Cloud Run): most request body bytes being processed at once; past it requests get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED) unread, which bounds memory (docs/limits.md); 0 = no bound (0, or 1048576–68719476736)",
		profiles: []Profile{Local, CloudRun}},
	{Name: EnvMaxConcurrentPublishes, LocalDefault: strconv.Itoa(DefaultMaxConcurrentPublishes), CloudDefault: strconv.Itoa(DefaultMaxConcurrentPublishes), Unit: "requests",
		Meaning:  "servers (local, Cloud Run): most publish requests (REST and gRPC, single or batch) being processed at once; past it they get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED); 0 = no bound (0–100000)",
		profiles: []Profile{Local, CloudRun}, uses: usesPub},
	{Name: EnvWSPingInterval, LocalDefault: "30s", CloudDefault: "30s", Unit: "Go duration",
		Meaning:  "how often GET /api/v1beta/events/websocket sends a WebSocket ping; a client that sends nothing (no pong, no frame) for two intervals is disconnected (local adapter and Cloud Run) (1s–5m)",
		profiles: wsProfiles, uses: usesStream},
	{Name: EnvLogLevel, LocalDefault: DefaultLogLevel, CloudDefault: DefaultLogLevel, Unit: "level",
		Meaning:  "least severe log level written: debug, info (one access-log line per request, the default), warn or error; logs are JSON lines in the clouds and text locally",
		profiles: allProfiles},
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
	{Name: EnvReapInterval, LocalDefault: "5s", Unit: "Go duration",
		Meaning:  "local only: how often the idle-queue reaper runs (the clouds run the reap-idle-queues job on a schedule) (100ms–1h)",
		profiles: []Profile{Local}},
	{Name: EnvPprofAddr, Unit: "host:port",
		Meaning:  "local only: serve Go's runtime profiles (net/http/pprof, /debug/pprof/) on this second address, without authentication; unset serves none. For profiling on a development machine: bind it to loopback",
		profiles: []Profile{Local}},
	{Name: EnvWSPollWait, CloudDefault: "5s", Unit: "Go duration", Deploy: true,
		Meaning:  "Lambda only: how long the WebSocket function's pull for one demand frame waits at the broker before it answers with the events found and an idle frame (0s–20s)",
		profiles: []Profile{Lambda}, uses: usesWS},
	{Name: EnvWSSessionTTL, CloudDefault: "10m", Unit: "Go duration", Deploy: true,
		Meaning:  "Lambda only: how long a WebSocket session stays attached without a demand, ack, nack or ping frame; a client silent for longer gets a fatal error frame and reconnects (1m–2h; API Gateway's idle timeout is 10m)",
		profiles: []Profile{Lambda}, uses: usesWS},
}

// Vars returns the table of every variable any profile reads.
func Vars() []Var { return append([]Var(nil), vars...) }

// ReadBy returns the variables entrypoint p reads when serving f.
func ReadBy(p Profile, f router.Function) []Var {
	var out []Var
	for _, v := range vars {
		if v.ReadBy(p, f) {
			out = append(out, v)
		}
	}
	return out
}

// Config is the parsed environment.
type Config struct {
	Profile  Profile
	Function router.Function
	// Addr is the listen address: HERALD_ADDR locally, 0.0.0.0:$PORT on
	// Cloud Run, "" on Lambda.
	Addr string
	// DevToken is HERALD_DEV_TOKEN ("" for none).
	DevToken string
	// Tokens are the tokens of HERALD_TOKENS and HERALD_TOKENS_FILE.
	Tokens auth.StaticTokens
	// JWT configures the JWT verifier (the HERALD_JWT_* variables); none
	// runs unless JWT.Issuer or JWT.JWKSURL is set (JWTEnabled).
	JWT jwtauth.Config
	// CORSOrigins is HERALD_CORS_ORIGINS: the browser origins allowed
	// (nil for none; "*" for any).
	CORSOrigins   []string
	TopicURL      string
	StoreURL      string
	Source        string
	ReceiveWait   time.Duration
	MaxLeaseBytes int
	// PublishTimeout is HERALD_PUBLISH_TIMEOUT: how long a publish waits
	// for the broker (DefaultPublishTimeout, 5s, when unset; 0 in a Config
	// built by hand means the same).
	PublishTimeout time.Duration
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
	// SSEKeepAlive and SSEAckDelay tune the SSE streams; 0 means the
	// default, and a negative SSEAckDelay no delay (HERALD_SSE_ACK_DELAY=0s).
	SSEKeepAlive time.Duration
	SSEAckDelay  time.Duration
	// ReapInterval is how often the local adapter reaps idle queues.
	ReapInterval time.Duration
	// PprofAddr is where the local adapter serves net/http/pprof; "" for
	// nowhere (HERALD_PPROF_ADDR).
	PprofAddr string
	// WSPollWait and WSSessionTTL tune the API Gateway WebSocket function
	// (Lambda only; DefaultWSPollWait and DefaultWSSessionTTL elsewhere).
	WSPollWait   time.Duration
	WSSessionTTL time.Duration
	// WSPingInterval is how often the WebSocket bridge pings a client;
	// 0 means DefaultWSPingInterval.
	WSPingInterval time.Duration
	// HTTP2PingInterval is HERALD_HTTP2_PING_INTERVAL: 0 means the
	// default (DefaultHTTP2PingInterval), negative no PINGs ("0s"). Read it
	// through PingInterval.
	HTTP2PingInterval time.Duration
	// LogLevel is HERALD_LOG_LEVEL: the least severe level logged (the
	// zero value is slog.LevelInfo, the default).
	LogLevel slog.Level
	// MaxInflightBytes and MaxConcurrentPublishes are
	// HERALD_MAX_INFLIGHT_BYTES and HERALD_MAX_CONCURRENT_PUBLISHES: 0
	// means the default, negative no bound ("0"). Read them through
	// Admission.
	MaxInflightBytes       int64
	MaxConcurrentPublishes int64
}

// Admission returns the server's load-shedding bounds (see
// functions/httpx.Admission), or nil when both are off. A Lambda function
// gets nil: Lambda runs one request per instance and sheds load itself.
func (c Config) Admission() *httpx.Admission {
	if c.Profile == Lambda {
		return nil
	}
	pick := func(v, def int64) int64 {
		switch {
		case v < 0:
			return 0
		case v == 0:
			return def
		}
		return v
	}
	a := &httpx.Admission{
		MaxBytes:     pick(c.MaxInflightBytes, DefaultMaxInflightBytes),
		MaxPublishes: pick(c.MaxConcurrentPublishes, DefaultMaxConcurrentPublishes),
	}
	if a.MaxBytes == 0 && a.MaxPublishes == 0 {
		return nil
	}
	return a
}

// PingInterval returns how long an HTTP/2 connection may go without a
// frame from the client before the server PINGs it; 0 means never.
func (c Config) PingInterval() time.Duration {
	switch {
	case c.HTTP2PingInterval < 0:
		return 0
	case c.HTTP2PingInterval == 0:
		return DefaultHTTP2PingInterval
	}
	return c.HTTP2PingInterval
}

// Authenticator returns the token table: Tokens plus DevToken.
func (c Config) Authenticator() auth.StaticTokens {
	out := make(auth.StaticTokens, len(c.Tokens)+1)
	for t, p := range c.Tokens {
		out[t] = p
	}
	if c.DevToken != "" {
		out[c.DevToken] = &auth.Principal{ID: "dev", Permissions: []string{auth.PermAll}}
	}
	return out
}

// JWTEnabled reports whether JWT bearer tokens are accepted.
func (c Config) JWTEnabled() bool { return c.JWT.Issuer != "" || c.JWT.JWKSURL != "" }

// UsesDefaultDevToken reports whether the development token is the
// well-known default.
func (c Config) UsesDefaultDevToken() bool { return c.DevToken == DefaultDevToken }

// FromEnv reads the process environment for profile p.
func FromEnv(p Profile) (Config, error) { return Load(p, os.LookupEnv) }

// Load reads the variables through lookup (os.LookupEnv in production).
// Every error names the variable and says what is expected; none repeats
// a token.
func Load(p Profile, lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	def := func(name string) string {
		for _, v := range vars {
			if v.Name == name {
				if p.Cloud() {
					return v.CloudDefault
				}
				return v.LocalDefault
			}
		}
		return ""
	}
	val := func(name string) string {
		if s := get(name); s != "" {
			return s
		}
		return def(name)
	}

	c := Config{Profile: p, Function: router.All}
	var errs []error
	fail := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}

	if p.Cloud() {
		f, err := router.ParseFunction(val(EnvFunction))
		if err != nil {
			fail(EnvFunction, "%v", err)
		} else {
			c.Function = f
		}
	}
	switch p {
	case Local:
		c.Addr = val(EnvAddr)
	case CloudRun:
		port := val(EnvPort)
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			fail(EnvPort, "%q is not a TCP port (1-65535)", port)
		}
		c.Addr = "0.0.0.0:" + port
	}

	c.TopicURL = val(EnvTopicURL)
	c.StoreURL = val(EnvStoreURL)
	if p.Cloud() {
		if c.Function.UsesBroker() && c.TopicURL == "" {
			fail(EnvTopicURL, "required for HERALD_FUNCTION=%s: the broker URL, e.g. awssnssqs://… or gcppubsub://…", c.Function)
		}
		if c.Function.UsesStore() && c.StoreURL == "" {
			fail(EnvStoreURL, "required for HERALD_FUNCTION=%s: the lease store URL, e.g. dynamodb://TABLE?partition_key=key or firestore://…", c.Function)
		}
	}
	for _, u := range []struct{ name, value string }{{EnvTopicURL, c.TopicURL}, {EnvStoreURL, c.StoreURL}} {
		if u.value == "" {
			continue
		}
		if parsed, err := url.Parse(u.value); err != nil || parsed.Scheme == "" {
			fail(u.name, "%q is not a URL with a scheme", Redact(u.value))
		}
	}
	c.Source = val(EnvSource)
	// The source is every event's CloudEvents `source`: a URI-reference.
	// Refuse a bad one here rather than failing every publish later.
	if c.Source != "" {
		if _, err := url.Parse(c.Source); err != nil || strings.ContainsFunc(c.Source, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			fail(EnvSource, "%q is not a URI-reference (the CloudEvents source), e.g. /herald or https://events.example.com", c.Source)
		}
	}

	if s := val(EnvReceiveWait); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > MaxReceiveWait {
			fail(EnvReceiveWait, "%q is not a Go duration between 0s and %s", s, MaxReceiveWait)
		} else {
			c.ReceiveWait = d
		}
	}
	if s := val(EnvPublishTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < MinPublishTimeout || d > MaxPublishTimeout {
			fail(EnvPublishTimeout, "%q is not a Go duration between %s and %s", s, MinPublishTimeout, MaxPublishTimeout)
		} else {
			c.PublishTimeout = d
		}
	}
	if s := val(EnvMaxLeaseBytes); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < MinLeaseBytes || n > MaxLeaseBytes {
			fail(EnvMaxLeaseBytes, "%q is not a whole number of bytes between %d and %d", s, MinLeaseBytes, MaxLeaseBytes)
		} else {
			c.MaxLeaseBytes = n
		}
	}

	duration := func(name string, lo, hi time.Duration, dst *time.Duration) {
		s := val(name)
		if s == "" {
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < lo || d > hi {
			fail(name, "%q is not a Go duration between %s and %s", s, lo, hi)
			return
		}
		*dst = d
	}
	duration(EnvReconnectGrace, time.Second, 24*time.Hour, &c.ReconnectGrace)
	duration(EnvQueueIdleWindow, time.Second, 8760*time.Hour, &c.QueueIdleWindow)
	duration(EnvClaimRetention, MinClaimRetention, MaxClaimRetention, &c.ClaimRetention)
	duration(EnvSSEKeepAlive, time.Second, 5*time.Minute, &c.SSEKeepAlive)
	duration(EnvSSEAckDelay, 0, time.Minute, &c.SSEAckDelay)
	if c.SSEAckDelay == 0 && val(EnvSSEAckDelay) != "" {
		c.SSEAckDelay = -1 // "0s": acknowledge at once
	}
	if p == Local || p == CloudRun {
		duration(EnvWSPingInterval, MinWSPingInterval, MaxWSPingInterval, &c.WSPingInterval)
	}
	if p == Local {
		duration(EnvReapInterval, 100*time.Millisecond, time.Hour, &c.ReapInterval)
		c.PprofAddr = val(EnvPprofAddr)
	}
	c.WSPollWait, c.WSSessionTTL = DefaultWSPollWait, DefaultWSSessionTTL
	if p == Lambda {
		duration(EnvWSPollWait, 0, MaxWSPollWait, &c.WSPollWait)
		duration(EnvWSSessionTTL, MinWSSessionTTL, MaxWSSessionTTL, &c.WSSessionTTL)
	}
	count := func(name string, lo, hi int64, dst *int64) {
		s := val(name)
		if s == "" || p == Lambda {
			return
		}
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil || (n != 0 && (n < lo || n > hi)):
			fail(name, "%q is not 0 or a whole number between %d and %d", s, lo, hi)
		case n == 0:
			*dst = -1 // "0": no bound
		default:
			*dst = n
		}
	}
	count(EnvMaxInflightBytes, MinMaxInflightBytes, MaxMaxInflightBytes, &c.MaxInflightBytes)
	count(EnvMaxConcurrentPublishes, 1, MaxMaxConcurrentPublishes, &c.MaxConcurrentPublishes)
	if s := val(EnvHTTP2PingInterval); s != "" && p != Lambda {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil || (d != 0 && (d < MinHTTP2PingInterval || d > MaxHTTP2PingInterval)):
			fail(EnvHTTP2PingInterval, "%q is not 0s or a Go duration between %s and %s", s, MinHTTP2PingInterval, MaxHTTP2PingInterval)
		case d == 0:
			c.HTTP2PingInterval = -1 // "0s": no PINGs
		default:
			c.HTTP2PingInterval = d
		}
	}
	if s := val(EnvLogLevel); s != "" {
		switch strings.ToLower(s) {
		case "debug", "info", "warn", "error":
			_ = c.LogLevel.UnmarshalText([]byte(s))
		default:
			fail(EnvLogLevel, "%q is not a log level: debug, info, warn or error", s)
		}
	}
	if s := val(EnvQueueMessageTTL); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > 8760*time.Hour {
			fail(EnvQueueMessageTTL, "%q is not a Go duration between 0s and 8760h", s)
		} else {
			c.QueueMessageTTL = d
		}
	}
	if s := val(EnvQueueMaxLength); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > leasestore.MaxInFlight {
			fail(EnvQueueMaxLength, "%q is not a whole number between 0 and %d", s, leasestore.MaxInFlight)
		} else {
			c.QueueMaxLength = n
		}
	}
	if s := val(EnvDeliveryLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDeliveryLimit {
			fail(EnvDeliveryLimit, "%q is not a whole number between 1 and %d", s, MaxDeliveryLimit)
		} else {
			c.DeliveryLimit = n
		}
	}

	c.DevToken = val(EnvDevToken)
	c.Tokens = auth.StaticTokens{}
	owner := map[string]string{} // token → variable that gave it
	if c.DevToken != "" {
		owner[c.DevToken] = EnvDevToken
	}
	addTokens := func(name string, raw []byte) {
		ts, err := ParseTokens(raw)
		if err != nil {
			fail(name, "%v", err)
			return
		}
		for t, pr := range ts {
			if prev, dup := owner[t]; dup {
				fail(name, "the token of principal %q is also given by %s", pr.ID, prev)
				continue
			}
			owner[t] = name
			c.Tokens[t] = pr
		}
	}
	if s := get(EnvTokens); s != "" {
		addTokens(EnvTokens, []byte(s))
	}
	if path := get(EnvTokensFile); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			fail(EnvTokensFile, "cannot read %s: %v", path, errors.Unwrap(err))
		} else {
			addTokens(EnvTokensFile, b)
		}
	}
	c.loadJWT(get, val, fail)
	c.CORSOrigins = list(get(EnvCORSOrigins))
	for _, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			fail(EnvCORSOrigins, "%v", err)
		}
	}
	if p.Cloud() {
		if len(owner) == 0 && !c.JWTEnabled() {
			fail(EnvTokens, "no bearer token is configured: set %s (or %s, or %s), or an identity provider (%s)", EnvTokens, EnvTokensFile, EnvDevToken, EnvJWTIssuer)
		}
		if c.DevToken != "" && len(c.DevToken) < MinCloudTokenLength {
			fail(EnvDevToken, "the token is shorter than %d characters", MinCloudTokenLength)
		}
		for t, pr := range c.Tokens {
			if len(t) < MinCloudTokenLength {
				fail(owner[t], "the token of principal %q is shorter than %d characters", pr.ID, MinCloudTokenLength)
			}
		}
	}
	return c, errors.Join(errs...)
}

// loadJWT reads the HERALD_JWT_* variables into c.JWT.
func (c *Config) loadJWT(get, val func(string) string, fail func(name, format string, args ...any)) {
	c.JWT = jwtauth.Config{
		Issuer: get(EnvJWTIssuer), JWKSURL: get(EnvJWTJWKSURL), Audiences: list(get(EnvJWTAudience)),
		PermissionsClaim: val(EnvJWTPermissionsClaim), PrincipalClaim: val(EnvJWTPrincipalClaim),
		Algorithms: list(get(EnvJWTAlgorithms)), ScopePrefix: get(EnvJWTScopePrefix),
	}
	if s := get(EnvJWTGrants); s != "" {
		if err := json.Unmarshal([]byte(s), &c.JWT.Grants); err != nil {
			fail(EnvJWTGrants, `must be a JSON object from principal to a list of permissions: {"<principal>": ["publish:app.*"]}`)
		}
		for id, perms := range c.JWT.Grants {
			for _, perm := range perms {
				if !knownPermission(perm) {
					fail(EnvJWTGrants, "principal %q: unknown permission %q", id, perm)
				}
			}
		}
	}
	if !c.JWTEnabled() {
		for _, name := range []string{EnvJWTAudience, EnvJWTAlgorithms, EnvJWTScopePrefix, EnvJWTGrants} {
			if get(name) != "" {
				fail(name, "is set, but neither %s nor %s is", EnvJWTIssuer, EnvJWTJWKSURL)
			}
		}
		return
	}
	if err := c.JWT.Validate(); err != nil {
		// Each of Validate's errors starts with its variable.
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			name, msg, _ := strings.Cut(e.Error(), ": ")
			fail(name, "%s", msg)
		}
	}
}

// list splits a comma- or space-separated value; "" is nil.
func list(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}

// checkOrigin accepts "*" or a serialized origin: scheme://host[:port],
// without path, query or trailing slash (what a browser sends in Origin).
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin such as https://app.example.com (scheme and host, no path)", o)
	}
	return nil
}

// tokenEntry is one principal in HERALD_TOKENS.
type tokenEntry struct {
	ID          string   `json:"id"`
	Permissions []string `json:"permissions"`
}

// ParseTokens parses the HERALD_TOKENS format. Its errors never contain a
// token: entries are named by principal id.
func ParseTokens(raw []byte) (auth.StaticTokens, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("not valid JSON (syntax error at byte %d)", se.Offset)
		}
		return nil, errors.New(`must be a JSON object from token to {"id": "…", "permissions": ["…"]}`)
	}
	out := make(auth.StaticTokens, len(m))
	n := 0
	for token, rawEntry := range m {
		n++
		var e tokenEntry
		dec := json.NewDecoder(strings.NewReader(string(rawEntry)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf(`an entry is not {"id": "…", "permissions": ["…"]} (%s)`, entryProblem(err))
		}
		if strings.TrimSpace(token) == "" || token != strings.TrimSpace(token) {
			return nil, fmt.Errorf("the token of principal %q is empty or has surrounding spaces", e.ID)
		}
		if e.ID == "" {
			return nil, errors.New(`an entry has no "id"`)
		}
		if len(e.Permissions) == 0 {
			return nil, fmt.Errorf("principal %q has no permissions", e.ID)
		}
		for _, perm := range e.Permissions {
			if !knownPermission(perm) {
				return nil, fmt.Errorf("principal %q: unknown permission %q (known: %s, %s, %s, %sPATTERN, %sPATTERN, %s, %s, %s, %s, %s)",
					e.ID, perm, auth.PermReadEvents, auth.PermManageDestinations, auth.PermRunJobs, auth.PermPublishPrefix,
					auth.PermReceivePrefix, auth.PermConsumeDurableQueues, auth.PermCreateDurableQueues,
					auth.PermDeleteDurableQueues, auth.PermInspectDeadLetters, auth.PermAll)
			}
		}
		out[token] = &auth.Principal{ID: e.ID, Permissions: e.Permissions}
	}
	return out, nil
}

// entryProblem describes a decoding error of one entry without quoting
// the input (which sits next to a token).
func entryProblem(err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return te.Field + " has the wrong type"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	default:
		return "not a JSON object"
	}
}

func knownPermission(p string) bool { return auth.Known(p) }

// Redact drops the user info and query of a URL, for logs and errors.
func Redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			u = u[:j+3] + "…@" + u[i+1:]
		}
	}
	return u
}
