package local_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/local"
)

// browserWSPage drives Herald's WebSocket bridge with the browser's own
// WebSocket. A browser cannot set an Authorization header on it, so the
// token rides in the access_token query parameter. window.connect opens
// a durable stream on a queue (and demands, when demand > 0);
// window.send sends a frame on the "main" socket. Every server frame and
// every open, error and close event lands in window.heraldLog.
const browserWSPage = `<!doctype html>
<html><head><title>herald websocket</title></head><body><script>
window.heraldLog = [];
window.sockets = {};
const token = %q;
window.connect = function (name, queueID, openID, demand) {
  const ws = new WebSocket("ws://" + location.host + "/api/v1beta/events/websocket?access_token=" + encodeURIComponent(token), "herald.v1");
  window.sockets[name] = ws;
  ws.onopen = () => {
    window.heraldLog.push({ws: name, kind: "open", protocol: ws.protocol, herald_v1: ws.protocol === "herald.v1"});
    const open = {type: "open", stream: "durable", queue_id: queueID};
    if (openID) open.id = openID;
    ws.send(JSON.stringify(open));
    if (demand > 0) ws.send(JSON.stringify({type: "demand", n: demand}));
  };
  ws.onmessage = e => window.heraldLog.push({ws: name, kind: "frame", frame: JSON.parse(e.data)});
  ws.onerror = () => window.heraldLog.push({ws: name, kind: "error"});
  ws.onclose = e => window.heraldLog.push({ws: name, kind: "close", code: e.code, reason: e.reason, was_clean: e.wasClean});
};
window.send = function (obj) {
  const ws = window.sockets.main;
  if (ws.readyState !== WebSocket.OPEN) throw new Error("the main socket is not open (readyState " + ws.readyState + ")");
  ws.send(JSON.stringify(obj));
};
window.connect("main", %q, "", 3);
</script></body></html>`

// wsLogEntry is one thing the WebSocket page recorded.
type wsLogEntry struct {
	WS       string               `json:"ws"`   // "main" or "bad"
	Kind     string               `json:"kind"` // open, frame, error, close
	Protocol string               `json:"protocol"`
	HeraldV1 bool                 `json:"herald_v1"`
	Frame    *wsframe.ServerFrame `json:"frame"`
	Code     int                  `json:"code"`
	Reason   string               `json:"reason"`
	WasClean bool                 `json:"was_clean"`
}

// wsUpgrade is what the front saw of one upgrade request.
type wsUpgrade struct {
	accessToken   bool   // the access_token query parameter was there
	authorization string // the Authorization header
	protocols     string // Sec-WebSocket-Protocol
}

// wsFront serves the page and hands every other request, WebSocket
// upgrades included, to Herald's handler unchanged: the ResponseWriter it
// passes on is the server's own, so the bridge can hijack it.
type wsFront struct {
	herald http.Handler
	page   string

	mu       sync.Mutex
	upgrades []wsUpgrade
}

func (f *wsFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/page":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(f.page))
		return
	case wsbridge.Path:
		f.mu.Lock()
		f.upgrades = append(f.upgrades, wsUpgrade{
			accessToken:   r.URL.Query().Has("access_token"),
			authorization: r.Header.Get("Authorization"),
			protocols:     r.Header.Get("Sec-WebSocket-Protocol"),
		})
		f.mu.Unlock()
	}
	f.herald.ServeHTTP(w, r)
}

func (f *wsFront) seen() []wsUpgrade {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.upgrades)
}

