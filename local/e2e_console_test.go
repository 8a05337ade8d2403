package local_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/console"
	"github.com/heraldevents/herald/local"
)

// TestConsoleE2E drives the web console in a real headless Chromium as an
// operator would: it signs in with a token, sees a consumer's lag rise
// after a publish, sees a worker's lease in flight, pauses and resumes it, replays a dead letter (which is
// then delivered again), watches a live tail receive an event, publishes
// a test event, and, signed in with a token that may only read events,
// is refused what that token may not do. No page script may fail, and the
// console's answers forbid framing and inline script.
//
// With HERALD_CONSOLE_SCREENSHOTS set to a directory, it saves a
// screenshot of each page there (make console-screenshots: the pictures
// in docs/console.md).
func TestConsoleE2E(t *testing.T) {
	t.Parallel()
	_, err := os.Stat(chromiumPath)
	require.NoError(t, err, "the browser test needs Debian's chromium (apt-get install -y chromium)")
	tokens := auth.StaticTokens{
		"console-reader-token": {ID: "console-reader", Permissions: []string{auth.PermReadEvents, "receive:*"}},
	}
	h := local.Start(t, streamOpts(func(c *local.Config) { c.Tokens = tokens }))
	c := &client{base: h.URL, token: h.Token, hc: &http.Client{Timeout: 30 * time.Second}}

	// The console's own answers: strict CSP, no framing, no inline script.
	res, err := c.raw("GET", console.Path, "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, console.ContentSecurityPolicy, res.Header.Get("Content-Security-Policy"))
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	require.NotContains(t, string(res.Body), "<script>", "no inline script")

	id := c.create(t, []map[string]any{{"event_type": "console.test"}})

	ctx := startBrowser(t)
	var mu sync.Mutex
	var pageErrors []string
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			pageErrors = append(pageErrors, exceptionText(e.ExceptionDetails))
			mu.Unlock()
		}
	}))
	shots := os.Getenv("HERALD_CONSOLE_SCREENSHOTS")
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644))
	}
	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, frameWait)
		defer cancel()
		require.NoError(t, chromedp.Do(wctx, actions...))
	}
	// textOf waits until sel's text satisfies ok, and returns it. The
	// page re-renders a view when its data arrives, so the node found by
	// WaitVisible may be gone when Text reads it ("No node with given id
	// found"): that is retried, on a fresh query, until the deadline.
	textOf := func(sel string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(frameWait)
		for {
			wctx, cancel := context.WithDeadline(ctx, deadline)
			err := chromedp.Do(wctx, chromedp.WaitVisible(sel))
			var s string
			if err == nil {
				s, err = chromedp.Run(wctx, chromedp.Text(sel))
			}
			cancel()
			if err != nil && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err != nil {
				page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
				mu.Lock()
				errs := append([]string(nil), pageErrors...)
				mu.Unlock()
				require.NoError(t, err, "waiting for %s; the page reads:\n%s\npage errors: %q", sel, page, errs)
			}
			if ok(s) {
				return s
			}
			require.True(t, time.Now().Before(deadline), "waiting for %s; it reads %q", sel, s)
			time.Sleep(50 * time.Millisecond)
		}
	}
	is := func(want string) func(string) bool {
		return func(s string) bool { return strings.TrimSpace(s) == want }
	}
	has := func(want string) func(string) bool { return func(s string) bool { return strings.Contains(s, want) } }
	signIn := func(token string) {
		t.Helper()
		run(chromedp.Navigate(h.URL+console.Path), chromedp.WaitVisible("#token"),
			chromedp.SendKeys("#token", token), chromedp.Click("#signin-button"))
	}

	// Sign in; the overview lists the consumer with nothing behind.
	signIn(h.Token)
	lagCell := fmt.Sprintf(`tr[data-id=%q] td[data-col="lag"]`, id)
	textOf(lagCell, is("0"))
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.NotContains(t, href, h.Token, "the token never reaches a URL")

	// Three events: the lag rises to 3.
	c.publishN(t, "console.test", 0, 3)
	run(chromedp.Click("#refresh"))
	textOf(lagCell, is("3"))
	shot("overview")

	// A worker leases one event; the consumer's page lists the lease in
	// flight, with its attempt. Pause the consumer from its page; the API
	// sees it paused.
	l := c.pullLease(t, id, "limit", "1")
	run(chromedp.Click(fmt.Sprintf(`tr[data-id=%q] a`, id)))
	textOf(`dd[data-fact="State"]`, is("active"))
	textOf(`dd[data-fact="Lag"]`, has("2 events"))
	textOf(`#leases tbody tr td[data-col="state"]`, is("held"))
	textOf(`#leases tbody tr td[data-col="attempt"]`, is("1"))
	run(chromedp.Click("#pause"))
	textOf(`dd[data-fact="State"]`, is("paused"))
	require.True(t, c.getDest(t, id).Paused)
	shot("consumer")
	run(chromedp.Click("#pause")) // now "Resume"
	textOf(`dd[data-fact="State"]`, is("active"))
	require.False(t, c.getDest(t, id).Paused)

	// A rejected lease dead-letters its events; replay one from the
	// dead-letter page, and it is delivered again.
	require.Equal(t, "dead_lettered", c.ack(t, id, l.LeaseID, l.Generation, "rejected").Status)
	run(chromedp.Navigate(h.URL + console.Path + "#/dead-letters/" + id))
	row := `#view tbody tr`
	textOf(row, has("REJECTED"))
	shot("dead-letters")
	run(chromedp.Click(row + ` button[data-action="REPLAY"]`))
	textOf("#status", has("REPLAY"))
	replayed := c.drain(t, id)
	require.Len(t, replayed, 3, "the two never leased and the replayed one")
	require.Empty(t, c.listDeadLetters(t, nil).DeadLetters)

	// Live tail: an event published after the stream opens appears.
	run(chromedp.Navigate(h.URL+console.Path+"#/tail"), chromedp.WaitVisible("#tail-type"),
		chromedp.SendKeys("#tail-type", "console.tail"), chromedp.Click("#tail-start"))
	run(chromedp.WaitVisible(`#tail-events[data-connected="true"]`))
	c.publishN(t, "console.tail", 7, 1)
	textOf(`#tail-events li[data-type="console.tail"] pre`, has(`"n": 7`))
	shot("tail")
	run(chromedp.Click("#tail-stop"))

	// Publish a test event from the page; the consumer's lag shows it.
	run(chromedp.Navigate(h.URL+console.Path+"#/publish"), chromedp.WaitVisible("#pub-type"),
		chromedp.SendKeys("#pub-type", "console.test"), chromedp.SetValue("#pub-message", `{"from": "console"}`),
		chromedp.Click("#pub-send"))
	textOf("#pub-result", has(`"success": true`))
	shot("publish")
	got := c.drain(t, id)
	require.Len(t, got, 1)
	require.Contains(t, string(got[0].Data), `"from":"console"`)

	run(chromedp.Navigate(h.URL+console.Path+"#/health"), chromedp.WaitVisible("#health"))
	textOf(`dd[data-fact="Ready"]`, is("ready"))
	textOf(`dd[data-fact="Broker"]`, is("mem"))
	textOf(`dd[data-fact="Store"]`, is("mem"))
	textOf(`dd[data-fact="Console sign-in"]`, is("token"))
	shot("health")

	// A token that may only read events is refused the consumer list, as
	// the API refuses it, and the console says so.
	run(chromedp.Click("#signout"))
	signIn("console-reader-token")
	textOf("#status", has("403"))
	run(chromedp.Navigate(h.URL + console.Path + "#/consumer/" + id))
	textOf("#status", has("403"))

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, pageErrors, "no page script failed (a CSP violation included)")
}

// exceptionText says what a page's uncaught exception was.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "an exception"
	}
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return d.Text
}
