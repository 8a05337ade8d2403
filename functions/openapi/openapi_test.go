package openapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/openapi"
	"github.com/heraldevents/herald/herr"
)

// load parses b with kin-openapi and validates it as the OpenAPI version
// it declares, examples included.
func load(t *testing.T, b []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(b)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background(), openapi3.EnableMultiError()))
	return doc
}

// TestDocumentIsOpenAPI31: the document loads and validates as OpenAPI
// 3.1 (JSON Schema 2020-12 schemas; every example valid against its
// schema), and its operations have the ids a generated client names its
// functions by.
func TestDocumentIsOpenAPI31(t *testing.T) {
	t.Parallel()
	doc := load(t, openapi.YAML())
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.True(t, doc.IsOpenAPI31OrLater())
	require.False(t, doc.IsOpenAPI32OrLater())
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			require.NotEmpty(t, op.OperationID, "%s %s", method, path)
			require.NotEmpty(t, op.Summary, "%s %s", method, path)
			require.NotEmpty(t, op.Tags, "%s %s", method, path)
		}
	}
}

// TestDocumentHasTheHerrCodes: the ErrorCode enum is Herald's error
// vocabulary, every code of package herr and nothing else.
func TestDocumentHasTheHerrCodes(t *testing.T) {
	t.Parallel()
	doc := load(t, openapi.YAML())
	var codes []string
	for c := herr.Code(0); !strings.HasPrefix(c.String(), "code("); c++ {
		codes = append(codes, c.String())
	}
	var enum []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	require.Len(t, codes, 16)
	require.ElementsMatch(t, codes, enum)
}

// TestJSONIsTheYAML: the JSON form is the same document as the file,
// member for member (both loaded by kin-openapi and written out again).
func TestJSONIsTheYAML(t *testing.T) {
	t.Parallel()
	file, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	require.Equal(t, file, openapi.YAML(), "the embedded document is the file")
	j, err := openapi.JSON()
	require.NoError(t, err)
	require.True(t, json.Valid(j))
	fromYAML, err := json.Marshal(load(t, file))
	require.NoError(t, err)
	fromJSON, err := json.Marshal(load(t, j))
	require.NoError(t, err)
	require.JSONEq(t, string(fromYAML), string(fromJSON))
}

// TestHandlerServesBothForms: the YAML byte for byte with its media type
// (RFC 9512), the JSON with its; any other path is 404 with Herald's error
// body.
func TestHandlerServesBothForms(t *testing.T) {
	t.Parallel()
	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		openapi.Handler{}.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	rec := serve(openapi.YAMLPath)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/yaml", rec.Header().Get("Content-Type"))
	require.Equal(t, openapi.YAML(), rec.Body.Bytes())

	rec = serve(openapi.JSONPath)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	j, err := openapi.JSON()
	require.NoError(t, err)
	require.Equal(t, j, rec.Body.Bytes())

	rec = serve("/openapi.txt")
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), `"code":"not_found"`)
}

// TestCopiesAreCopies: a caller that changes what YAML or JSON returned
// changes nothing served.
func TestCopiesAreCopies(t *testing.T) {
	t.Parallel()
	y := openapi.YAML()
	y[0] = '!'
	require.NotEqual(t, y, openapi.YAML())
	j, err := openapi.JSON()
	require.NoError(t, err)
	orig := slices.Clone(j)
	j[0] = '!'
	again, err := openapi.JSON()
	require.NoError(t, err)
	require.Equal(t, orig, again)
}
