package local_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/local"
)

// stuckEvents and stuckPad size what the stuck-client tests publish:
// 128 events of 64 KiB, 8 MiB, more than the server's socket buffer can
// take (Linux tunes it up to 4 MiB) once the client has stopped reading.
const (
	stuckEvents = 128
	stuckPad    = 64 << 10
)

// publishPadded publishes n events of eventType with messages
// {"n": i, "pad": "xxx…"} of about stuckPad bytes, requiring each to
// succeed.
func publishPadded(t testing.TB, c *client, eventType string, n int) {
	t.Helper()
	pad := strings.Repeat("x", stuckPad)
	for from := 0; from < n; from += 10 {
		var es []map[string]any
		for i := from; i < min(from+10, n); i++ {
			es = append(es, ev(eventType, "", map[string]any{"n": i, "pad": pad}))
		}
		c.publish(t, es...)
	}
}

// stuckDial connects to addr with a 4 KiB receive buffer, so that a
// client that stops reading stops the server's writes soon.
func stuckDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// readSSE reads SSE frames from r until the stream ends, and returns the
// "n" of every event frame.
func readSSE(t testing.TB, r *bufio.Reader) []int {
	t.Helper()
	var ns []int
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ns
		}
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok && strings.HasPrefix(data, `{"event_type"`) {
			var e consumerEvent
			require.NoError(t, json.Unmarshal([]byte(data), &e))
			ns = append(ns, nValues(t, []consumerEvent{e})...)
		}
	}
}

// TestStuckSSEClientIsDropped: an SSE client that stops reading is
// dropped once a write has waited HERALD_STREAM_WRITE_TIMEOUT: its
// session detaches, and the events it was not sent go back to the
// queue. Reconnected with its token, the client gets every event: those
// the server flushed to it before it stopped reading (still in its
// socket), and the rest. It used to hold its session — and 613 MiB of
// the broker, in the report — for as long as the connection lived.
func TestStuckSSEClientIsDropped(t *testing.T) {
	t.Parallel()
	c := start(t, streamOpts(func(cfg *local.Config) { cfg.StreamWriteTimeout = 2 * time.Second }))
	const typ = "stuck.sse"

	conn := stuckDial(t, strings.TrimPrefix(c.base, "http://"))
	_, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer %s\r\n\r\n",
		streamPath("filter_groups", `[{"event_type":"`+typ+`"}]`), c.token)
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	body := bufio.NewReader(res.Body)
	var token string
	for token == "" {
		line, err := body.ReadString('\n')
		require.NoError(t, err)
		if id, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "id: "); ok {
			token = id
		}
	}
	// From here the client reads nothing.

	publishPadded(t, c, typ, stuckEvents)
	require.Eventually(t, func() bool { return liveSessions(t, c, token) == 0 }, frameWait, 10*time.Millisecond,
		"the server drops a client that takes no frame within the write timeout")

	seen := map[int]bool{}
	_ = conn.SetReadDeadline(time.Now().Add(frameWait))
	for _, n := range readSSE(t, body) { // what it was flushed before, then the end
		seen[n] = true
	}
	require.Less(t, len(seen), stuckEvents, "the client was stuck before it had everything")

	s := c.mustStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
	require.Equal(t, token, s.connected(t))
	for len(seen) < stuckEvents {
		for _, n := range nValues(t, []consumerEvent{s.event(t)}) {
			seen[n] = true
		}
	}
	for i := range stuckEvents {
		require.True(t, seen[i], "event %d reached the client", i)
	}
}

