package router_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/internal/testkit"
)

// gateBody is a request body whose first Read says so and then waits
// until it is opened: a publish that holds its admission slot.
type gateBody struct {
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gateBody) Read([]byte) (int, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	return 0, io.EOF
}

// TestShedByRouteNotContentType: a shed request is answered in the
// protocol of its route. A REST publish sent as the documentation's own
// curl examples send it (Content-Type: application/json) is 503 with
// Retry-After and Herald's JSON error body, as the notifications API
// documents for an overloaded REST service; it used to be connect-go's
// Connect answer, 429 resource_exhausted, because connect-go takes
// application/json for its Connect protocol. The gRPC service's route
// still answers RESOURCE_EXHAUSTED in the caller's RPC protocol. And a
// flood of refusals writes one rate-limited warning, not an error line
// per request.
//
// Not parallel: it replaces slog's default logger, where WriteError logs.
func TestShedByRouteNotContentType(t *testing.T) {
	var logs testkit.SyncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	a := &httpx.Admission{MaxPublishes: 1}
	h := router.Build(newService(t), auth.DevToken("tok"), config.All, router.Options{Admission: a})

	gate := &gateBody{entered: make(chan struct{}), open: make(chan struct{})}
	held := make(chan struct{})
	go func() {
		defer close(held)
		r := httptest.NewRequest("POST", "/api/v1beta/events", gate)
		r.Header.Set("Authorization", "Bearer tok")
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-gate.entered // the slot is taken
	defer func() { close(gate.open); <-held }()

	send := func(path, contentType, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer tok")
		r.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const shed = 50
	for i := range shed {
		path := "/api/v1beta/events"
		if i%2 == 1 {
			path += "/batch"
		}
		w := send(path, "application/json", `{"event":{"event_type":"a.b","message":{}}}`)
		require.Equal(t, http.StatusServiceUnavailable, w.Code, "%s: %s", path, w.Body.String())
		require.Equal(t, "1", w.Header().Get("Retry-After"))
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		var body httpx.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
		require.Equal(t, "unavailable", body.Code)
		require.Contains(t, body.Message, "too many publishes in progress")
	}

	const rpc = "/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/PublishEvent"
	w := send(rpc, "application/grpc", "")
	require.Equal(t, "8", w.Header().Get("Grpc-Status"), "gRPC: RESOURCE_EXHAUSTED")
	w = send(rpc, "application/json", `{}`)
	require.Equal(t, http.StatusTooManyRequests, w.Code, "Connect over JSON on the gRPC route: its resource_exhausted")
	require.Contains(t, w.Body.String(), `"resource_exhausted"`)
	require.EqualValues(t, shed+2, a.Shed())

	out := logs.String()
	require.Zero(t, strings.Count(out, "level=ERROR"), "a refusal is not a server failure:\n%s", out)
	require.Equal(t, 1, strings.Count(out, `msg="request shed: the server is overloaded"`),
		"%d refusals write one warning until the interval ends:\n%s", shed+2, out)
	require.Contains(t, out, `level=WARN msg="request shed: the server is overloaded" bound="too many publishes in progress" route="POST /api/v1beta/events"`)
}
