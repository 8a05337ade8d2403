// Package wstest is the conformance suite of Herald's WebSocket frame
// protocol (package functions/wsframe, docs/websocket.md): one set of end
// to end cases that every bridge runs against a live deployment, with a
// real WebSocket client (gorilla's). The gorilla bridge of the local
// adapter and Cloud Run (functions/wsbridge) runs it with Push true; the
// API Gateway bridge (functions/wslambda) with Push false.
//
// The suite asserts frame types, status codes and close codes, never
// message texts. Every read has a deadline (FrameWait); "nothing more
// arrives" is asserted by a ping frame whose pong must come first, never
// by sleeping.
//
// A hookup is a few lines:
//
//	func TestWebSocketConformance(t *testing.T) {
//		h := local.Start(t, …)
//		wstest.Run(t, wstest.Harness{Dial: …, RESTURL: h.URL, Token: h.Token, …, Push: true})
//	}
package wstest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldevents/herald/functions/wsframe"
)

// FrameWait bounds every wait for one frame. It is longer than
// delivery.DeadLetterPoll (2 s), the slowest thing the suite waits for.
const FrameWait = 15 * time.Second

// Harness connects the suite to one deployment.
type Harness struct {
	// Dial opens a WebSocket to the deployment's endpoint as bearer token
	// (none when ""), adding query to the URL. It returns what
	// websocket.Dialer.Dial does: on a refused upgrade, the error and the
	// HTTP response (body unread).
	Dial func(t testing.TB, token string, query url.Values) (*websocket.Conn, *http.Response, error)
	// RESTURL is the base URL of the deployment's REST API, e.g.
	// "http://127.0.0.1:8080": the suite publishes events (POST
	// /api/v1beta/events/batch) and creates durable queues (POST
	// /api/v1beta/queues/durable) there.
	RESTURL string
	// Token holds every permission.
	Token string
	// LimitedToken is valid but holds none of receive:PATTERN,
	// consume-durable-queues and inspect-and-replay-all-dlq.
	LimitedToken string
	// OtherToken is valid for a principal other than Token's that holds
	// receive:* and neither "*" nor manage:destinations: it may resume a
	// non-durable queue Token's principal made, not re-filter it.
	OtherToken string
	// ReaderToken, when set, holds exactly ReaderPermissions: a principal
	// that may consume durable queues but receive only some of a queue's
	// events. The WithheldEvents case runs only with it.
	ReaderToken string
	// DeliveryLimit is the deployment's HERALD_DELIVERY_LIMIT; the
	// dead-letter case delivers an event this often. Keep it small (1–5).
	DeliveryLimit int
	// Push says that the bridge holds credit and pushes events as they
	// arrive (the gorilla bridge). When false (API Gateway), a demand may
	// be answered by fewer events and an idle frame with the unmet
	// demand, which the suite sends again.
	Push bool
	// NoCloseCodes says that the bridge cannot choose the close code that
	// follows a fatal error frame (API Gateway closes with its own code
	// after DeleteConnection); the suite then checks the error frame and
	// that the connection closes, not the code.
	NoCloseCodes bool
}

// Run runs every case against h, as parallel subtests.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Dial == nil || h.RESTURL == "" || h.Token == "" || h.LimitedToken == "" || h.OtherToken == "" || h.DeliveryLimit < 1 {
		t.Fatal("wstest: Harness needs Dial, RESTURL, Token, LimitedToken, OtherToken and DeliveryLimit")
	}
	cases := []struct {
		name string
		run  func(*testing.T, *Harness)
	}{
		{"ConnectedWithToken", testConnected},
		{"AccessTokenQuery", testAccessTokenQuery},
		{"PingPong", testPingPong},
		{"PublishDemandEvents", testPublishDemandEvents},
		{"FlowControl", testFlowControl},
		{"DurableAckNack", testDurableAckNack},
		{"DurableExtendAndDelayedNack", testDurableExtendAndDelayedNack},
		{"ReconnectWithToken", testReconnect},
		{"ReconnectTokenOfAnother", testReconnectTokenOfAnother},
		{"DurableRedeliveredAfterReconnect", testDurableRedelivered},
		{"DeadLetters", testDeadLetters},
		{"FrameErrors", testFrameErrors},
		{"OpenErrors", testOpenErrors},
		{"Unauthenticated", testUnauthenticated},
		{"PermissionDenied", testPermissionDenied},
	}
	if h.ReaderToken != "" {
		cases = append(cases, struct {
			name string
			run  func(*testing.T, *Harness)
		}{"WithheldEvents", testWithheldEvents})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &h)
		})
	}
}

