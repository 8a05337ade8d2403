package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/console"
	"github.com/heraldevents/herald/functions/consoleauth"
	"github.com/heraldevents/herald/local"
)

// TestConsoleOIDCE2E signs the web console in through a real local
// OpenID Connect issuer (package jwttest: discovery, keys, an
// authorization endpoint and a token endpoint that checks PKCE) in
// headless Chromium: the operator clicks "Sign in with the identity
// provider", comes back signed in, sees the overview, pauses a consumer
// (a permission they hold), tails a stream, is refused a publish (one
// they do not hold), and signs out. Herald is opened as http://localhost:PORT and the issuer
// as http://127.0.0.1:PORT, two sites, so the issuer's redirect back is
// cross-site as in production: the flow cookie is Lax, the session
// cookie Strict. The session cookie is checked too: HttpOnly, Strict, no
// token in it, and useless without the CSRF header.
func TestConsoleOIDCE2E(t *testing.T) {
	t.Parallel()
	_, err := os.Stat(chromiumPath)
	require.NoError(t, err, "the browser test needs Debian's chromium (apt-get install -y chromium)")

	iss := jwttest.New(t)
	const clientID = "herald-console"
	iss.SetLogin(clientID, "oidc-operator", "manage:destinations receive:*")
	h := local.Start(t, func(c *local.Config) {
		c.JWT = jwtauth.Config{Issuer: iss.URL, Audiences: []string{jwttest.DefaultAudience}}
		c.ConsoleOIDC = config.ConsoleOIDC{ClientID: clientID, Scopes: []string{"openid", "manage:destinations", "receive:*"}}
	})
	c := &client{base: h.URL, token: h.Token, hc: &http.Client{Timeout: 30 * time.Second}}
	base := strings.Replace(h.URL, "127.0.0.1", "localhost", 1)
	require.NotEqual(t, h.URL, base)

	id := c.create(t, []map[string]any{{"event_type": "console.oidc"}})
	c.publishN(t, "console.oidc", 0, 2)

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
	b := &browser{t: t, ctx: ctx, errors: func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), pageErrors...) }}
	cookies := func() map[string]*network.Cookie {
		t.Helper()
		got, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
			res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
			return res.Cookies, err
		})
		require.NoError(t, err)
		out := map[string]*network.Cookie{}
		for _, ck := range got {
			out[ck.Name] = ck
		}
		return out
	}

	// Not signed in: the page offers the identity provider.
	b.run(chromedp.Navigate(base+console.Path), chromedp.WaitVisible("#oidc-signin"))
	if dir := os.Getenv("HERALD_CONSOLE_SCREENSHOTS"); dir != "" {
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "signin.png"), png, 0o644))
	}
	require.Empty(t, cookies())

	// Sign in: to the issuer and back, on the overview with the lag.
	b.run(chromedp.Click("#oidc-signin"))
	lagCell := fmt.Sprintf(`tr[data-id=%q] td[data-col="lag"]`, id)
	b.textOf(lagCell, is("2"))
	b.textOf("#whoami", has("oidc-operator"))
	require.Equal(t, 1, iss.Exchanges(), "one code redeemed, with its PKCE verifier")
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.Equal(t, base+console.Path+"#/overview", href, "no code, state or token left in the URL")
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(sessionStorage) + document.cookie`))
	require.NoError(t, err)
	require.Equal(t, "{}", stored, "nothing in session storage, and no cookie a script can read")

	jar := cookies()
	require.NotContains(t, jar, "herald-console-flow", "the flow cookie is spent")
	sess := jar["herald-console"]
	require.NotNil(t, sess, "the session cookie (no __Host- prefix on plain-HTTP loopback)")
	require.True(t, sess.HTTPOnly)
	require.Equal(t, network.CookieSameSiteStrict, sess.SameSite)
	require.Equal(t, "/", sess.Path)
	require.NotContains(t, sess.Value, ".", "the token is sealed: no JWT in the clear")

	// The cookie is one more bearer credential, checked as any: without
	// the CSRF header it is refused; with it, the principal's own
	// permissions apply.
	withCookie := func(method, path, csrf string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(`{"event": {"event_type": "console.oidc", "message": {}}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: sess.Name, Value: sess.Value})
		if csrf != "" {
			req.Header.Set(consoleauth.CSRFHeader, csrf)
		}
		res, err := c.hc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, body
	}
	status, body := withCookie("GET", "/v1/event-destinations", "")
	require.Equal(t, http.StatusForbidden, status, "%s", body)
	require.Contains(t, string(body), consoleauth.CSRFHeader)
	status, body = withCookie("GET", consoleauth.SessionPath, "")
	require.Equal(t, http.StatusOK, status)
	var info consoleauth.SessionInfo
	require.NoError(t, json.Unmarshal(body, &info))
	require.True(t, info.SignedIn)
	require.Equal(t, "oidc-operator", info.Principal)
	status, body = withCookie("GET", "/v1/event-destinations", info.CSRF)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), id)
	status, _ = withCookie("POST", "/api/v1beta/events", info.CSRF)
	require.Equal(t, http.StatusForbidden, status, "no publish: permission, whichever way the token comes")

	// What the principal may do works: pause and resume from the page.
	b.run(chromedp.Click(fmt.Sprintf(`tr[data-id=%q] a`, id)))
	b.textOf(`dd[data-fact="State"]`, is("active"))
	b.run(chromedp.Click("#pause"))
	b.textOf(`dd[data-fact="State"]`, is("paused"))
	require.True(t, c.getDest(t, id).Paused)
	b.run(chromedp.Click("#pause"))
	b.textOf(`dd[data-fact="State"]`, is("active"))

	// The live tail streams with the cookie too (fetch, CSRF header).
	b.run(chromedp.Navigate(base+console.Path+"#/tail"), chromedp.WaitVisible("#tail-type"),
		chromedp.SendKeys("#tail-type", "console.oidc.tail"), chromedp.Click("#tail-start"))
	b.run(chromedp.WaitVisible(`#tail-events[data-connected="true"]`))
	c.publishN(t, "console.oidc.tail", 5, 1)
	b.textOf(`#tail-events li[data-type="console.oidc.tail"] pre`, has(`"n": 5`))
	b.run(chromedp.Click("#tail-stop"))

	// What it may not do is refused, as the API refuses it.
	b.run(chromedp.Navigate(base+console.Path+"#/publish"), chromedp.WaitVisible("#pub-type"),
		chromedp.SendKeys("#pub-type", "console.oidc"), chromedp.Click("#pub-send"))
	b.textOf("#status", has("403"))
	require.Len(t, c.drain(t, id), 2, "nothing published beyond the test's own two events")

	// Sign out: the cookie is gone, and a reload is signed out.
	b.run(chromedp.Click("#signout"), chromedp.WaitVisible("#oidc-signin"))
	b.waitFor(func() bool { _, ok := cookies()["herald-console"]; return !ok }, "the session cookie is cleared")
	b.run(chromedp.Navigate(base+console.Path+"#/overview"), chromedp.WaitVisible("#oidc-signin"))
	b.textOf("#whoami", is(""))

	require.Empty(t, b.errors(), "no page script failed (a CSP violation included)")
}

