// Package openapi holds Herald's OpenAPI 3.1 document, openapi.yaml beside
// this file, and serves it:
//
//	GET /openapi.yaml  → 200 application/yaml, the file byte for byte
//	GET /openapi.json  → 200 application/json, the same document as JSON
//
// The document describes every REST route of package functions/router —
// the durable-consumer API (compatible with Occtoo's), the notifications
// API (compatible with NVIDIA Omniverse's) and Herald's own endpoints —
// with their parameters, bodies, limits and every status they answer.
// The gRPC services are described by their protos (proto/nvidia/…) and the
// WebSocket frames by docs/websocket.md instead.
//
// It is written by hand and held to the code by tests: openapi_test.go
// checks that its paths and methods are exactly router.Routes (a route
// missing from it, or one it has that the router does not, fails), and
// local/openapi_test.go drives a live local.Start server through every
// route and validates each request and answer against it with
// github.com/getkin/kin-openapi. Change it with the handlers.
//
// The routes are public (no token): the document holds no secret, and a
// client generator or an API browser fetches it before it has a token.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
)

// Paths of the two forms of the document.
const (
	YAMLPath = "/openapi.yaml"
	JSONPath = "/openapi.json"
)

//go:embed openapi.yaml
var document []byte

// YAML returns the document as written (a copy: callers may change it).
func YAML() []byte { return append([]byte(nil), document...) }

// toJSON converts the document once, when first asked for: a process
// that never serves it (most Lambda invocations) never pays for it.
var toJSON = sync.OnceValues(func() ([]byte, error) { return convert(document) })

// JSON returns the document as JSON (a copy). Its members are in sorted
// order; its values are the YAML's. It fails only if the embedded YAML
// does not parse, which the package's tests rule out.
func JSON() ([]byte, error) {
	b, err := toJSON()
	return append([]byte(nil), b...), err
}

// convert decodes YAML into plain values and encodes them as JSON.
func convert(y []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(y, &v); err != nil {
		return nil, fmt.Errorf("openapi: the document is not YAML: %w", err)
	}
	v, err := plain(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// plain turns the mappings YAML decodes with keys of other types
// (map[any]any) into JSON objects; a key that is not a string is an error
// (status codes are quoted in the document for this reason).
func plain(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			e, err := plain(e)
			if err != nil {
				return nil, err
			}
			v[k] = e
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("openapi: a mapping key is not a string: %v (quote it)", k)
			}
			e, err := plain(e)
			if err != nil {
				return nil, err
			}
			out[s] = e
		}
		return out, nil
	case []any:
		for i, e := range v {
			e, err := plain(e)
			if err != nil {
				return nil, err
			}
			v[i] = e
		}
		return v, nil
	}
	return v, nil
}

// Handler serves the document at YAMLPath and JSONPath: mount it on both
// (GET). Any other path is 404.
type Handler struct{}

// ServeHTTP implements http.Handler.
func (Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var (
		b           []byte
		contentType string
	)
	switch r.URL.Path {
	case YAMLPath:
		b, contentType = document, "application/yaml" // RFC 9512
	case JSONPath:
		var err error
		if b, err = toJSON(); err != nil {
			httpx.WriteError(w, r, herr.Wrap(herr.Internal, err, "the OpenAPI document could not be converted to JSON"))
			return
		}
		contentType = "application/json"
	default:
		httpx.WriteError(w, r, herr.New(herr.NotFound, "no such document: %s", r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
