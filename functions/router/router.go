// Package router mounts the REST functions on one http.Handler: what the
// local adapter and a Cloud Run service serve, and what a Lambda adapter
// wraps.
//
// Routes are grouped by Function, the unit one deployment serves: a Lambda
// function or Cloud Run service started with HERALD_FUNCTION=pull serves
// only the pull routes (and the health routes, GET /health,
// GET /api/v1beta/health and GET /health/ready); All serves every route.
//
// The gRPC services of package functions/grpcapi are mounted on the same
// handler: EventPublishingService with the publish routes,
// EventConsumerService with the pull and destinations routes, gRPC health
// checking and reflection with every function.
package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/acknowledge"
	"github.com/heraldevents/herald/functions/deadletters"
	"github.com/heraldevents/herald/functions/destinations"
	"github.com/heraldevents/herald/functions/grpcapi"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/publish"
	"github.com/heraldevents/herald/functions/pull"
	"github.com/heraldevents/herald/functions/queues"
	"github.com/heraldevents/herald/functions/stream"
	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/herr"
)

// Function names a set of routes that one deployment unit serves.
type Function string

// The functions. All serves every route.
const (
	Publish      Function = "publish"
	Pull         Function = "pull"
	Acknowledge  Function = "acknowledge"
	Destinations Function = "destinations"
	Jobs         Function = "jobs"
	// Websocket serves no REST route but GET /health: it is the API
	// Gateway WebSocket API's integration on AWS (package
	// functions/wslambda), driven by $connect, $default and $disconnect
	// events, not HTTP requests. All serves those events too.
	Websocket Function = "websocket"
	All       Function = "all"
)

// Functions lists every function but All, in a stable order. The notifications API's
// consumer routes join the function of their kind: the SSE streams are
// served by Pull (consuming), durable-queue and dead-letter management by
// Destinations. The streams need a server that does not buffer responses
// (the local adapter, Cloud Run).
func Functions() []Function {
	return []Function{Publish, Pull, Acknowledge, Destinations, Jobs, Websocket}
}

// ParseFunction returns the Function named s, or an error listing the
// known names.
func ParseFunction(s string) (Function, error) {
	for _, f := range append(Functions(), All) {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, 0, 7)
	for _, f := range append(Functions(), All) {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("unknown function %q (known: %s)", s, strings.Join(names, ", "))
}

// UsesBroker reports whether f's routes reach the message broker. Jobs
// does: the idle-queue reaper deletes the subscriptions of the queues it
// reaps; so does Websocket, whose streams pull from subscriptions and make
// those of fresh non-durable queues.
func (f Function) UsesBroker() bool {
	switch f {
	case Publish, Pull, Destinations, Jobs, Websocket, All:
		return true
	}
	return false
}

// UsesStore reports whether f's routes reach the lease store. Publish
// does: an event too big for a size-limited broker (Amazon SNS) is stored
// there as a claim-check claim (package delivery).
func (f Function) UsesStore() bool {
	switch f {
	case Publish, Pull, Acknowledge, Destinations, Jobs, Websocket, All:
		return true
	}
	return false
}

// Route is one endpoint.
type Route struct {
	Method string
	// Path is a net/http pattern path, e.g. "/v1/event-destinations/{id}".
	Path string
	// Function serves the route; All means every function does.
	Function Function
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
	{Route{"POST", "/api/v1beta/events", Publish, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&publish.Handler{Service: s}).Single)
	}},
	{Route{"POST", "/api/v1beta/events/batch", Publish, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&publish.Handler{Service: s}).Batch)
	}},
	{Route{"POST", "/v1/event-destinations", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Create)
	}},
	{Route{"GET", "/v1/event-destinations", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).List)
	}},
	{Route{"GET", "/v1/event-destinations/{id}", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Get)
	}},
	{Route{"DELETE", "/v1/event-destinations/{id}", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Delete)
	}},
	{Route{"PATCH", "/v1/event-destinations/{id}", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Update)
	}},
	{Route{"POST", "/v1/event-destinations/{id}/pause", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Pause)
	}},
	{Route{"POST", "/v1/event-destinations/{id}/resume", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&destinations.Handler{Service: s}).Resume)
	}},
	{Route{"POST", "/v1/event-destinations/{id}/pull", Pull, false, false}, func(s *delivery.Service) http.Handler {
		return &pull.Handler{Service: s}
	}},
	{Route{"POST", "/v1/event-destinations/{id}/acknowledge", Acknowledge, false, false}, func(s *delivery.Service) http.Handler {
		return &acknowledge.Handler{Service: s}
	}},
	{Route{"POST", "/v1/event-destinations/{id}/extend", Acknowledge, false, false}, func(s *delivery.Service) http.Handler {
		return &acknowledge.Extend{Service: s}
	}},
	{Route{"POST", "/api/v1beta/queues/durable", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&queues.Handler{Service: s}).Create)
	}},
	{Route{"PATCH", "/api/v1beta/queues/durable", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&queues.Handler{Service: s}).Update)
	}},
	{Route{"DELETE", "/api/v1beta/queues/durable", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&queues.Handler{Service: s}).Delete)
	}},
	{Route{"GET", "/api/v1beta/events/stream", Pull, false, true}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&stream.Handler{Service: s}).NonDurable)
	}},
	{Route{"GET", "/api/v1beta/events/stream-durable", Pull, false, true}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&stream.Handler{Service: s}).Durable)
	}},
	{Route{"GET", wsbridge.Path, Pull, false, true}, func(s *delivery.Service) http.Handler {
		return &wsbridge.Handler{Service: s, PingInterval: s.Streams().WSPingInterval}
	}},
	{Route{"GET", "/api/v1beta/dead-letters", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&deadletters.Handler{Service: s}).List)
	}},
	{Route{"POST", "/api/v1beta/dead-letters/actions", Destinations, false, false}, func(s *delivery.Service) http.Handler {
		return http.HandlerFunc((&deadletters.Handler{Service: s}).Act)
	}},
	{Route{"POST", "/v1/jobs/{job}", Jobs, false, false}, func(s *delivery.Service) http.Handler {
		return &jobs.Handler{Service: s}
	}},
	{Route{"GET", health.LivePath, All, true, false}, func(*delivery.Service) http.Handler {
		return health.Handler{}
	}},
	{Route{"GET", "/api/v1beta/health", All, true, false}, func(*delivery.Service) http.Handler {
		return health.Handler{}
	}},
	// GET /health/ready's handler needs the Checker of Options; ForFunction
	// mounts it.
	{Route{"GET", health.ReadyPath, All, true, false}, nil},
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