// is and has are text conditions for browser.textOf.
func is(want string) func(string) bool {
	return func(s string) bool { return strings.TrimSpace(s) == want }
}

func has(want string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, want) }
}

// browser drives one page, every wait bounded by frameWait.
type browser struct {
	t      *testing.T
	ctx    context.Context
	errors func() []string
}

func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, frameWait)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...))
}

// textOf waits until sel is visible and its text satisfies ok, and
// returns it; on failure it shows what the page reads.
func (b *browser) textOf(sel string, ok func(string) bool) string {
	b.t.Helper()
	var s string
	b.waitFor(func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, frameWait)
		defer cancel()
		var err error
		if err = chromedp.Do(ctx, chromedp.WaitReady(sel)); err == nil {
			s, err = chromedp.Run(ctx, chromedp.Text(sel))
		}
		return err == nil && ok(s)
	}, "%s; it reads %q", sel, &s)
	return s
}

// waitFor polls cond until it holds or frameWait passes.
func (b *browser) waitFor(cond func() bool, what string, args ...any) {
	b.t.Helper()
	deadline := time.Now().Add(frameWait)
	for !cond() {
		if time.Now().After(deadline) {
			for i, a := range args {
				if p, ok := a.(*string); ok {
					args[i] = *p
				}
			}
			page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
			b.t.Fatalf("waiting for "+what+"\nthe page reads:\n%s\npage errors: %q", append(args, page, b.errors())...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
