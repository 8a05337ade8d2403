package wsbridge_test

import (
	"encoding/json"

	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// start runs a local Herald and returns a harness for it.
func start(t *testing.T, opts ...func(*local.Config)) *wstest.Harness {
	t.Helper()
	var o []local.Option
	for _, f := range opts {
		o = append(o, local.Option(f))
	}
	h := local.Start(t, o...)
	return harness(h.URL, h.Token)
}

func harness(base, token string) *wstest.Harness {
	return &wstest.Harness{
		Dial:    wstest.Dialer("ws" + strings.TrimPrefix(base, "http") + wsbridge.Path),
		RESTURL: base, Token: token, LimitedToken: "unused", DeliveryLimit: 1, Push: true,
	}
}

func openNonDurable(c *wstest.Conn, typ string) {
	c.Open(map[string]any{"stream": "non_durable", "filter_groups": []map[string]any{{"event_type": typ}}})
}

// TestWebSocketCreditIsHeld: demand is credit the bridge keeps: events
// published after a quiet spell are pushed without another demand, and
// no more than the credit.
func TestWebSocketCreditIsHeld(t *testing.T) {
	t.Parallel()
	h := start(t)
	c := wstest.Dial(t, h, h.Token)
	openNonDurable(c, "ws.held")
	c.Demand(3)
	c.Quiet() // nothing published yet: nothing comes
	wstest.Publish(t, h, "ws.held", 0, 2)
	require.Len(t, c.Events(2), 2)
	// One by one: a batch is published in parallel, in any order.
	wstest.Publish(t, h, "ws.held", 2, 1)
	wstest.Publish(t, h, "ws.held", 3, 1)
	require.Equal(t, 2, wstest.N(t, c.Events(1)[0]), "one credit was left")
	c.Quiet()
	c.Demand(1)
	require.Equal(t, 3, wstest.N(t, c.Events(1)[0]))
	c.Close()
}

// TestWebSocketSurplusIsHeldNotLost: Stream.Next leases a batch; what
// passes the credit is held for later credit, and returns to the queue
// when the connection ends.
func TestWebSocketSurplusIsHeldNotLost(t *testing.T) {
	t.Parallel()
	h := start(t)
	wstest.CreateQueue(t, h, "surplus-q", "ws.surplus")
	wstest.Publish(t, h, "ws.surplus", 0, 5)
	c := wstest.Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": "surplus-q"})
	c.Demand(1)
	// The batch publish sends in parallel: events arrive in any order.
	sent := map[int]bool{wstest.N(t, c.Events(1)[0]): true}
	c.Quiet()
	c.Demand(2)
	for _, f := range c.Events(2) {
		sent[wstest.N(t, f)] = true
	}
	require.Len(t, sent, 3)
	c.Quiet()
	c.Close() // nothing was settled; 3 and 4 were leased and never sent

	c = wstest.Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": "surplus-q"})
	c.Demand(10)
	seen := map[int]bool{}
	for _, f := range c.Events(5) {
		seen[wstest.N(t, f)] = true
		require.GreaterOrEqual(t, f.DeliveryCount, int64(2), "every event was leased to the first session")
	}
	require.Len(t, seen, 5, "nothing was lost")
	c.Quiet()
	c.Close()
}

// TestWebSocketDemandPastMaxCredit: a demand that would pass MaxCredit is
// a non-fatal 422.
func TestWebSocketDemandPastMaxCredit(t *testing.T) {
	t.Parallel()
	h := start(t)
	c := wstest.Dial(t, h, h.Token)
	openNonDurable(c, "ws.credit")
	for range wsframe.MaxCredit / wsframe.MaxDemand {
		c.Demand(wsframe.MaxDemand)
	}
	c.Send(map[string]any{"type": "demand", "id": "over", "n": 1})
	require.Equal(t, "over", c.ExpectError(http.StatusUnprocessableEntity, false).ID)
	c.Quiet()
	c.Close()
}

// TestWebSocketKeepAlive: the server pings every interval; a client that
// answers stays connected past two intervals, one that does not is
// closed with 1001.
func TestWebSocketKeepAlive(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *local.Config) { c.WSPingInterval = 100 * time.Millisecond })

	alive := wstest.Dial(t, h, h.Token)
	ws := alive.WS()
	pings := 0
	ws.SetPingHandler(func(data string) error {
		pings++
		if err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second)); err != nil {
			return err
		}
		if pings == 5 { // five intervals: well past the two-interval limit
			return ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping","id":"still-here"}`))
		}
		return nil
	})
	require.Equal(t, "still-here", alive.Expect(wsframe.TypePong).ID)
	ws.SetPingHandler(nil) // the default answers without failing after close
	alive.Close()          // before it falls silent too

	silent := wstest.Dial(t, h, h.Token)
	ignored := 0
	silent.WS().SetPingHandler(func(string) error { ignored++; return nil })
	silent.ExpectClose(wsframe.CloseGoingAway)
	require.Positive(t, ignored, "the server pinged before it gave up")
}

// TestWebSocketReadLimit: a frame over MaxFrameBytes closes with 1009.
func TestWebSocketReadLimit(t *testing.T) {
	t.Parallel()
	h := start(t)
	c := wstest.Dial(t, h, h.Token)
	c.Send(`{"type":"ping","id":"` + strings.Repeat("x", wsframe.MaxFrameBytes) + `"}`)
	c.ExpectClose(wsframe.CloseTooBig)
}