// Serves reports whether function f serves r.
func (f Function) Serves(r Route) bool {
	return f == All || r.Function == All || r.Function == f
}

// New returns the handler for every endpoint. Everything but GET /health
// and GET /health/ready requires a bearer token that a resolves.
func New(svc *delivery.Service, a auth.Authenticator) http.Handler {
	return ForFunction(svc, a, All)
}

// ForFunction returns the handler for f's routes; any other path is 404.
// At most one Options is used.
func ForFunction(svc *delivery.Service, a auth.Authenticator, f Function, opts ...Options) http.Handler {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return Build(svc, a, f, o)
}

// Build returns the handler for f's routes, adjusted by o.
func Build(svc *delivery.Service, a auth.Authenticator, f Function, o Options) http.Handler {
	policy := corsPolicy(o.CORSOrigins)
	admission := o.Admission
	mux := http.NewServeMux()
	for _, r := range table {
		if !f.Serves(r.Route) {
			continue
		}
		var h http.Handler
		if r.handler == nil { // GET /health/ready
			h = health.ReadyHandler{Checker: o.Ready}
		} else {
			h = r.handler(svc)
		}
		if ws, ok := h.(*wsbridge.Handler); ok {
			ws.CheckOrigin = originCheck(policy)
		}
		if !r.Public {
			h = noStore(httpx.Authenticate(a, h))
		}
		if r.Method != "GET" {
			h = admission.Wrap(h, r.Function == Publish)
		}
		if o.RequestTimeout > 0 && !r.QueryToken && r.Function != Jobs {
			h = withTimeout(h, o.RequestTimeout)
		}
		if r.QueryToken {
			h = httpx.Unbounded(stream.AccessTokenFromQuery(h))
		}
		mux.Handle(r.Method+" "+r.Path, h)
	}
	for _, m := range grpcapi.Mounts(svc, a, grpcapi.Services{
		Publisher: f.Serves(Route{Function: Publish}),
		// EventConsumerService holds both consuming (Pull) and queue
		// management (Destinations) RPCs.
		Consumer:     f.Serves(Route{Function: Pull}) || f.Serves(Route{Function: Destinations}),
		Ready:        o.Ready,
		UnaryTimeout: o.RequestTimeout,
	}) {
		h := m.Handler
		if m.Path == "/"+publisherv1betaconnect.EventPublishingServiceName+"/" {
			h = admission.Wrap(h, true)
		} else {
			h = httpx.Unbounded(h) // the consumer's streams, health's Watch
		}
		mux.Handle(m.Path, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, r, herr.New(herr.NotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	if policy == nil {
		return mux
	}
	return policy.Handler(mux)
}