// TestIdleStreamsOutliveTheWriteTimeout: the write timeout bounds writes,
// not silence. Over HTTP/2 a write deadline that passes resets the
// stream whether or not anything is being written, so a deadline left
// armed after a flush would drop every stream that waits longer than
// HERALD_STREAM_WRITE_TIMEOUT for its next event. Here an SSE stream over
// h2c stays quiet past the timeout (keep-alives every 3 s, the timeout
// 1 s) and still delivers.
func TestIdleStreamsOutliveTheWriteTimeout(t *testing.T) {
	t.Parallel()
	c := start(t, streamOpts(func(cfg *local.Config) {
		cfg.StreamWriteTimeout = time.Second
		cfg.SSEKeepAlive = 3 * time.Second
	}))
	h2 := new(http.Protocols)
	h2.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: h2}
	t.Cleanup(tr.CloseIdleConnections)
	h2c := &client{base: c.base, token: c.token, hc: &http.Client{Transport: tr}}

	s := h2c.mustStream(t, streamPath("filter_groups", `[{"event_type":"idle.e"}]`), nil)
	s.connected(t)
	require.Equal(t, "keep-alive", s.frame(t).Comment, "the stream outlived three write timeouts of silence")
	c.publishN(t, "idle.e", 7, 1)
	require.Equal(t, []int{7}, nValues(t, []consumerEvent{s.event(t)}))
}

// TestStuckSSEClientFailsNoPublish: a publish does not depend on how
// fast any consumer reads. An SSE client that never reads used to make
// every publish of its event types answer success:false once the
// in-memory broker's per-subscription bound (max_pending) was reached —
// 644 of 2,000 in the report. Now every publish succeeds, and nothing is
// lost for the stuck client: each event is in its queue, to be delivered
// when it reconnects, or — what its full subscription could not take —
// in the dead-letter queue with reason MAXLEN.
//
// Served by the stream hub (docs/streams-at-scale.md), the queue is in the
// process's memory and the bound is the queue's own maximum length
// (HERALD_QUEUE_MAX_LENGTH, 20 here); served from the store, it is the
// queue's broker subscription's (max_pending, 20 here). Either way the
// overflow is dead-lettered.
func TestStuckSSEClientFailsNoPublish(t *testing.T) {
	t.Parallel()
	for _, hub := range []bool{true, false} {
		t.Run(map[bool]string{true: "hub", false: "store"}[hub], func(t *testing.T) {
			t.Parallel()
			testStuckSSEClientFailsNoPublish(t, hub)
		})
	}
}

func testStuckSSEClientFailsNoPublish(t *testing.T, hub bool) {
	const typ, events = "stuck.publish", 200
	c := start(t, streamOpts(func(cfg *local.Config) {
		cfg.TopicURL = "mem://stuck-publish-" + strings.ReplaceAll(t.Name(), "/", "-") + "?max_pending=20"
		cfg.StreamWriteTimeout = 2 * time.Second
		if hub {
			cfg.QueueMaxLength = 20
		} else {
			cfg.ProcessHeartbeat = 0
		}
	}))
	conn := stuckDial(t, strings.TrimPrefix(c.base, "http://"))
	_, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer %s\r\n\r\n",
		streamPath("filter_groups", `[{"event_type":"`+typ+`"}]`), c.token)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	body := bufio.NewReader(res.Body)
	var token string
	for token == "" {
		line, err := body.ReadString('\n')
		require.NoError(t, err)
		if id, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "id: "); ok {
			token = id
		}
	}

	pad := strings.Repeat("x", stuckPad) // 12.5 MiB in all: more than the socket buffers take
	for from := 0; from < events; from += 10 {
		var es []map[string]any
		for i := from; i < from+10; i++ {
			es = append(es, ev(typ, "", map[string]any{"n": i, "pad": pad}))
		}
		c.publish(t, es...) // every event succeeds
	}

	seen := map[int]bool{}
	var dl struct {
		DeadLetters []struct {
			Reason      string          `json:"reason"`
			OriginQueue string          `json:"origin_queue"`
			Event       json.RawMessage `json:"event"`
		} `json:"dead_letters"`
		Next string `json:"next_page_token"`
	}
	for page := ""; ; page = dl.Next {
		dl.Next = ""
		c.expect(t, http.StatusOK, "GET", "/api/v1beta/dead-letters?limit=100&page_token="+page, nil).decode(t, &dl)
		for _, d := range dl.DeadLetters {
			require.Equal(t, "MAXLEN", d.Reason)
			require.Equal(t, token, d.OriginQueue)
			var e consumerEvent
			require.NoError(t, json.Unmarshal(d.Event, &e))
			seen[nValues(t, []consumerEvent{e})[0]] = true
		}
		if dl.Next == "" {
			break
		}
	}
	require.NotEmpty(t, seen, "the full subscription's overflow is in the dead-letter queue")

	require.Eventually(t, func() bool { return liveSessions(t, c, token) == 0 }, frameWait, 10*time.Millisecond)
	_ = conn.SetReadDeadline(time.Now().Add(frameWait))
	for _, n := range readSSE(t, body) {
		seen[n] = true
	}
	s := c.mustStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
	require.Equal(t, token, s.connected(t))
	for len(seen) < events {
		seen[nValues(t, []consumerEvent{s.event(t)})[0]] = true
	}
	for i := range events {
		require.True(t, seen[i], "event %d was delivered or dead-lettered", i)
	}
}

