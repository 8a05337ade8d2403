// Package router mounts every REST function on one http.Handler: what the
// local adapter and a Cloud Run service serve, and what a Lambda adapter
// wraps.
package router

import (
	"net/http"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/acknowledge"
	"github.com/heraldevents/herald/functions/destinations"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/publish"
	"github.com/heraldevents/herald/functions/pull"
	"github.com/heraldevents/herald/herr"
)

// New returns the handler for every endpoint. Everything but GET /health
// requires a bearer token that a resolves.
func New(svc *delivery.Service, a auth.Authenticator) http.Handler {
	mux := http.NewServeMux()
	authed := func(h http.Handler) http.Handler { return httpx.Authenticate(a, h) }
	fn := func(f http.HandlerFunc) http.Handler { return authed(f) }

	pub := &publish.Handler{Service: svc}
	mux.Handle("POST /api/v1beta/events", fn(pub.Single))
	mux.Handle("POST /api/v1beta/events/batch", fn(pub.Batch))

	dst := &destinations.Handler{Service: svc}
	mux.Handle("POST /v1/event-destinations", fn(dst.Create))
	mux.Handle("GET /v1/event-destinations", fn(dst.List))
	mux.Handle("GET /v1/event-destinations/{id}", fn(dst.Get))
	mux.Handle("DELETE /v1/event-destinations/{id}", fn(dst.Delete))
	mux.Handle("POST /v1/event-destinations/{id}/pause", fn(dst.Pause))
	mux.Handle("POST /v1/event-destinations/{id}/resume", fn(dst.Resume))
	mux.Handle("POST /v1/event-destinations/{id}/pull", authed(&pull.Handler{Service: svc}))
	mux.Handle("POST /v1/event-destinations/{id}/acknowledge", authed(&acknowledge.Handler{Service: svc}))

	mux.Handle("GET /health", health.Handler{})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, r, herr.New(herr.NotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}
