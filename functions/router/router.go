// Package router mounts the REST functions on one http.Handler: what the
// local adapter and a Cloud Run service serve, and what a Lambda adapter
// wraps.
//
// Routes are grouped by config.Function, the unit one deployment serves
// (package functions/config parses HERALD_FUNCTION; the router serves
// it): a Lambda function or Cloud Run service started with
// HERALD_FUNCTION=pull serves only the pull routes (and the routes every
// function serves: the health checks GET /health, GET /api/v1beta/health
// and GET /health/ready, and the OpenAPI document GET /openapi.yaml and
// GET /openapi.json); config.All serves every route.
//
// Every route is described in the OpenAPI document of package
// functions/openapi; its tests fail when a route is missing there, or
// the document has one that is not here.
//
// The gRPC services of package functions/grpcapi are mounted on the same
// handler: EventPublishingService with the publish routes,
// EventConsumerService with the pull and destinations routes, gRPC health
// checking and reflection with every function.
package router

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/acknowledge"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/console"
	"github.com/heraldevents/herald/functions/consoleauth"
	"github.com/heraldevents/herald/functions/deadletters"
	"github.com/heraldevents/herald/functions/destinations"
	"github.com/heraldevents/herald/functions/grpcapi"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/openapi"
	"github.com/heraldevents/herald/functions/publish"
	"github.com/heraldevents/herald/functions/pull"
	"github.com/heraldevents/herald/functions/queues"
	"github.com/heraldevents/herald/functions/stream"
	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/herr"
)

// Route is one endpoint.
type Route struct {
	Method string
	// Path is a net/http pattern path, e.g. "/v1/event-destinations/{id}".
	Path string
	// Function serves the route; All means every function does.
	Function config.Function
	// Public routes need no bearer token.
	Public bool
	// QueryToken routes also take the bearer token from the access_token
	// query parameter, for clients that cannot set headers (a browser's
	// EventSource or WebSocket); see package functions/stream.
	QueryToken bool
}

type route struct {
	Route
	handler func(svc *delivery.Service) http.Handler
}

var table = []route{
	{Route: Route{Method: "POST", Path: "/api/v1beta/events", Function: config.Publish}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&publish.Handler{Service: s}).Single)
	}},
	{Route: Route{Method: "POST", Path: "/api/v1beta/events/batch", Function: config.Publish}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&publish.Handler{Service: s}).Batch)
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Create)
	}},
	{Route: Route{Method: "GET", Path: "/v1/event-destinations", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).List)
	}},
	{Route: Route{Method: "GET", Path: "/v1/event-destinations/{id}", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Get)
	}},
	{Route: Route{Method: "GET", Path: "/v1/event-destinations/{id}/leases", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Leases)
	}},
	{Route: Route{Method: "DELETE", Path: "/v1/event-destinations/{id}", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Delete)
	}},
	{Route: Route{Method: "PATCH", Path: "/v1/event-destinations/{id}", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Update)
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations/{id}/pause", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Pause)
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations/{id}/resume", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Resume)
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations/{id}/rotate-secret", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).RotateSecret)
	}},
	{Route: Route{Method: "GET", Path: "/v1/event-destinations/{id}/attempts", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Attempts)
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations/{id}/pull", Function: config.Pull}, handler: func(s *delivery.Service) http.Handler {
		return &pull.Handler{Service: s}
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations/{id}/acknowledge", Function: config.Acknowledge}, handler: func(s *delivery.Service) http.Handler {
		return &acknowledge.Handler{Service: s}
	}},
	{Route: Route{Method: "POST", Path: "/v1/event-destinations/{id}/extend", Function: config.Acknowledge}, handler: func(s *delivery.Service) http.Handler {
		return &acknowledge.Extend{Service: s}
	}},
	{Route: Route{Method: "POST", Path: "/api/v1beta/queues/durable", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&queues.Handler{Service: s}).Create)
	}},
	{Route: Route{Method: "PATCH", Path: "/api/v1beta/queues/durable", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&queues.Handler{Service: s}).Update)
	}},
	{Route: Route{Method: "DELETE", Path: "/api/v1beta/queues/durable", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&queues.Handler{Service: s}).Delete)
	}},
	{Route: Route{Method: "GET", Path: "/api/v1beta/events/stream", Function: config.Pull, QueryToken: true}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&stream.Handler{Service: s}).NonDurable)
	}},
	{Route: Route{Method: "GET", Path: "/api/v1beta/events/stream-durable", Function: config.Pull, QueryToken: true}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&stream.Handler{Service: s}).Durable)
	}},
	{Route: Route{Method: "GET", Path: wsbridge.Path, Function: config.Pull, QueryToken: true}, handler: func(s *delivery.Service) http.Handler {
		return &wsbridge.Handler{Service: s, PingInterval: s.Streams().WSPingInterval}
	}},
	{Route: Route{Method: "GET", Path: "/api/v1beta/dead-letters", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&deadletters.Handler{Service: s}).List)
	}},
	{Route: Route{Method: "POST", Path: "/api/v1beta/dead-letters/actions", Function: config.Destinations}, handler: func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&deadletters.Handler{Service: s}).Act)
	}},
	{Route: Route{Method: "POST", Path: "/v1/jobs/{job}", Function: config.Jobs}, handler: func(s *delivery.Service) http.Handler {
		return &jobs.Handler{Service: s}
	}},
	{Route: Route{Method: "GET", Path: health.LivePath, Function: config.All, Public: true}, handler: func(*delivery.Service) http.Handler {
		return health.Handler{}
	}},
	{Route: Route{Method: "GET", Path: "/api/v1beta/health", Function: config.All, Public: true}, handler: func(*delivery.Service) http.Handler {
		return health.Handler{}
	}},
	// GET /health/ready's handler needs the Checker of Options; ForFunction
	// mounts it.
	{Route: Route{Method: "GET", Path: health.ReadyPath, Function: config.All, Public: true}, handler: nil},
	// The configuration summary (no secrets), for operators; its handler
	// needs Options.Summary, Build mounts it.
	{Route: Route{Method: "GET", Path: health.InfoPath, Function: config.All}, handler: nil},
	// The OpenAPI document of these routes (package functions/openapi),
	// from every function, as the health checks.
	{Route: Route{Method: "GET", Path: openapi.YAMLPath, Function: config.All, Public: true}, handler: func(*delivery.Service) http.Handler {
		return openapi.Handler{}
	}},
	{Route: Route{Method: "GET", Path: openapi.JSONPath, Function: config.All, Public: true}, handler: func(*delivery.Service) http.Handler {
		return openapi.Handler{}
	}},
}

