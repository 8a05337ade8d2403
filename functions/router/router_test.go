package router_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/internal/testkit/inmem"
)

func newService(t testing.TB) *delivery.Service {
	t.Helper()
	return inmem.New(t, inmem.Options{}).Service
}

// noRoute reports whether the answer is the catch-all 404 for a path no
// route matches.
func noRoute(t *testing.T, rec *httptest.ResponseRecorder) bool {
	t.Helper()
	if rec.Code != http.StatusNotFound {
		return false
	}
	var body struct{ Message string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	return strings.HasPrefix(body.Message, "no such endpoint")
}

// TestFunctionsServeOnlyTheirRoutes sends every route to every function:
// a function answers its own routes (and those of every function: the
// health checks, the OpenAPI document) and 404s the rest.
func TestFunctionsServeOnlyTheirRoutes(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	tokens := auth.DevToken("tok")
	for _, f := range append(config.Functions(), config.All) {
		h := router.ForFunction(svc, tokens, f)
		served := 0
		for _, r := range router.Routes() {
			path := strings.NewReplacer("{id}", "no-such-id", "{job}", "no-such-job").Replace(r.Path)
			req := httptest.NewRequest(r.Method, path, strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer tok")
			if r.QueryToken {
				// An SSE stream runs until its client leaves: this one
				// has left already.
				ctx, cancel := context.WithCancel(req.Context())
				cancel()
				req = req.WithContext(ctx)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if r.ServedBy(f) {
				served++
				require.False(t, noRoute(t, rec), "%s should serve %s %s", f, r.Method, r.Path)
			} else {
				require.True(t, noRoute(t, rec), "%s should not serve %s %s (got %d)", f, r.Method, r.Path, rec.Code)
			}
		}
		if f == config.Websocket {
			// API Gateway WebSocket events are not HTTP routes.
			shared := 0
			for _, r := range router.Routes() {
				if r.Function == config.All {
					shared++
				}
			}
			require.Equal(t, 6, shared, "the health checks, the configuration summary and the OpenAPI document")
			require.Equal(t, shared, served, "%s serves only the health checks, the configuration summary and the OpenAPI document", f)
			continue
		}
		require.Greater(t, served, 1, "%s serves its routes and /health", f)
	}
}

func TestEveryRouteHasAFunctionAndAuth(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	h := router.New(svc, auth.DevToken("tok"))
	seen := map[config.Function]bool{}
	for _, r := range router.Routes() {
		seen[r.Function] = true
		path := strings.NewReplacer("{id}", "x", "{job}", "lease-expiry").Replace(r.Path)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(r.Method, path, nil))
		if r.Public {
			require.Equal(t, http.StatusOK, rec.Code, r.Path)
		} else {
			require.Equal(t, http.StatusUnauthorized, rec.Code, "%s %s needs a token", r.Method, r.Path)
		}
	}
	for _, f := range config.Functions() {
		require.Equal(t, f != config.Websocket, seen[f], "function %s has routes (websocket has none: it takes WebSocket events)", f)
	}
}

func TestParseFunction(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFunction("pull")
	require.NoError(t, err)
	require.Equal(t, config.Pull, f)
	_, err = config.ParseFunction("pulls")
	require.ErrorContains(t, err, "known: publish, pull, acknowledge, destinations, jobs, websocket, all")
	require.True(t, config.Publish.UsesBroker())
	require.True(t, config.Publish.UsesStore(), "for the claim-check")
	require.False(t, config.Acknowledge.UsesBroker())
	require.True(t, config.Jobs.UsesStore())
	require.True(t, config.Websocket.UsesBroker() && config.Websocket.UsesStore())
}