// TestStuckWebSocketClientIsDropped: the WebSocket bridge holds a client
// that stops reading to the same rule as SSE and gRPC (it always gave a
// write 10 s; HERALD_STREAM_WRITE_TIMEOUT now sets it): with credit
// granted and nothing read, the client is dropped, its session detaches,
// and on reconnect it gets every event it had not received.
func TestStuckWebSocketClientIsDropped(t *testing.T) {
	t.Parallel()
	c := start(t, streamOpts(func(cfg *local.Config) { cfg.StreamWriteTimeout = 2 * time.Second }))
	const typ = "stuck.ws"
	endpoint := "ws" + strings.TrimPrefix(c.base, "http") + wsbridge.Path
	h := &wstest.Harness{Dial: func(t testing.TB, token string, _ url.Values) (*websocket.Conn, *http.Response, error) {
		d := websocket.Dialer{HandshakeTimeout: frameWait, Subprotocols: []string{wsframe.Subprotocol},
			NetDial: func(_, addr string) (net.Conn, error) { return stuckDial(t, addr), nil }}
		return d.Dial(endpoint, http.Header{"Authorization": {"Bearer " + token}})
	}, RESTURL: c.base, Token: c.token, Push: true}

	stuck := wstest.Dial(t, h, c.token)
	token := stuck.Open(map[string]any{"stream": "non_durable", "filter_groups": []map[string]any{{"event_type": typ}}}).ReconnectToken
	stuck.Demand(stuckEvents)
	// From here the client reads nothing.

	publishPadded(t, c, typ, stuckEvents)
	require.Eventually(t, func() bool { return liveSessions(t, c, token) == 0 }, frameWait, 10*time.Millisecond,
		"the server drops a client that takes no frame within the write timeout")

	seen := map[int]bool{}
	_ = stuck.WS().SetReadDeadline(time.Now().Add(frameWait))
	for {
		_, data, err := stuck.WS().ReadMessage()
		if err != nil {
			break
		}
		var f wsframe.ServerFrame
		require.NoError(t, json.Unmarshal(data, &f))
		if f.Type == wsframe.TypeEvent {
			seen[wstest.N(t, f)] = true
		}
	}
	require.Less(t, len(seen), stuckEvents, "the client was stuck before it had everything")

	again := wstest.Dial(t, &wstest.Harness{Dial: wstest.Dialer(endpoint), RESTURL: c.base, Token: c.token, Push: true}, c.token)
	again.Open(map[string]any{"stream": "non_durable", "reconnect_token": token})
	again.Demand(stuckEvents)
	for len(seen) < stuckEvents {
		seen[wstest.N(t, again.Events(1)[0])] = true
	}
	for i := range stuckEvents {
		require.True(t, seen[i], "event %d reached the client", i)
	}
}