// withTimeout ends the context of every request h serves after d.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// noStore marks every answer of h, refusals included, Cache-Control:
// no-store: an authenticated answer carries what only its caller may see
// (events, principal ids, reconnect tokens, lease ids), so neither a
// browser nor a shared cache may keep it (RFC 9111 §5.2.2.5; RFC 6749 §5.1
// asks the same of answers that carry tokens).
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// Options are what ForFunction and Build need beyond the core service.
type Options struct {
	// Ready checks the process's dependencies for GET /health/ready and
	// gRPC health; nil means always ready (no dependency checked).
	Ready *health.Checker
	// CORSOrigins are the browser origins (HERALD_CORS_ORIGINS) whose
	// pages may call every endpoint (CORS preflights are answered) and
	// open the WebSocket; nil allows none, "*" any. The WebSocket always
	// admits clients that send no Origin (not browsers) and pages of the
	// server's own origin.
	CORSOrigins []string
	// Admission, when not nil, sheds load (httpx.Admission) on every route
	// that takes a request body and on the gRPC publisher; the publish
	// routes, REST and gRPC, also take its publish slots. Streams are not
	// bounded by it: they hold their request open for hours.
	Admission *httpx.Admission
	// RequestTimeout, when positive, bounds every REST request but the
	// streams (SSE, WebSocket) and the jobs, and every unary gRPC call
	// (grpcapi.Services.UnaryTimeout): its context ends after this
	// long, so a broker or store that accepts connections and never
	// answers fails the request (504 DEADLINE_EXCEEDED, or the store's
	// 503) instead of holding it, and its client, for ever. The
	// entrypoints set it with the function RequestTimeout.
	RequestTimeout time.Duration
	// Jobs adjusts the jobs of POST /v1/jobs/{job} (jobs.Options).
	Jobs jobs.Options
	// Console serves the web console (package functions/console) at
	// GET /console/ when f serves every route (config.All). The console
	// is a client of the routes above, not a route of the APIs, so it is
	// not in Routes nor in the OpenAPI document.
	Console bool
	// ConsoleSignIn, with Console, signs the console in through the
	// identity provider (package functions/consoleauth): it serves
	// /console/login, /console/callback and /console/logout, and every
	// authenticated route then also accepts the console's session cookie
	// with its CSRF header, as the bearer token it seals, checked as any
	// bearer token is. nil leaves OIDC sign-in off (GET /console/session
	// says so).
	ConsoleSignIn *consoleauth.Sessions
	// Summary answers GET /v1/info, the configuration summary; nil
	// answers the version alone.
	Summary func() health.Summary
}

