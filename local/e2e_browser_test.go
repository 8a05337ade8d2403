package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/local"
)

// chromiumPath is Debian's chromium; .ci/run installs it when missing.
const chromiumPath = "/usr/bin/chromium"

// startBrowser starts a headless Chromium for t, closed when t ends, with
// the flags a machine without Internet access needs (no background
// networking). No timeout on the context it returns: it owns the browser
// (see chromedp.Run); every wait has its own deadline.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	return ctx
}

// browserPage opens an EventSource on Herald's non-durable stream and
// records every frame. EventSource cannot set an Authorization header, so
// the page authenticates with the access_token query parameter.
const browserPage = `<!doctype html>
<html><head><title>herald sse</title></head><body><script>
window.heraldLog = [];
const groups = JSON.stringify([{"event_type": "browser.test"}]);
const es = new EventSource("/api/v1beta/events/stream?filter_groups=" + encodeURIComponent(groups) +
  "&access_token=" + encodeURIComponent(%q));
es.addEventListener("connected", e => window.heraldLog.push({kind: "connected", id: e.lastEventId, data: JSON.parse(e.data)}));
es.addEventListener("event", e => window.heraldLog.push({kind: "event", id: e.lastEventId, data: JSON.parse(e.data)}));
es.addEventListener("error", e => window.heraldLog.push({kind: "error", data: e.data || null, state: es.readyState}));
</script></body></html>`

// logEntry is one frame the page recorded.
type logEntry struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Data struct {
		ReconnectToken string          `json:"reconnect_token"`
		EventType      string          `json:"event_type"`
		Message        json.RawMessage `json:"message"`
	} `json:"data"`
}

// sseFront serves the test page and passes everything else to Herald's
// handler, from one origin. It remembers the Last-Event-ID of every stream
// request and can drop the open streams, as a server restart or a proxy
// timeout would.
type sseFront struct {
	herald http.Handler
	page   string

	mu       sync.Mutex
	open     map[int]context.CancelFunc
	seq      int
	lastIDs  []string // Last-Event-ID of each stream request, "" when absent
	finished int      // stream requests whose handler returned
}

func (f *sseFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/page":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(f.page))
	case r.URL.Path == "/api/v1beta/events/stream":
		ctx, cancel := context.WithCancel(r.Context())
		f.mu.Lock()
		f.seq++
		id := f.seq
		f.open[id] = cancel
		f.lastIDs = append(f.lastIDs, r.Header.Get("Last-Event-ID"))
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.open, id)
			f.finished++
			f.mu.Unlock()
		}()
		f.herald.ServeHTTP(w, r.WithContext(ctx))
	default:
		f.herald.ServeHTTP(w, r)
	}
}

// dropAll ends every open stream from the server side.
func (f *sseFront) dropAll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cancel := range f.open {
		cancel()
	}
	return len(f.open)
}

func (f *sseFront) requests() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lastIDs...), f.finished
}

// TestBrowserReconnectE2E drives a real headless Chromium: its EventSource
// opens a non-durable stream, the server drops the connection, the
// browser reconnects on its own sending Last-Event-ID, and every event
// published before, during and after the gap arrives exactly once, on the
// one queue.
func TestBrowserReconnectE2E(t *testing.T) {
	t.Parallel()
	_, err := os.Stat(chromiumPath)
	require.NoError(t, err, "the browser test needs Debian's chromium (apt-get install -y chromium)")

	h := local.Start(t, streamOpts(func(c *local.Config) { c.SSEKeepAlive = time.Second }))
	front := &sseFront{herald: h.Server.Handler(), page: fmt.Sprintf(browserPage, h.Token), open: map[int]context.CancelFunc{}}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	c := &client{base: srv.URL, token: h.Token, hc: srv.Client()}

	ctx := startBrowser(t)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/page")))

	// readLog waits until the page's log satisfies done and returns it.
	readLog := func(what string, done func([]logEntry) bool) []logEntry {
		t.Helper()
		deadline := time.Now().Add(frameWait)
		for {
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.heraldLog)`))
			require.NoError(t, err)
			var entries []logEntry
			require.NoError(t, json.Unmarshal([]byte(raw), &entries))
			if done(entries) {
				return entries
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s; the page logged %s", what, raw)
			time.Sleep(25 * time.Millisecond)
		}
	}
	count := func(kind string) func([]logEntry) int {
		return func(es []logEntry) int {
			n := 0
			for _, e := range es {
				if e.Kind == kind {
					n++
				}
			}
			return n
		}
	}
	connections, events := count("connected"), count("event")

	entries := readLog("the connected frame", func(es []logEntry) bool { return connections(es) == 1 })
	token := entries[0].ID
	require.NotEmpty(t, token)
	require.Equal(t, token, entries[0].Data.ReconnectToken)

	c.publishN(t, "browser.test", 0, 5)
	c.publishN(t, "other.type", 100, 2)
	readLog("five events", func(es []logEntry) bool { return events(es) == 5 })

	// The server drops the stream; while the browser is away, more events
	// are published to its queue.
	require.Equal(t, 1, front.dropAll())
	deadline := time.Now().Add(frameWait)
	for _, finished := front.requests(); finished < 1; _, finished = front.requests() {
		require.True(t, time.Now().Before(deadline), "the dropped stream's handler did not return")
		time.Sleep(5 * time.Millisecond)
	}
	c.publishN(t, "browser.test", 5, 5)

	// The browser reconnects by itself with Last-Event-ID and gets the
	// backlog, then what comes next.
	readLog("the reconnection", func(es []logEntry) bool { return connections(es) == 2 })
	c.publishN(t, "browser.test", 10, 5)
	entries = readLog("fifteen events", func(es []logEntry) bool { return events(es) >= 15 })

	ids, _ := front.requests()
	require.Equal(t, []string{"", token}, ids, "the browser sent the token back in Last-Event-ID")
	seen := map[int]int{}
	var second *logEntry
	for i, e := range entries {
		switch e.Kind {
		case "connected":
			if i > 0 {
				second = &entries[i]
			}
		case "event":
			require.Equal(t, "browser.test", e.Data.EventType)
			require.Equal(t, token, e.ID, "event frames carry no id, so the browser's last event id stays the token")
			var m struct{ N int }
			require.NoError(t, json.Unmarshal(e.Data.Message, &m))
			seen[m.N]++
		}
	}
	require.NotNil(t, second)
	require.Equal(t, token, second.ID, "the same queue, not a second one")
	require.Equal(t, token, second.Data.ReconnectToken)
	for n := range 15 {
		require.Equal(t, 1, seen[n], "event %d delivered once (log %v)", n, seen)
	}
	require.Len(t, seen, 15)

	// Herald holds exactly one non-durable queue: the reconnect made none.
	var list struct {
		Destinations []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"destinations"`
	}
	c.expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil).decode(t, &list)
	var queues []string
	for _, d := range list.Destinations {
		if strings.HasPrefix(d.Type, "NON_DURABLE") {
			queues = append(queues, d.ID)
		}
	}
	// Listed by a prefix only: the id is the reconnect token.
	require.Equal(t, []string{delivery.RedactQueue(delivery.NonDurable, token)}, queues)
}