// ReaderPermissions are Harness.ReaderToken's permissions: durable queues
// may be consumed, and of their events only those whose type starts with
// "ws.readable." received.
var ReaderPermissions = []string{"consume-durable-queues", "receive:ws.readable.*"}

// Dialer returns a Harness.Dial for the endpoint URL (ws:// or wss://,
// e.g. "ws://127.0.0.1:8080/api/v1beta/events/websocket"): gorilla's
// client, offering wsframe.Subprotocol, with the token in the
// Authorization header.
func Dialer(endpoint string) func(t testing.TB, token string, query url.Values) (*websocket.Conn, *http.Response, error) {
	return func(t testing.TB, token string, query url.Values) (*websocket.Conn, *http.Response, error) {
		t.Helper()
		u := endpoint
		if len(query) > 0 {
			u += "?" + query.Encode()
		}
		hdr := http.Header{}
		if token != "" {
			hdr.Set("Authorization", "Bearer "+token)
		}
		d := websocket.Dialer{HandshakeTimeout: FrameWait, Subprotocols: []string{wsframe.Subprotocol}}
		return d.Dial(u, hdr)
	}
}

// Conn is a client connection of the suite.
type Conn struct {
	t       testing.TB
	h       *Harness
	ws      *websocket.Conn
	backlog []wsframe.ServerFrame // read while waiting for another frame
	pings   int
}

// Dial connects as token and fails the test if the upgrade is refused.
// The connection is closed when the test ends.
func Dial(t testing.TB, h *Harness, token string) *Conn {
	t.Helper()
	ws, res, err := h.Dial(t, token, nil)
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, status(res))
	}
	c := &Conn{t: t, h: h, ws: ws}
	t.Cleanup(func() { _ = ws.Close() })
	return c
}

// WS returns the underlying gorilla connection, for tests that go beyond
// frames (control frames, raw messages).
func (c *Conn) WS() *websocket.Conn { return c.ws }

func status(res *http.Response) string {
	if res == nil {
		return "no response"
	}
	return res.Status
}

// Send writes one frame (a value marshalled as JSON, or a raw string).
func (c *Conn) Send(frame any) {
	c.t.Helper()
	var b []byte
	switch f := frame.(type) {
	case string:
		b = []byte(f)
	default:
		var err error
		if b, err = json.Marshal(f); err != nil {
			c.t.Fatalf("marshal frame: %v", err)
		}
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(FrameWait))
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

// Next returns the next frame (the backlog first), failing the test when
// none arrives within FrameWait or the connection ends.
func (c *Conn) Next() wsframe.ServerFrame {
	c.t.Helper()
	if len(c.backlog) > 0 {
		f := c.backlog[0]
		c.backlog = c.backlog[1:]
		return f
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(FrameWait))
	kind, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	if kind != websocket.TextMessage {
		c.t.Fatalf("frame is not a text message (%d)", kind)
	}
	var f wsframe.ServerFrame
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatalf("frame is not JSON: %v", err)
	}
	return f
}

// Expect returns the next frame, which must be of type typ.
func (c *Conn) Expect(typ string) wsframe.ServerFrame {
	c.t.Helper()
	f := c.Next()
	if f.Type != typ {
		c.t.Fatalf("want a %s frame, got %+v", typ, f)
	}
	return f
}

