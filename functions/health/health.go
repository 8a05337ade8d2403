// Package health serves GET /health (seed 002, "Service Health") and
// GET /api/v1beta/health (the path of the notifications API's published
// OpenAPI documents): 200 with {"status":"ok"} while the process serves
// requests. It needs no token.
package health

import (
	"net/http"

	"github.com/heraldevents/herald/functions/httpx"
)

// Handler serves both health paths.
type Handler struct{}

// ServeHTTP implements http.Handler.
func (Handler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