// TestBrowserWebSocketE2E drives a real headless Chromium: its native
// WebSocket authenticates with access_token, negotiates herald.v1, opens
// a durable stream, and the test checks flow control (demand is credit),
// ack and nack with settled answers, redelivery of the nacked event, the
// normal close (1000) and a fatal open on an unknown queue (error 404,
// close 4404). No frame ever carries the token.
func TestBrowserWebSocketE2E(t *testing.T) {
	t.Parallel()
	_, err := os.Stat(chromiumPath)
	require.NoError(t, err, "the browser test needs Debian's chromium (apt-get install -y chromium)")

	h := local.Start(t)
	typ := "browser.ws." + strings.ToLower(rand.Text())
	queue := "browser-ws-" + strings.ToLower(rand.Text())
	front := &wsFront{herald: h.Server.Handler(), page: fmt.Sprintf(browserWSPage, h.Token, queue)}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	c := &client{base: srv.URL, token: h.Token, hc: srv.Client()}

	status, _ := c.createQueue(t, queue, []map[string]any{{"event_type": typ}})
	require.Equal(t, http.StatusCreated, status)

	ctx := startBrowser(t)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/page")))

	// rawLog is the page's log as JSON.
	rawLog := func() string {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.heraldLog)`))
		require.NoError(t, err)
		return raw
	}
	// readLog waits until the page's log satisfies done and returns it.
	readLog := func(what string, done func([]wsLogEntry) bool) []wsLogEntry {
		t.Helper()
		deadline := time.Now().Add(frameWait)
		for {
			raw := rawLog()
			var entries []wsLogEntry
			require.NoError(t, json.Unmarshal([]byte(raw), &entries))
			if done(entries) {
				return entries
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s; the page logged %s", what, raw)
			time.Sleep(25 * time.Millisecond)
		}
	}
	// send sends a frame from the page on the main socket.
	send := func(frame any) {
		t.Helper()
		b, err := json.Marshal(frame)
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("window.send(%s)", b))))
	}
	of := func(es []wsLogEntry, ws, kind string) []wsLogEntry {
		var out []wsLogEntry
		for _, e := range es {
			if e.WS == ws && e.Kind == kind {
				out = append(out, e)
			}
		}
		return out
	}
	frames := func(es []wsLogEntry) []wsframe.ServerFrame {
		var out []wsframe.ServerFrame
		for _, e := range of(es, "main", "frame") {
			out = append(out, *e.Frame)
		}
		return out
	}
	types := func(fs []wsframe.ServerFrame) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.Type
		}
		return out
	}
	events := func(fs []wsframe.ServerFrame) []wsframe.ServerFrame {
		var out []wsframe.ServerFrame
		for _, f := range fs {
			if f.Type == wsframe.TypeEvent {
				out = append(out, f)
			}
		}
		return out
	}
	answered := func(typ, id string) func([]wsLogEntry) bool {
		return func(es []wsLogEntry) bool {
			return slices.ContainsFunc(frames(es), func(f wsframe.ServerFrame) bool { return f.Type == typ && f.ID == id })
		}
	}
	// quiet pings and requires the frames since the last check to be
	// exactly want, the pong last: no event came before the pong.
	seenFrames := 0
	quiet := func(id string, want ...string) []wsframe.ServerFrame {
		t.Helper()
		send(map[string]any{"type": "ping", "id": id})
		fs := frames(readLog("pong "+id, answered(wsframe.TypePong, id)))
		got := fs[seenFrames:]
		require.Equal(t, append(want, wsframe.TypePong), types(got), "frames before pong %q: %+v", id, got)
		seenFrames = len(fs)
		return got
	}

	// The socket opens with the subprotocol, and the stream with the queue.
	es := readLog("the connected frame", answered(wsframe.TypeConnected, ""))
	opened := of(es, "main", "open")
	require.Len(t, opened, 1)
	require.Equal(t, wsframe.Subprotocol, opened[0].Protocol)
	require.True(t, opened[0].HeraldV1, "ws.protocol === \"herald.v1\" in the page")
	connected := frames(es)[0]
	require.Equal(t, wsframe.TypeConnected, connected.Type)
	require.Equal(t, "durable", connected.Stream)
	require.Equal(t, queue, connected.QueueID)

	// Five events, credit for three: three arrive and no fourth.
	c.publishN(t, typ, 0, 5)
	readLog("three events", func(es []wsLogEntry) bool { return len(events(frames(es))) >= 3 })
	first := events(quiet("q", wsframe.TypeConnected, wsframe.TypeEvent, wsframe.TypeEvent, wsframe.TypeEvent))
	seenN := map[int]int{}
	tags := map[int64]bool{}
	for _, f := range first {
		require.Equal(t, typ, f.Event.EventType)
		require.EqualValues(t, 1, f.DeliveryCount)
		require.NotZero(t, f.DeliveryTag)
		tags[f.DeliveryTag] = true
		seenN[wstest.N(t, f)]++
	}
	require.Len(t, tags, 3, "three distinct delivery tags")

	// Ack the first two, nack the third.
	send(map[string]any{"type": "ack", "id": "a1", "delivery_tags": []int64{first[0].DeliveryTag, first[1].DeliveryTag}})
	send(map[string]any{"type": "nack", "id": "n1", "delivery_tags": []int64{first[2].DeliveryTag}})
	readLog("settled a1 and n1", func(es []wsLogEntry) bool {
		return answered(wsframe.TypeSettled, "a1")(es) && answered(wsframe.TypeSettled, "n1")(es)
	})
	// Without credit the nacked event waits too.
	settled := quiet("q2", wsframe.TypeSettled, wsframe.TypeSettled)
	for _, f := range settled[:2] {
		require.NotNil(t, f.Acked)
		require.NotNil(t, f.Nacked)
		require.NotNil(t, f.Skipped)
		switch f.ID {
		case "a1":
			require.Equal(t, [3]int{2, 0, 0}, [3]int{*f.Acked, *f.Nacked, *f.Skipped}, "settled a1 (acked, nacked, skipped)")
		case "n1":
			require.Equal(t, [3]int{0, 1, 0}, [3]int{*f.Acked, *f.Nacked, *f.Skipped}, "settled n1 (acked, nacked, skipped)")
		default:
			t.Fatalf("settled frame answers no frame of ours: %+v", f)
		}
	}

	// More credit: the two left, and the nacked one again.
	send(map[string]any{"type": "demand", "n": 10})
	readLog("six events", func(es []wsLogEntry) bool { return len(events(frames(es))) >= 6 })
	rest := events(quiet("q3", wsframe.TypeEvent, wsframe.TypeEvent, wsframe.TypeEvent))
	nacked := wstest.N(t, first[2])
	redelivered := 0
	var restTags []int64
	for _, f := range rest {
		require.Equal(t, typ, f.Event.EventType)
		require.False(t, tags[f.DeliveryTag], "a new delivery tag, not a reused one: %+v", f)
		tags[f.DeliveryTag] = true
		restTags = append(restTags, f.DeliveryTag)
		n := wstest.N(t, f)
		if n == nacked {
			require.EqualValues(t, 2, f.DeliveryCount, "the nacked event comes back with delivery_count 2")
			redelivered++
			continue
		}
		require.EqualValues(t, 1, f.DeliveryCount)
		seenN[n]++
	}
	require.Equal(t, 1, redelivered, "the nacked event is redelivered once")
	require.Equal(t, map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}, seenN, "every event delivered once, besides the redelivery")

	send(map[string]any{"type": "ack", "id": "a2", "delivery_tags": restTags})
	readLog("settled a2", answered(wsframe.TypeSettled, "a2"))
	// Credit is left (7) but the queue is empty: nothing else arrives.
	final := quiet("q4", wsframe.TypeSettled)[0]
	require.Equal(t, "a2", final.ID)
	require.Equal(t, [3]int{3, 0, 0}, [3]int{*final.Acked, *final.Nacked, *final.Skipped}, "settled a2 (acked, nacked, skipped)")

	// The page closes; the server answers 1000.
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.sockets.main.close(1000)`)))
	es = readLog("the main socket's close", func(es []wsLogEntry) bool { return len(of(es, "main", "close")) > 0 })
	closed := of(es, "main", "close")
	require.Len(t, closed, 1)
	require.Equal(t, 1000, closed[0].Code)
	require.True(t, closed[0].WasClean)
	require.Empty(t, of(es, "main", "error"))

	// A second socket on a queue that does not exist: a fatal 404, then
	// close 4404.
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.connect("bad", "no-such-queue", "o2", 0)`)))
	es = readLog("the bad socket's close", func(es []wsLogEntry) bool { return len(of(es, "bad", "close")) > 0 })
	bad := of(es, "bad", "open")
	require.Len(t, bad, 1)
	require.Equal(t, wsframe.Subprotocol, bad[0].Protocol)
	badFrames := of(es, "bad", "frame")
	require.Len(t, badFrames, 1, "one error frame, then the close: %s", rawLog())
	fatal := badFrames[0].Frame
	require.Equal(t, wsframe.TypeError, fatal.Type)
	require.Equal(t, "o2", fatal.ID)
	require.Equal(t, http.StatusNotFound, fatal.StatusCode)
	require.Equal(t, "not_found", fatal.Code)
	require.True(t, fatal.Fatal)
	require.NotEmpty(t, fatal.Message)
	badClose := of(es, "bad", "close")
	require.Len(t, badClose, 1)
	require.Equal(t, 4404, badClose[0].Code)
	require.Equal(t, wsframe.CloseCode(http.StatusNotFound), badClose[0].Code)

	// The token came in the query, never in a header, and never came back.
	containsNone(t, []byte(rawLog()), h.Token)
	upgrades := front.seen()
	require.Len(t, upgrades, 2)
	for _, u := range upgrades {
		require.True(t, u.accessToken)
		require.Empty(t, u.authorization)
		require.Equal(t, wsframe.Subprotocol, u.protocols)
	}
}