// TestWebSocketInvalidUTF8: a text frame that is not UTF-8 fails the
// connection with 1007 (RFC 6455 §8.1).
func TestWebSocketInvalidUTF8(t *testing.T) {
	t.Parallel()
	h := start(t)
	c := wstest.Dial(t, h, h.Token)
	require.NoError(t, c.WS().WriteMessage(websocket.TextMessage, []byte("{\"type\":\"ping\",\"id\":\"\xff\"}")))
	c.ExpectClose(websocket.CloseInvalidFramePayloadData)
}

// TestWebSocketQueueGone: a durable queue deleted under its stream ends
// it with a fatal 404 and close 4404.
func TestWebSocketQueueGone(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *local.Config) { c.SessionTTL = 600 * time.Millisecond })
	wstest.CreateQueue(t, h, "gone-q", "ws.gone")
	c := wstest.Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": "gone-q"})
	c.Demand(1)
	req, err := http.NewRequest("DELETE", h.RESTURL+"/api/v1beta/queues/durable?queue_id=gone-q", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_ = res.Body.Close()
	c.ExpectError(http.StatusNotFound, true)
	c.ExpectClose(wsframe.CloseCode(http.StatusNotFound))
}

// TestWebSocketShutdownGoesAway: a server shutdown closes open WebSockets
// with 1001 (http.Server.Shutdown alone does not touch hijacked
// connections) and waits for them within its grace.
func TestWebSocketShutdownGoesAway(t *testing.T) {
	t.Parallel()
	cfg := local.DefaultConfig()
	cfg.DevToken, cfg.TopicURL, cfg.StoreURL = "shutdown-token", "mem://ws-shutdown", "mem://ws-shutdown/key"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := local.New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	addr, cancel, served := testkit.Serve(t, srv.Serve)

	h := harness("http://"+addr, "shutdown-token")
	wstest.CreateQueue(t, h, "shutdown-q", "ws.shutdown")
	c := wstest.Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": "shutdown-q"})
	c.Quiet()
	cancel()
	c.ExpectClose(wsframe.CloseGoingAway)
	select {
	case err := <-served:
		require.NoError(t, err, "the server shut down within its grace")
	case <-time.After(wstest.FrameWait):
		t.Fatal("the server did not finish shutting down")
	}
}

// TestWebSocketBeforeUpgrade: the plain HTTP answers: 426 for a GET that
// is not an upgrade, 501 where the connection cannot be hijacked (a
// Lambda behind the HTTP API), 401 first of all; the subprotocol is
// selected only when offered.
func TestWebSocketBeforeUpgrade(t *testing.T) {
	t.Parallel()
	h := start(t)

	req, err := http.NewRequest("GET", h.RESTURL+wsbridge.Path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusUpgradeRequired, res.StatusCode)
	require.Equal(t, "websocket", res.Header.Get("Upgrade"))
	requireErrorBody(t, body)

	res, err = http.Get(h.RESTURL + wsbridge.Path)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "authentication comes first")

	// httptest.ResponseRecorder, like the Lambda adapter's writer, cannot
	// be hijacked.
	rec := httptest.NewRecorder()
	up := httptest.NewRequest("GET", wsbridge.Path, nil)
	for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
		up.Header.Set(k, v)
	}
	up = up.WithContext(auth.WithPrincipal(up.Context(), &auth.Principal{ID: "p", Permissions: []string{"*"}}))
	(&wsbridge.Handler{}).ServeHTTP(rec, up)
	require.Equal(t, http.StatusNotImplemented, rec.Code)
	require.Contains(t, rec.Body.String(), "WebSocket API")
	requireErrorBody(t, rec.Body.Bytes())

	c := wstest.Dial(t, h, h.Token)
	require.Equal(t, wsframe.Subprotocol, c.WS().Subprotocol())
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(h.RESTURL, "http")+wsbridge.Path+"?"+url.Values{"access_token": {h.Token}}.Encode(), nil)
	require.NoError(t, err)
	require.Empty(t, ws.Subprotocol(), "no subprotocol unless offered")
	_ = ws.Close()
}

func requireErrorBody(t *testing.T, body []byte) {
	t.Helper()
	var e struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	require.NotEmpty(t, e.Code)
	require.NotEmpty(t, e.Message)
}

// TestOriginDefault: without CheckOrigin, a browser page of another
// origin is refused 403 before the upgrade; no Origin and the server's
// own pass on (here to the 501 of a writer that cannot be hijacked).
func TestOriginDefault(t *testing.T) {
	t.Parallel()
	call := func(origin string, check func(*http.Request) bool) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		up := httptest.NewRequest("GET", "http://herald.example:8080"+wsbridge.Path, nil)
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
			up.Header.Set(k, v)
		}
		if origin != "" {
			up.Header.Set("Origin", origin)
		}
		up = up.WithContext(auth.WithPrincipal(up.Context(), &auth.Principal{ID: "p", Permissions: []string{"*"}}))
		(&wsbridge.Handler{CheckOrigin: check}).ServeHTTP(rec, up)
		return rec
	}
	require.Equal(t, http.StatusForbidden, call("https://evil.example", nil).Code)
	requireErrorBody(t, call("https://evil.example", nil).Body.Bytes())
	require.Equal(t, http.StatusNotImplemented, call("", nil).Code, "no Origin: not a browser")
	require.Equal(t, http.StatusNotImplemented, call("http://herald.example:8080", nil).Code, "the server's own origin")
	require.Equal(t, http.StatusNotImplemented, call("https://evil.example", func(*http.Request) bool { return true }).Code, "CheckOrigin decides")
}