// ExpectError returns the next frame, which must be an error of status
// whose fatal flag is fatal.
func (c *Conn) ExpectError(status int, fatal bool) wsframe.ServerFrame {
	c.t.Helper()
	f := c.Expect(wsframe.TypeError)
	if f.StatusCode != status || f.Fatal != fatal || f.Message == "" || f.Code == "" {
		c.t.Fatalf("want an error frame of status %d (fatal %v) with a code and message, got %+v", status, fatal, f)
	}
	return f
}

// Open sends an open frame and returns the connected frame.
func (c *Conn) Open(open map[string]any) wsframe.ServerFrame {
	c.t.Helper()
	open["type"] = wsframe.TypeOpen
	open["id"] = "open-1"
	c.Send(open)
	f := c.Expect(wsframe.TypeConnected)
	if f.ID != "open-1" || f.Stream != open["stream"] {
		c.t.Fatalf("connected frame does not answer the open frame: %+v", f)
	}
	return f
}

// Demand sends a demand frame for n.
func (c *Conn) Demand(n int) { c.t.Helper(); c.Send(map[string]any{"type": "demand", "n": n}) }

// Events reads until it holds n event frames. Other frames are kept in
// the backlog, except idle, which (Push false only) is answered by
// demanding the unmet rest again, for at most FrameWait without an event.
func (c *Conn) Events(n int) []wsframe.ServerFrame {
	c.t.Helper()
	var out, other []wsframe.ServerFrame
	progress := time.Now()
	for len(out) < n {
		f := c.Next()
		switch {
		case f.Type == wsframe.TypeEvent || f.Type == wsframe.TypeDeadLetteredEvent:
			out = append(out, f)
			progress = time.Now()
		case f.Type == wsframe.TypeIdle:
			if c.h.Push {
				c.t.Fatalf("a push bridge sent idle: %+v", f)
			}
			if time.Since(progress) > FrameWait {
				c.t.Fatalf("%d of %d events arrived; demands have been answered idle for %v", len(out), n, FrameWait)
			}
			if f.Unmet != nil && *f.Unmet > 0 {
				c.Demand(*f.Unmet)
			}
		case f.Type == wsframe.TypeError:
			c.t.Fatalf("error frame while waiting for events: %+v", f)
		default:
			other = append(other, f)
		}
	}
	c.backlog = append(other, c.backlog...)
	return out
}

// Answer reads until the frame of type typ with correlation id arrives
// and returns it; events read meanwhile stay in the backlog.
func (c *Conn) Answer(typ, id string) wsframe.ServerFrame {
	c.t.Helper()
	var kept []wsframe.ServerFrame
	for {
		f := c.Next()
		if f.Type == typ && f.ID == id {
			c.backlog = append(kept, c.backlog...)
			return f
		}
		if f.Type == wsframe.TypeError {
			c.t.Fatalf("error frame while waiting for %s %q: %+v", typ, id, f)
		}
		kept = append(kept, f)
	}
}

// Quiet asserts that no event is on its way: a ping frame's pong is the
// next frame (idle frames aside when Push is false), and the backlog
// holds no event.
func (c *Conn) Quiet() {
	c.t.Helper()
	for _, f := range c.backlog {
		if f.Type == wsframe.TypeEvent || f.Type == wsframe.TypeDeadLetteredEvent {
			c.t.Fatalf("an unexpected event arrived: %+v", f)
		}
	}
	c.backlog = nil
	c.pings++
	id := fmt.Sprintf("quiet-%d", c.pings)
	c.Send(map[string]any{"type": "ping", "id": id})
	for {
		f := c.Next()
		switch {
		case f.Type == wsframe.TypePong && f.ID == id:
			return
		case f.Type == wsframe.TypeIdle && !c.h.Push:
		default:
			c.t.Fatalf("want nothing before pong %q, got %+v", id, f)
		}
	}
}

