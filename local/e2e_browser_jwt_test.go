package local_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
)

// jwtPage is a browser app on its own origin that signs in with a JWT. It
// reads the non-durable SSE stream with fetch, not EventSource: an
// EventSource cannot send headers, and this page keeps its token out of
// URLs, so the token travels in the Authorization header of both the
// stream's GET and the publish POST (each preflighted, since
// Authorization is not a CORS-safelisted header). The stream is parsed
// by hand from the response body's reader. Once connected, the page
// publishes one event with fetch and logs what it reads.
const jwtPage = `<!doctype html>
<html><head><title>herald jwt</title></head><body><script>
window.heraldLog = [];
const herald = %q, token = %q;
const auth = {"Authorization": "Bearer " + token};
async function publish() {
  const res = await fetch(herald + "/api/v1beta/events", {method: "POST",
    headers: {...auth, "Content-Type": "application/json"},
    body: JSON.stringify({event: {event_type: "browser.jwt", message: {hello: "world"}}})});
  window.heraldLog.push({kind: "published", status: res.status, body: await res.json()});
}
async function stream() {
  const groups = JSON.stringify([{"event_type": "browser.jwt"}]);
  const res = await fetch(herald + "/api/v1beta/events/stream?filter_groups=" + encodeURIComponent(groups), {headers: auth});
  window.heraldLog.push({kind: "stream", status: res.status});
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, i); buf = buf.slice(i + 2);
      let event = "message", data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (!data) continue;
      window.heraldLog.push({kind: event, data: JSON.parse(data)});
      if (event === "connected") publish().catch(e => window.heraldLog.push({kind: "error", data: String(e)}));
    }
  }
}
stream().catch(e => window.heraldLog.push({kind: "error", data: String(e)}));
</script></body></html>`

// TestBrowserJWTCrossOriginE2E drives headless Chromium: a page served
// from another origin than Herald's publishes with fetch and reads an SSE
// stream, authenticated by a JWT from the test issuer, allowed by
// HERALD_CORS_ORIGINS.
//
// It does not run in parallel with the other tests: it drives a browser of
// its own, and a loaded machine slows every browser test that shares it.
func TestBrowserJWTCrossOriginE2E(t *testing.T) {
	_, err := os.Stat(chromiumPath)
	require.NoError(t, err, "the browser test needs Debian's chromium (apt-get install -y chromium)")

	iss := jwttest.New(t)
	var page atomic.Value // the page names Herald's URL, known only once it runs
	page.Store("")
	pageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page.Load().(string)))
	}))
	t.Cleanup(pageSrv.Close)
	h := start(t, withIssuer(iss, pageSrv.URL))
	require.NotEqual(t, pageSrv.URL, h.base, "the page and Herald have different origins (ports)")
	page.Store(fmt.Sprintf(jwtPage, h.base, iss.Token(t, "browser-user", "receive:browser.* publish:browser.*")))

	ctx := startBrowser(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(pageSrv.URL+"/")))

	type entry struct {
		Kind   string          `json:"kind"`
		Status int             `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	var entries []entry
	deadline := time.Now().Add(frameWait)
	for {
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.heraldLog)`))
		require.NoError(t, err)
		entries = nil
		require.NoError(t, json.Unmarshal([]byte(raw), &entries))
		// The event can arrive before the publish's own answer is read:
		// wait for both.
		if (strings.Contains(raw, `"kind":"event"`) && strings.Contains(raw, `"kind":"published"`)) || strings.Contains(raw, `"kind":"error"`) {
			break
		}
		require.True(t, time.Now().Before(deadline), "waiting for the event; the page logged %s", raw)
		time.Sleep(25 * time.Millisecond)
	}
	kinds := map[string]entry{}
	for _, e := range entries {
		kinds[e.Kind] = e
	}
	require.NotContains(t, kinds, "error", "%v", entries)
	require.Equal(t, http.StatusOK, kinds["stream"].Status, "the page logged %v", entries)
	require.Contains(t, kinds, "connected", "the page logged %v", entries)
	var ev struct {
		EventType         string `json:"event_type"`
		PrincipalIdentity string `json:"principal_identity"`
		Message           struct{ Hello string }
	}
	require.NoError(t, json.Unmarshal(kinds["event"].Data, &ev))
	require.Equal(t, "browser.jwt", ev.EventType)
	require.Equal(t, "browser-user", ev.PrincipalIdentity, "the JWT's sub")
	require.Equal(t, "world", ev.Message.Hello)
	require.Equal(t, http.StatusOK, kinds["published"].Status, "the page logged %v", entries)
}
