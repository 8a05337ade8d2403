package router

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/cors"
)

// CORS headers: what a browser app may send and read. Authorization
// carries the bearer token, Last-Event-ID resumes an SSE stream read with
// fetch; the Connect-, Grpc- and X-Grpc-Web headers are those of the
// Connect and gRPC-Web protocols. Browsers may read WWW-Authenticate (why
// a token was refused) and Retry-After.
var (
	corsMethods = []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete}
	corsAllowed = []string{"Authorization", "Content-Type", "Last-Event-ID",
		"Connect-Protocol-Version", "Connect-Timeout-Ms", "Grpc-Timeout", "X-Grpc-Web", "X-User-Agent"}
	corsExposed = []string{"WWW-Authenticate", "Retry-After", "Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"}
)

// corsMaxAge is how long (seconds) a browser may cache a preflight answer.
const corsMaxAge = 600

// corsPolicy returns the CORS policy of origins (HERALD_CORS_ORIGINS), or
// nil for none. Credentials (cookies) are never allowed: Herald
// authenticates by bearer token only, so "*" is answered as "*".
func corsPolicy(origins []string) *cors.Cors {
	if len(origins) == 0 {
		return nil
	}
	return cors.New(cors.Options{
		AllowedOrigins: origins, AllowedMethods: corsMethods,
		AllowedHeaders: corsAllowed, ExposedHeaders: corsExposed,
		MaxAge: corsMaxAge, AllowCredentials: false,
	})
}

// originCheck returns the WebSocket upgrade's Origin rule: a request
// without Origin (not a browser) or from the server's own origin is
// allowed, another origin only when policy allows it.
func originCheck(policy *cors.Cors) func(*http.Request) bool {
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		if origin == "" {
			return true
		}
		if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Host, r.Host) {
			return true
		}
		return policy != nil && policy.OriginAllowed(r)
	}
}
