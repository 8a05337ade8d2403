package consoleauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/functions/consoleauth"
	"github.com/heraldevents/herald/functions/httpx"
)

const clientID = "herald-console"

// fixture is a console's sign-in routes in front of an API route that
// answers who it authenticated, against a test issuer.
type fixture struct {
	iss *jwttest.Issuer
	srv *httptest.Server
	hc  *http.Client
}

func newFixture(t *testing.T, scope string) *fixture {
	t.Helper()
	iss := jwttest.New(t)
	iss.SetLogin(clientID, "operator", scope)
	v, err := jwtauth.New(jwtauth.Config{Issuer: iss.URL, Audiences: []string{jwttest.DefaultAudience}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	s, err := consoleauth.New(consoleauth.Config{Issuer: iss.URL, ClientID: clientID, Verifier: v, Authenticator: v})
	require.NoError(t, err)
	mux := http.NewServeMux()
	s.Mount(mux)
	mux.Handle("GET /api/whoami", s.Wrap(httpx.Authenticate(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		_, _ = io.WriteString(w, p.ID+" "+strings.Join(p.Permissions, ","))
	}))))
	mux.HandleFunc("GET /console/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "console page") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &fixture{iss: iss, srv: srv, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

// get sends a GET with the client's cookies and extra headers.
func (f *fixture) get(t *testing.T, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", f.srv.URL+path, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := f.hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

func (f *fixture) session(t *testing.T) consoleauth.SessionInfo {
	t.Helper()
	res, body := f.get(t, consoleauth.SessionPath, nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	var info consoleauth.SessionInfo
	require.NoError(t, json.Unmarshal([]byte(body), &info))
	return info
}

// TestSignInFlow: login → issuer → callback → a session whose cookie is
// a bearer token for the API only with its CSRF header; logout ends it.
func TestSignInFlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "manage:destinations receive:*")
	require.False(t, f.session(t).SignedIn)
	require.True(t, f.session(t).OIDC)

	res, body := f.get(t, consoleauth.LoginPath, nil) // follows the redirects
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "console page", body)
	require.Equal(t, "/console/", res.Request.URL.Path, "the callback lands on the console")
	require.Empty(t, res.Request.URL.RawQuery, "no code or token in the console's URL")
	require.Equal(t, 1, f.iss.Exchanges())

	u, _ := url.Parse(f.srv.URL)
	var sessionCookie *http.Cookie
	for _, c := range f.hc.Jar.Cookies(u) {
		if c.Name == "herald-console" {
			sessionCookie = c
		}
		require.NotEqual(t, "herald-console-flow", c.Name, "the flow cookie is gone after the callback")
	}
	require.NotNil(t, sessionCookie)
	require.NotContains(t, sessionCookie.Value, ".", "the cookie seals the token: no JWT in the clear")

	info := f.session(t)
	require.True(t, info.SignedIn)
	require.Equal(t, "operator", info.Principal)
	require.Equal(t, []string{"manage:destinations", "receive:*"}, info.Permissions)
	require.NotEmpty(t, info.CSRF)
	require.NotNil(t, info.ExpiresAt)

	// The cookie alone is refused: the CSRF header is required.
	res, body = f.get(t, "/api/whoami", nil)
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	require.Contains(t, body, consoleauth.CSRFHeader)
	res, _ = f.get(t, "/api/whoami", map[string]string{consoleauth.CSRFHeader: "forged"})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	res, body = f.get(t, "/api/whoami", map[string]string{consoleauth.CSRFHeader: info.CSRF})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "operator manage:destinations,receive:*", body, "the API authenticated the session's token")

	// A bearer token wins over the cookie, checked as usual.
	res, _ = f.get(t, "/api/whoami", map[string]string{"Authorization": "Bearer not-a-token"})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	// An altered cookie does not open.
	bad := &http.Cookie{Name: "herald-console", Value: "A" + sessionCookie.Value[1:]}
	if bad.Value == sessionCookie.Value {
		bad.Value = "B" + sessionCookie.Value[1:]
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/whoami", nil)
	req.AddCookie(bad)
	req.Header.Set(consoleauth.CSRFHeader, info.CSRF)
	raw, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw.Body.Close()
	require.Equal(t, http.StatusUnauthorized, raw.StatusCode)

	// Logout needs the CSRF header too, then clears the cookie.
	post := func(hdr map[string]string) int {
		req, _ := http.NewRequest("POST", f.srv.URL+consoleauth.LogoutPath, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := f.hc.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post(nil))
	require.True(t, f.session(t).SignedIn, "a refused logout keeps the session")
	require.Equal(t, http.StatusNoContent, post(map[string]string{consoleauth.CSRFHeader: info.CSRF}))
	require.False(t, f.session(t).SignedIn)
	res, _ = f.get(t, "/api/whoami", map[string]string{consoleauth.CSRFHeader: info.CSRF})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

// TestCallbackRefusals: a callback whose state does not match, that has
// no flow cookie, or that the issuer answered with an error makes no
// session and redeems no code.
func TestCallbackRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "manage:destinations")
	noRedirect := &http.Client{Jar: f.hc.Jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// Start a sign-in and stop at the issuer's answer.
	res, err := noRedirect.Get(f.srv.URL + consoleauth.LoginPath)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	authz, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	q := authz.Query()
	require.Equal(t, "S256", q.Get("code_challenge_method"))
	require.Len(t, q.Get("code_challenge"), 43, "base64url of a SHA-256")
	require.NotEmpty(t, q.Get("nonce"))
	require.NotEmpty(t, q.Get("state"))
	require.Equal(t, f.srv.URL+consoleauth.CallbackPath, q.Get("redirect_uri"))
	require.Equal(t, "openid", q.Get("scope"))
	res, err = noRedirect.Get(authz.String())
	require.NoError(t, err)
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	code, state := back.Query().Get("code"), back.Query().Get("state")
	require.Equal(t, q.Get("state"), state)

	callback := func(client *http.Client, query url.Values) (int, string) {
		t.Helper()
		res, err := client.Get(f.srv.URL + consoleauth.CallbackPath + "?" + query.Encode())
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
		require.NotContains(t, string(b), code, "the page repeats no code")
		return res.StatusCode, string(b)
	}
	// Another browser (no flow cookie) cannot finish this sign-in.
	status, body := callback(&http.Client{Timeout: 10 * time.Second}, url.Values{"code": {code}, "state": {state}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "not started here")
	// The same browser with a forged state cannot either; the flow cookie
	// is then spent.
	status, body = callback(noRedirect, url.Values{"code": {code}, "state": {state + "x"}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "state does not match")
	status, _ = callback(noRedirect, url.Values{"code": {code}, "state": {state}})
	require.Equal(t, http.StatusBadRequest, status, "the flow cookie is good once")
	require.Equal(t, 0, f.iss.Exchanges(), "no code was redeemed")
	require.False(t, f.session(t).SignedIn)

	// An error from the issuer is shown, escaped and kept to its alphabet.
	res, err = noRedirect.Get(f.srv.URL + consoleauth.LoginPath)
	require.NoError(t, err)
	res.Body.Close()
	status, body = callback(noRedirect, url.Values{"error": {"<script>"}, "state": {"whatever"}})
	require.Equal(t, http.StatusUnauthorized, status)
	require.NotContains(t, body, "<script>")
	require.Contains(t, body, "&lt;script&gt;")
}

// TestCookieAttributes: beyond plain-HTTP loopback the cookies are
// Secure with the __Host- prefix, HttpOnly, and the callback URL is
// https; the flow cookie is Lax (the issuer's redirect is cross-site).
func TestCookieAttributes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	req := httptest.NewRequest("GET", "http://herald.example.com"+consoleauth.LoginPath, nil)
	w := httptest.NewRecorder()
	f.srv.Config.Handler.ServeHTTP(w, req)
	require.Equal(t, http.StatusFound, w.Code)
	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, "__Host-herald-console-flow", c.Name)
	require.True(t, c.Secure)
	require.True(t, c.HttpOnly)
	require.Equal(t, "/", c.Path)
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
	loc, err := url.Parse(w.Header().Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "https://herald.example.com/console/callback", loc.Query().Get("redirect_uri"))

	// A session cookie of another host name is not read: the plain
	// loopback name is not honoured beyond loopback.
	req = httptest.NewRequest("GET", "http://herald.example.com/api/whoami", nil)
	req.AddCookie(&http.Cookie{Name: "herald-console", Value: "x"})
	w = httptest.NewRecorder()
	f.srv.Config.Handler.ServeHTTP(w, req)
	require.Equal(t, http.StatusUnauthorized, w.Code)
}

// TestNew refuses a configuration it cannot run.
func TestNew(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	v, err := jwtauth.New(jwtauth.Config{Issuer: iss.URL, Audiences: []string{"a"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	_, err = consoleauth.New(consoleauth.Config{ClientID: clientID, Verifier: v, Authenticator: v})
	require.ErrorContains(t, err, "HERALD_JWT_ISSUER")
	_, err = consoleauth.New(consoleauth.Config{Issuer: iss.URL, Verifier: v, Authenticator: v})
	require.ErrorContains(t, err, "HERALD_CONSOLE_OIDC_CLIENT_ID")
	_, err = consoleauth.New(consoleauth.Config{Issuer: iss.URL, ClientID: clientID, Verifier: v, Authenticator: v, Key: []byte("short")})
	require.ErrorContains(t, err, "HERALD_CONSOLE_SESSION_KEY")

	// A nil *Sessions (sign-in off) says so and wraps nothing.
	var off *consoleauth.Sessions
	mux := http.NewServeMux()
	off.Mount(mux)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", consoleauth.SessionPath, nil))
	require.JSONEq(t, `{"oidc": false, "signed_in": false}`, w.Body.String())
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", consoleauth.LoginPath, nil))
	require.Equal(t, http.StatusNotFound, w.Code)
}

// TestIssuerDown: a sign-in while the issuer is down answers 502 with
// nothing of the cause; a flood of them makes one discovery fetch per
// DiscoveryRetry.
func TestIssuerDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "manage:destinations")
	f.iss.SetDown(true)
	for range 5 {
		res, body := f.get(t, consoleauth.LoginPath, nil)
		require.Equal(t, http.StatusBadGateway, res.StatusCode)
		require.Contains(t, body, "cannot be reached")
		require.NotContains(t, body, f.iss.URL)
	}
	require.Equal(t, int64(1), f.iss.DiscoveryFetches(), "one fetch, then the failure is remembered for DiscoveryRetry")
	require.False(t, f.session(t).SignedIn)
}
