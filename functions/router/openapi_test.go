package router_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/openapi"
	"github.com/heraldevents/herald/functions/router"
)

// loadDocument loads the OpenAPI document with kin-openapi and validates it.
func loadDocument(t *testing.T, b []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(b)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	return doc
}

// routeDiff compares the routes with the operations of doc: the routes doc
// lacks and the operations no route serves, as "METHOD /path".
func routeDiff(doc *openapi3.T, routes []router.Route) (missing, extra []string) {
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	routed := map[string]bool{}
	for _, r := range routes {
		k := r.Method + " " + r.Path
		routed[k] = true
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !routed[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

// TestEveryRouteIsInTheOpenAPIDocument: the OpenAPI document's paths and
// methods are exactly router.Routes (the two use the same {name} path
// syntax): a route added without its documentation, or documentation left
// behind by a removed route, fails here.
func TestEveryRouteIsInTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t, openapi.YAML())
	missing, extra := routeDiff(doc, router.Routes())
	require.Empty(t, missing, "routes missing from functions/openapi/openapi.yaml")
	require.Empty(t, extra, "operations in functions/openapi/openapi.yaml that no route serves")
}

// TestRouteDiffCatchesBoth: the comparison above fails on a missing route
// and on an extra operation, so its pass means something.
func TestRouteDiffCatchesBoth(t *testing.T) {
	t.Parallel()
	y := string(openapi.YAML())
	// Rename one path of the document: its route is then missing, and the
	// renamed path is an operation no route serves.
	doctored := strings.Replace(y, "\n  /v1/jobs/{job}:\n", "\n  /v1/jobz/{job}:\n", 1)
	require.NotEqual(t, y, doctored)
	missing, extra := routeDiff(loadDocument(t, []byte(doctored)), router.Routes())
	require.Equal(t, []string{"POST /v1/jobs/{job}"}, missing)
	require.Equal(t, []string{"POST /v1/jobz/{job}"}, extra)

	routes := append(router.Routes(), router.Route{Method: "GET", Path: "/v1/undocumented"})
	missing, extra = routeDiff(loadDocument(t, openapi.YAML()), routes)
	require.Equal(t, []string{"GET /v1/undocumented"}, missing)
	require.Empty(t, extra)
}

// TestOpenAPIDocumentFollowsTheRouteTable: what Build wraps each route in
// is in its operation. Public routes need no token (security: []) and
// list no 401; the others take the bearer token and answer 401, and the
// routes that take the token in the access_token query parameter
// (QueryToken) say so with the accessToken scheme and the parameter. A
// route without a request timeout lists no 504 (one with a timeout lists
// it where a backend call can outlast it); every route lists 503 (the
// connection bounds shed any request).
func TestOpenAPIDocumentFollowsTheRouteTable(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t, openapi.YAML())
	for _, r := range router.Routes() {
		name := r.Method + " " + r.Path
		op := doc.Paths.Find(r.Path).GetOperation(r.Method)
		require.NotNil(t, op, name)
		status := func(code int) bool { return op.Responses.Status(code) != nil }

		var schemes []string
		if op.Security == nil {
			for _, req := range doc.Security {
				for s := range req {
					schemes = append(schemes, s)
				}
			}
		} else {
			for _, req := range *op.Security {
				for s := range req {
					schemes = append(schemes, s)
				}
			}
		}
		slices.Sort(schemes)
		hasAccessParam := op.Parameters.GetByInAndName("query", "access_token") != nil
		switch {
		case r.Public:
			require.NotNil(t, op.Security, "%s: a public route says security: []", name)
			require.Empty(t, schemes, "%s is public", name)
			require.False(t, status(http.StatusUnauthorized), "%s needs no token: no 401", name)
		case r.QueryToken:
			require.Equal(t, []string{"accessToken", "bearerAuth"}, schemes, name)
			require.True(t, hasAccessParam, "%s takes access_token", name)
			require.True(t, status(http.StatusUnauthorized), name)
		default:
			require.Equal(t, []string{"bearerAuth"}, schemes, name)
			require.False(t, hasAccessParam, "%s takes no access_token", name)
			require.True(t, status(http.StatusUnauthorized), name)
			require.True(t, status(http.StatusBadRequest), "%s: two Authorization headers are 400", name)
		}
		if timed := !r.Public && !r.QueryToken && r.Function != config.Jobs; !timed {
			require.False(t, status(http.StatusGatewayTimeout), "%s has no request timeout: no 504", name)
		}
		require.True(t, status(http.StatusServiceUnavailable), "%s lists 503", name)
	}
}

// TestEveryFunctionServesTheDocument: the served document is the file,
// byte for byte, from every function (a deployment of several functions
// serves it from each), without a token; the JSON form is the same
// document.
func TestEveryFunctionServesTheDocument(t *testing.T) {
	t.Parallel()
	file, err := os.ReadFile("../openapi/openapi.yaml")
	require.NoError(t, err)
	svc := newService(t)
	for _, f := range append(config.Functions(), config.All) {
		h := router.ForFunction(svc, auth.DevToken("tok"), f)
		get := func(path string) (*http.Response, []byte) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			res := rec.Result()
			b, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			return res, b
		}
		res, b := get("/openapi.yaml")
		require.Equal(t, http.StatusOK, res.StatusCode, "%s", f)
		require.Equal(t, "application/yaml", res.Header.Get("Content-Type"))
		require.Equal(t, string(file), string(b), "%s serves the file", f)

		res, b = get("/openapi.json")
		require.Equal(t, http.StatusOK, res.StatusCode, "%s", f)
		require.Equal(t, "application/json", res.Header.Get("Content-Type"))
		fromJSON := loadDocument(t, b)
		fromFile := loadDocument(t, file)
		require.Equal(t, fmt.Sprint(fromFile.Paths.InMatchingOrder()), fmt.Sprint(fromJSON.Paths.InMatchingOrder()))
		require.Equal(t, len(fromFile.Components.Schemas), len(fromJSON.Components.Schemas))
	}
}
