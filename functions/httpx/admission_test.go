package httpx_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/httpx"
)

// TestAdmissionPublishSlots: a publish past MaxPublishes is refused at
// once with 503 and Retry-After on a REST route (Wrap), and
// RESOURCE_EXHAUSTED on a gRPC route (WrapRPC); a slot is free again once
// its request returns.
func TestAdmissionPublishSlots(t *testing.T) {
	t.Parallel()
	a := &httpx.Admission{MaxPublishes: 1}
	entered, release := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h, rpc := a.Wrap(next, true), a.WrapRPC(next, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/block", nil))
	}()
	<-entered

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/x", nil))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Contains(t, w.Body.String(), "too many publishes")

	r := httptest.NewRequest("POST", "/pkg.S/M", nil)
	r.Header.Set("Content-Type", "application/grpc")
	w = httptest.NewRecorder()
	rpc.ServeHTTP(w, r)
	require.Equal(t, "8", w.Header().Get("Grpc-Status"), "RESOURCE_EXHAUSTED")

	close(release)
	<-done
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/x", nil))
	require.Equal(t, http.StatusNoContent, w.Code)
	require.EqualValues(t, 2, a.Shed())
}

// TestAdmissionBytes: a body of known length past what is left of
// MaxBytes is refused unread; one of unknown length fails its read once
// it passes the bound, and the handler's decode answers 503; everything
// is released when the requests return.
func TestAdmissionBytes(t *testing.T) {
	t.Parallel()
	a := &httpx.Admission{MaxBytes: 100 << 10}
	entered, release := make(chan struct{}), make(chan struct{})
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-release
		}
		var v map[string]string
		if err := httpx.DecodeJSON(r, 1<<20, &v); err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), false)
	body := `{"a":"` + strings.Repeat("x", 60<<10) + `"}`
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/block", strings.NewReader(body)))
	}()
	<-entered
	require.EqualValues(t, len(body), a.InFlightBytes())

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/x", strings.NewReader(body)))
	require.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
	require.Equal(t, "1", w.Header().Get("Retry-After"))

	r := httptest.NewRequest("POST", "/x", io.MultiReader(strings.NewReader(body))) // no length
	r.ContentLength = -1
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())

	close(release)
	<-done
	require.Zero(t, a.InFlightBytes(), "all released")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/x", strings.NewReader(body)))
	require.Equal(t, http.StatusNoContent, w.Code)
}