// StoreBound is what RequestTimeout allows a request for its store calls,
// beyond its longest wait at the broker.
const StoreBound = 10 * time.Second

// RequestTimeout returns the Options.RequestTimeout of a deployment whose
// pulls wait up to receiveWait at the broker (HERALD_RECEIVE_WAIT) and
// whose publishes up to publishTimeout (HERALD_PUBLISH_TIMEOUT): the
// longer of the two plus StoreBound, 15 s with the defaults.
func RequestTimeout(receiveWait, publishTimeout time.Duration) time.Duration {
	return max(receiveWait, publishTimeout) + StoreBound
}

// Routes returns every route, in the order they are documented.
func Routes() []Route {
	out := make([]Route, len(table))
	for i, r := range table {
		out[i] = r.Route
	}
	return out
}

// ServedBy reports whether function f serves r.
func (r Route) ServedBy(f config.Function) bool { return f.Serves(r.Function) }

// New returns the handler for every endpoint. Everything but the public
// routes (the health checks and the OpenAPI document) requires a bearer
// token that a resolves.
func New(svc *delivery.Service, a auth.Authenticator) http.Handler {
	return ForFunction(svc, a, config.All)
}

// ForFunction returns the handler for f's routes; any other path is 404.
// At most one Options is used.
func ForFunction(svc *delivery.Service, a auth.Authenticator, f config.Function, opts ...Options) http.Handler {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return Build(svc, a, f, o)
}

// Build returns the handler for f's routes, adjusted by o.
func Build(svc *delivery.Service, a auth.Authenticator, f config.Function, o Options) http.Handler {
	policy := corsPolicy(o.CORSOrigins)
	admission := o.Admission
	mux := http.NewServeMux()
	for _, r := range table {
		if !r.ServedBy(f) {
			continue
		}
		var h http.Handler
		switch {
		case r.handler == nil && r.Path == health.InfoPath:
			h = health.InfoHandler{Summary: o.Summary}
		case r.handler == nil: // GET /health/ready
			h = health.ReadyHandler{Checker: o.Ready}
		default:
			h = r.handler(svc)
		}
		switch h := h.(type) {
		case *wsbridge.Handler:
			h.CheckOrigin = originCheck(policy)
		case *jobs.Handler:
			h.Options = o.Jobs
		}
		if !r.Public {
			h = httpx.Authenticate(a, h)
			if o.Console && f == config.All {
				h = o.ConsoleSignIn.Wrap(h) // nil: h unchanged
			}
			h = noStore(h)
		}
		if r.Method != "GET" {
			h = admission.Wrap(h, r.Function == config.Publish)
		}
		if o.RequestTimeout > 0 && !r.QueryToken && r.Function != config.Jobs {
			h = withTimeout(h, o.RequestTimeout)
		}
		if r.QueryToken {
			h = httpx.Unbounded(stream.AccessTokenFromQuery(h))
		}
		mux.Handle(r.Method+" "+r.Path, h)
	}
	for _, m := range grpcapi.Mounts(svc, a, grpcapi.Services{
		Publisher: f.Serves(config.Publish),
		// EventConsumerService holds both consuming (Pull) and queue
		// management (Destinations) RPCs.
		Consumer:     f.Serves(config.Pull) || f.Serves(config.Destinations),
		Ready:        o.Ready,
		UnaryTimeout: o.RequestTimeout,
	}) {
		h := m.Handler
		if m.Path == "/"+publisherv1betaconnect.EventPublishingServiceName+"/" {
			h = admission.WrapRPC(h, true)
		} else {
			h = httpx.Unbounded(h) // the consumer's streams, health's Watch
		}
		mux.Handle(m.Path, h)
	}
	if o.Console && f == config.All {
		mux.Handle("GET "+console.Path, console.Handler{})
		mux.Handle("GET "+strings.TrimSuffix(console.Path, "/"), console.Handler{})
		o.ConsoleSignIn.Mount(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, r, herr.New(herr.NotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	if policy == nil {
		return mux
	}
	return policy.Handler(mux)
}