// ExpectClose reads until the server closes and checks the close code.
func (c *Conn) ExpectClose(code int) {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(FrameWait))
	for {
		_, _, err := c.ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("want close %d, got %v", code, err)
		}
		if ce.Code != code {
			c.t.Fatalf("want close %d, got %d (%q)", code, ce.Code, ce.Text)
		}
		return
	}
}

// ExpectFatalClose reads until the server closes after a fatal error of
// the HTTP status status: the close code is wsframe.CloseCode(status),
// unless the harness says the bridge cannot choose codes, when any close
// (or end of the connection) passes.
func (c *Conn) ExpectFatalClose(status int) {
	c.t.Helper()
	if !c.h.NoCloseCodes {
		c.ExpectClose(wsframe.CloseCode(status))
		return
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(FrameWait))
	for {
		_, _, err := c.ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("want the connection closed after a fatal %d, still open after %s", status, FrameWait)
		}
		_ = errors.As(err, &ce) // any code: API Gateway chooses it
		return
	}
}

// Close closes normally (1000) and waits for the server's answer, 1000.
func (c *Conn) Close() {
	c.t.Helper()
	err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(FrameWait))
	if err != nil {
		c.t.Fatalf("send close: %v", err)
	}
	c.ExpectClose(wsframe.CloseNormal)
	_ = c.ws.Close()
}

// --- REST helpers ---------------------------------------------------------

// unique returns a fresh name with prefix, so parallel cases and repeated
// runs never share event types or queues.
func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func rest(t testing.TB, h *Harness, method, path string, body any, want ...int) []byte {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(h.RESTURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	for _, w := range want {
		if res.StatusCode == w {
			return out
		}
	}
	t.Fatalf("%s %s: %s %s", method, path, res.Status, out)
	return nil
}

// Publish publishes events of typ whose messages are {"n": from}, …,
// {"n": from+count-1}, in one batch, and checks each succeeded.
func Publish(t testing.TB, h *Harness, typ string, from, count int) {
	t.Helper()
	events := make([]map[string]any, count)
	for i := range events {
		events[i] = map[string]any{"event_type": typ, "message": map[string]any{"n": from + i}, "resource": map[string]any{"resource_id": fmt.Sprintf("/n/%d", from+i)}}
	}
	var res struct {
		Results []struct {
			Success bool `json:"success"`
		} `json:"results"`
	}
	if err := json.Unmarshal(rest(t, h, "POST", "/api/v1beta/events/batch", map[string]any{"events": events}, http.StatusOK), &res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Results {
		if !r.Success {
			t.Fatalf("publish %d of %s failed", i, typ)
		}
	}
	if len(res.Results) != count {
		t.Fatalf("publish: %d results for %d events", len(res.Results), count)
	}
}

// CreateQueue creates the durable queue id with one filter group on typ.
func CreateQueue(t testing.TB, h *Harness, id, typ string) {
	t.Helper()
	rest(t, h, "POST", "/api/v1beta/queues/durable", map[string]any{
		"queue_id": id, "filter_groups": []map[string]any{{"event_type": typ}},
	}, http.StatusCreated)
}

// N returns an event frame's message n.
func N(t testing.TB, f wsframe.ServerFrame) int {
	t.Helper()
	if f.Event == nil {
		t.Fatalf("frame carries no event: %+v", f)
	}
	var m struct {
		N *int `json:"n"`
	}
	if err := json.Unmarshal(f.Event.Message, &m); err != nil || m.N == nil {
		t.Fatalf("event message has no n: %s", f.Event.Message)
	}
	return *m.N
}

func groups(types ...string) []map[string]any {
	out := make([]map[string]any, len(types))
	for i, typ := range types {
		out[i] = map[string]any{"event_type": typ}
	}
	return out
}
