// Package consoleauth signs the web console (package functions/console)
// in through an OpenID Connect issuer, with the authorization-code flow
// and PKCE (RFC 7636, S256), and turns the resulting session cookie back
// into a bearer token for Herald's own authentication.
//
// # Flow
//
// GET /console/login sends the browser to the issuer's authorization
// endpoint (from its discovery document, OpenID Connect Discovery 1.0)
// with a fresh state, nonce and PKCE challenge; the three secrets travel
// in a short-lived sealed "flow" cookie. GET /console/callback checks the
// state against that cookie, redeems the code with the PKCE verifier
// (golang.org/x/oauth2), verifies the ID token (signature, iss, aud = the
// client id, exp, nonce) with package auth/jwtauth, and keeps as the
// session's bearer the access token — or, when Herald's API refuses that
// (an opaque access token, another audience), the ID token — provided the
// API's own Authenticator accepts it. POST /console/logout ends the
// session; GET /console/session tells the page whether OIDC is on, who is
// signed in, and the session's CSRF token.
//
// # The session cookie
//
// The session is the bearer token, its expiry and a random CSRF token,
// sealed with AES-256-GCM under a server key (HERALD_CONSOLE_SESSION_KEY,
// or a random key per process): the token is never in the clear in the
// browser, the cookie cannot be forged or altered, and any instance that
// holds the key can open it, so it needs no shared session store. It is
// HttpOnly (no script reads it), SameSite=Strict, Path=/ (the API routes
// need it), lives until the token expires, and is Secure with the
// __Host- name prefix — except on plain HTTP to a loopback host, where a
// Secure cookie would not be sent back by every browser and the
// connection never leaves the machine (the local adapter's default).
//
// # What the cookie may do
//
// Wrap turns a request that has no Authorization header but a valid
// session cookie into the same request with `Authorization: Bearer
// <token>`, before the API's authentication runs: a console session is
// checked, token and permissions, exactly as that bearer token would be.
// Such a request must also carry the session's CSRF token in the
// X-Herald-CSRF header (403 otherwise). A cross-site page can neither
// read the token (GET /console/session is same-origin only: no CORS
// credentials are ever allowed) nor send a custom header without a CORS
// preflight Herald does not grant, so SameSite=Strict is not the only
// defence.
package consoleauth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
)

// Routes, below the console's /console/.
const (
	LoginPath    = "/console/login"
	CallbackPath = "/console/callback"
	LogoutPath   = "/console/logout"
	SessionPath  = "/console/session"
)

// CSRFHeader carries the session's CSRF token (from GET /console/session)
// on every request the console makes with its session cookie.
const CSRFHeader = "X-Herald-CSRF"

// Bounds.
const (
	// KeySize is the length of HERALD_CONSOLE_SESSION_KEY once decoded:
	// an AES-256 key.
	KeySize = 32
	// FlowTTL bounds how long a sign-in may take at the issuer: the flow
	// cookie (state, nonce, PKCE verifier) expires after it.
	FlowTTL = 10 * time.Minute
	// MaxSession bounds a session whatever its token's expiry says.
	MaxSession = 12 * time.Hour
	// DefaultTokenLife is a session's life when the token endpoint does
	// not say when the access token expires (no expires_in).
	DefaultTokenLife = time.Hour
	// FetchTimeout bounds one call to the issuer: the discovery document
	// or the code exchange.
	FetchTimeout = 10 * time.Second
	// DiscoveryRetry is the least time between two fetches of the
	// discovery document after one failed; a fetched one is kept for the
	// life of the process.
	DiscoveryRetry = 5 * time.Second
	// maxCookieBytes is the most a browser is sure to keep of one cookie
	// (RFC 6265, section 6.1, asks for at least 4096 bytes with its name).
	maxCookieBytes   = 4000
	maxDocumentBytes = 1 << 20
)

// DefaultScopes are requested when Config.Scopes is empty.
var DefaultScopes = []string{"openid"}

// IDTokenVerifier verifies an ID token (implemented by
// *jwtauth.Verifier).
type IDTokenVerifier interface {
	VerifyIDToken(ctx context.Context, token, clientID, nonce string) (jwtauth.IDToken, error)
}

// Config configures Sessions.
type Config struct {
	// Issuer is HERALD_JWT_ISSUER: its discovery document names the
	// authorization and token endpoints. Required.
	Issuer string
	// ClientID is HERALD_CONSOLE_OIDC_CLIENT_ID, the console's client at
	// the issuer. Required.
	ClientID string
	// ClientSecret is HERALD_CONSOLE_OIDC_CLIENT_SECRET: "" for a public
	// client (PKCE alone proves the code's requester). Never logged.
	ClientSecret string
	// Scopes is HERALD_CONSOLE_OIDC_SCOPES (default DefaultScopes):
	// "openid" plus whatever the issuer needs to grant Herald's
	// permissions in the access token.
	Scopes []string
	// RedirectURL is HERALD_CONSOLE_OIDC_REDIRECT_URL: the callback URL
	// registered at the issuer. "" derives it from each request:
	// https://HOST/console/callback, or http:// on a loopback host served
	// without TLS.
	RedirectURL string
	// Key seals the cookies (KeySize bytes); nil means a random key,
	// so sessions end with the process and are not shared by instances.
	Key []byte
	// Verifier checks ID tokens; Authenticator is the API's own, which
	// must accept the session's bearer token.
	Verifier      IDTokenVerifier
	Authenticator auth.Authenticator
	// HTTPClient calls the issuer; nil means one whose requests time out
	// after FetchTimeout.
	HTTPClient *http.Client
	// Logger is told of sign-ins (principal ids) and of why one failed.
	Logger *slog.Logger
	// Now replaces the clock (tests).
	Now func() time.Time
}

// Sessions serves the console's sign-in routes and opens its session
// cookies. A nil *Sessions is OIDC sign-in switched off: Mount then
// serves only GET /console/session (saying so) and Wrap changes nothing.
type Sessions struct {
	cfg  Config
	aead cipher.AEAD

	mu        sync.Mutex
	endpoints *oauth2.Endpoint // from discovery, once fetched
	failedAt  time.Time        // when discovery last failed
	failure   error            // and why
}

// New returns Sessions for c. It fetches nothing: the discovery document
// is fetched on the first sign-in. Errors name the variable at fault.
func New(c Config) (*Sessions, error) {
	if c.Issuer == "" {
		return nil, errors.New("HERALD_CONSOLE_OIDC_CLIENT_ID: needs HERALD_JWT_ISSUER, the issuer to sign in at")
	}
	if c.ClientID == "" {
		return nil, errors.New("HERALD_CONSOLE_OIDC_CLIENT_ID: required")
	}
	if c.Verifier == nil || c.Authenticator == nil {
		return nil, errors.New("consoleauth: Verifier and Authenticator are required")
	}
	if len(c.Scopes) == 0 {
		c.Scopes = DefaultScopes
	}
	if c.Key == nil {
		c.Key = make([]byte, KeySize)
		_, _ = rand.Read(c.Key)
	}
	if len(c.Key) != KeySize {
		return nil, fmt.Errorf("HERALD_CONSOLE_SESSION_KEY: must be %d bytes (base64), not %d", KeySize, len(c.Key))
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: FetchTimeout}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	block, err := aes.NewCipher(c.Key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sessions{cfg: c, aead: aead}, nil
}

// Mount adds the console's sign-in routes to mux: GET /console/session
// always; GET /console/login, GET /console/callback and POST
// /console/logout when s is not nil.
func (s *Sessions) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+SessionPath, s.session)
	if s == nil {
		return
	}
	mux.HandleFunc("GET "+LoginPath, s.login)
	mux.HandleFunc("GET "+CallbackPath, s.callback)
	mux.HandleFunc("POST "+LogoutPath, s.logout)
}

// Wrap lets next (a handler that authenticates the Authorization header,
// httpx.Authenticate) serve a console session: a request with no
// Authorization header and a session cookie gets the session's bearer
// token in that header, provided it carries the session's CSRF token in
// CSRFHeader. A cookie that does not open (tampered, another key,
// expired) is 401; a missing or wrong CSRF token 403. A nil s returns
// next.
func (s *Sessions) Wrap(next http.Handler) http.Handler {
	if s == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Authorization")) > 0 {
			next.ServeHTTP(w, r)
			return
		}
		c, err := r.Cookie(sessionCookie(r))
		if err != nil {
			next.ServeHTTP(w, r) // no credentials: next answers 401
			return
		}
		var sess session
		if !s.open(c.Value, purposeSession, &sess) || !s.cfg.Now().Before(time.Unix(sess.Expiry, 0)) {
			httpx.WriteError(w, r, herr.New(herr.Unauthenticated, "the console session is invalid or has expired: sign in again"))
			return
		}
		got := r.Header.Get(CSRFHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 {
			httpx.WriteError(w, r, herr.New(herr.PermissionDenied, "a request made with the console's session cookie must carry its CSRF token in the %s header (GET %s)", CSRFHeader, SessionPath))
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+sess.Token)
		next.ServeHTTP(w, r)
	})
}

// session is what the session cookie seals.
type session struct {
	Token  string `json:"t"`
	Expiry int64  `json:"e"` // Unix seconds
	CSRF   string `json:"c"`
}

// flow is what the flow cookie seals during a sign-in.
type flow struct {
	State       string `json:"s"`
	Nonce       string `json:"n"`
	Verifier    string `json:"v"`
	RedirectURL string `json:"r"`
	Expiry      int64  `json:"e"`
}

// The purposes are the sealed values' additional data, so that a flow
// cookie cannot be passed off as a session cookie or the other way round.
const (
	purposeSession = "herald-console-session"
	purposeFlow    = "herald-console-flow"
)

// seal encrypts v's JSON under the key, for purpose.
func (s *Sessions) seal(purpose string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(purpose))), nil
}

// open decrypts a sealed value of purpose into v; false when it does not
// open.
func (s *Sessions) open(sealed, purpose string, v any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return false
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(purpose))
	return err == nil && json.Unmarshal(plain, v) == nil
}

// plainLoopback reports whether r came over plain HTTP to a loopback
// host: the one case where cookies are not Secure (see the package
// comment).
func plainLoopback(r *http.Request) bool {
	if r.TLS != nil {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
}

// sessionCookie and flowCookie name the cookies: with the __Host- prefix
// (Secure, Path=/, no Domain, enforced by the browser) but on plain
// loopback.
func sessionCookie(r *http.Request) string { return cookieName(r, "herald-console") }
func flowCookie(r *http.Request) string    { return cookieName(r, "herald-console-flow") }

func cookieName(r *http.Request, base string) string {
	if plainLoopback(r) {
		return base
	}
	return "__Host-" + base
}

// setCookie sets (maxAge > 0) or clears (maxAge < 0) a cookie.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int, sameSite http.SameSite) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: !plainLoopback(r), SameSite: sameSite,
	})
}

// noStore marks an answer that no cache may keep.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// redirectURL is the callback URL of r's sign-in.
func (s *Sessions) redirectURL(r *http.Request) string {
	if s.cfg.RedirectURL != "" {
		return s.cfg.RedirectURL
	}
	scheme := "https"
	if plainLoopback(r) {
		scheme = "http"
	}
	return scheme + "://" + r.Host + CallbackPath
}

// oauth returns the client's configuration for redirect, fetching the
// issuer's discovery document the first time (not under the lock: a
// failed fetch is tried again by the next sign-in).
func (s *Sessions) oauth(ctx context.Context, redirect string) (*oauth2.Config, error) {
	s.mu.Lock()
	ep, failedAt, failure := s.endpoints, s.failedAt, s.failure
	s.mu.Unlock()
	if ep == nil {
		// Sign-ins need no token: after a failure, wait DiscoveryRetry
		// before the next fetch, so that a flood of them cannot make
		// Herald hammer an issuer that is down.
		if failure != nil && s.cfg.Now().Sub(failedAt) < DiscoveryRetry {
			return nil, failure
		}
		var err error
		ep, err = s.discover(ctx)
		s.mu.Lock()
		if err != nil {
			s.failedAt, s.failure = s.cfg.Now(), err
		} else {
			s.endpoints, s.failure = ep, nil
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	e := *ep
	if s.cfg.ClientSecret == "" {
		// A public client sends its id in the form: there is no
		// secret to authenticate with.
		e.AuthStyle = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret,
		Endpoint: e, RedirectURL: redirect, Scopes: s.cfg.Scopes}, nil
}

// discover reads the authorization and token endpoints from the issuer's
// discovery document, whose issuer must be Config.Issuer and whose
// endpoints must be https (or http to loopback), like the issuer itself.
func (s *Sessions) discover(ctx context.Context) (*oauth2.Endpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	u := strings.TrimSuffix(s.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the discovery document: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the discovery document: %s", res.Status)
	}
	var doc struct {
		Issuer  string   `json:"issuer"`
		Auth    string   `json:"authorization_endpoint"`
		Token   string   `json:"token_endpoint"`
		Methods []string `json:"code_challenge_methods_supported"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxDocumentBytes)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the discovery document: %w", err)
	}
	if doc.Issuer != s.cfg.Issuer {
		return nil, errors.New("the discovery document names another issuer")
	}
	if len(doc.Methods) > 0 && !slices.Contains(doc.Methods, "S256") {
		// A provider that lists its PKCE methods and not S256 would
		// ignore the challenge, and the code would be unbound.
		return nil, errors.New("the identity provider does not support PKCE with S256")
	}
	for _, e := range []string{doc.Auth, doc.Token} {
		if err := jwtauth.CheckFetchURL(e); err != nil {
			return nil, fmt.Errorf("discovery document endpoint: %w", err)
		}
	}
	return &oauth2.Endpoint{AuthURL: doc.Auth, TokenURL: doc.Token}, nil
}

// login starts a sign-in: a new state, nonce and PKCE verifier in the
// flow cookie, and a redirect to the issuer.
func (s *Sessions) login(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	redirect := s.redirectURL(r)
	conf, err := s.oauth(r.Context(), redirect)
	if err != nil {
		s.cfg.Logger.Warn("console sign-in: the identity provider cannot be reached", "err", err)
		s.page(w, http.StatusBadGateway, "The identity provider cannot be reached; try again shortly.")
		return
	}
	f := flow{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(),
		RedirectURL: redirect, Expiry: s.cfg.Now().Add(FlowTTL).Unix()}
	sealed, err := s.seal(purposeFlow, f)
	if err != nil {
		s.page(w, http.StatusInternalServerError, "Cannot start the sign-in.")
		return
	}
	// Lax, not Strict: the callback is a navigation from the issuer's
	// site, on which a Strict cookie is not sent.
	setCookie(w, r, flowCookie(r), sealed, int(FlowTTL/time.Second), http.SameSiteLaxMode)
	http.Redirect(w, r, conf.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier),
		oauth2.SetAuthURLParam("nonce", f.Nonce)), http.StatusFound)
}

// callback finishes a sign-in: state, code exchange with the PKCE
// verifier, ID token with its nonce, then the session cookie.
func (s *Sessions) callback(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	setCookie(w, r, flowCookie(r), "", -1, http.SameSiteLaxMode) // good once, whatever happens
	q := r.URL.Query()
	var f flow
	c, err := r.Cookie(flowCookie(r))
	switch {
	case err != nil || !s.open(c.Value, purposeFlow, &f) || !s.cfg.Now().Before(time.Unix(f.Expiry, 0)):
		s.page(w, http.StatusBadRequest, "This sign-in was not started here or took too long: sign in again.")
		return
	case q.Get("error") != "":
		s.page(w, http.StatusUnauthorized, "The identity provider did not sign you in ("+errorCode(q.Get("error"))+").")
		return
	case q.Get("state") == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1:
		s.page(w, http.StatusBadRequest, "The sign-in's state does not match: sign in again.")
		return
	case q.Get("code") == "":
		s.page(w, http.StatusBadRequest, "The identity provider sent no authorization code.")
		return
	}
	conf, err := s.oauth(r.Context(), f.RedirectURL)
	if err != nil {
		s.cfg.Logger.Warn("console sign-in: the identity provider cannot be reached", "err", err)
		s.page(w, http.StatusBadGateway, "The identity provider cannot be reached; try again shortly.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), FetchTimeout)
	defer cancel()
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, s.cfg.HTTPClient), q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		// The error may quote the token endpoint's answer: log its
		// code only.
		code := "unreachable"
		if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) {
			code = errorCode(re.ErrorCode)
		}
		s.cfg.Logger.Warn("console sign-in: the code exchange failed", "error_code", code)
		s.page(w, http.StatusBadGateway, "The identity provider refused to redeem the sign-in ("+code+"): sign in again.")
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		s.page(w, http.StatusBadGateway, "The identity provider sent no ID token: is \"openid\" among HERALD_CONSOLE_OIDC_SCOPES?")
		return
	}
	idt, err := s.cfg.Verifier.VerifyIDToken(ctx, rawID, s.cfg.ClientID, f.Nonce)
	if err != nil {
		s.cfg.Logger.Warn("console sign-in: the ID token was refused", "why", herr.MessageOf(err))
		s.page(w, http.StatusUnauthorized, "The identity provider's ID token was refused: "+herr.MessageOf(err)+".")
		return
	}
	// The session's bearer: the access token if the API accepts it,
	// else the ID token if the API accepts that.
	expiry := tok.Expiry
	if expiry.IsZero() {
		expiry = s.cfg.Now().Add(DefaultTokenLife)
	}
	bearer := tok.AccessToken
	p, err := s.cfg.Authenticator.Authenticate(ctx, bearer)
	if err != nil {
		bearer, expiry = rawID, idt.Expiry
		p, err = s.cfg.Authenticator.Authenticate(ctx, bearer)
	}
	if err != nil {
		s.cfg.Logger.Warn("console sign-in: Herald's API accepts neither the access token nor the ID token", "sub", idt.Subject, "why", herr.MessageOf(err))
		s.page(w, http.StatusForbidden, "You are signed in at the identity provider, but Herald's API accepts neither its access token nor its ID token ("+herr.MessageOf(err)+"); see docs/console.md.")
		return
	}
	if limit := s.cfg.Now().Add(MaxSession); expiry.After(limit) {
		expiry = limit
	}
	life := int(expiry.Sub(s.cfg.Now()) / time.Second)
	if life <= 0 {
		s.page(w, http.StatusBadGateway, "The identity provider's token has already expired: check the clocks.")
		return
	}
	sealed, err := s.seal(purposeSession, session{Token: bearer, Expiry: expiry.Unix(), CSRF: rand.Text()})
	if err != nil || len(sealed) > maxCookieBytes {
		s.page(w, http.StatusBadGateway, "The identity provider's token is too large to keep in a cookie.")
		return
	}
	setCookie(w, r, sessionCookie(r), sealed, life, http.SameSiteStrictMode)
	s.cfg.Logger.Info("console sign-in", "principal", p.ID)
	http.Redirect(w, r, "/console/#/overview", http.StatusSeeOther)
}

// logout ends the session: the cookie is cleared. With a session cookie
// it needs the CSRF header, so that another site cannot sign the
// operator out.
func (s *Sessions) logout(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	if c, err := r.Cookie(sessionCookie(r)); err == nil {
		var sess session
		if s.open(c.Value, purposeSession, &sess) {
			got := r.Header.Get(CSRFHeader)
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 {
				httpx.WriteError(w, r, herr.New(herr.PermissionDenied, "signing out needs the session's CSRF token in the %s header", CSRFHeader))
				return
			}
		}
	}
	setCookie(w, r, sessionCookie(r), "", -1, http.SameSiteStrictMode)
	w.WriteHeader(http.StatusNoContent)
}

// SessionInfo is the answer of GET /console/session.
type SessionInfo struct {
	// OIDC is whether sign-in through the identity provider is on.
	OIDC bool `json:"oidc"`
	// SignedIn is whether the request carries a session that opens and
	// whose token the API still accepts; the fields below are set then.
	SignedIn    bool       `json:"signed_in"`
	Principal   string     `json:"principal,omitempty"`
	Permissions []string   `json:"permissions,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	// CSRF is the token to send in CSRFHeader.
	CSRF string `json:"csrf,omitempty"`
}

// session answers SessionInfo.
func (s *Sessions) session(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	info := SessionInfo{OIDC: s != nil}
	if s != nil {
		if c, err := r.Cookie(sessionCookie(r)); err == nil {
			var sess session
			if s.open(c.Value, purposeSession, &sess) && s.cfg.Now().Before(time.Unix(sess.Expiry, 0)) {
				exp := time.Unix(sess.Expiry, 0).UTC()
				if p, err := s.cfg.Authenticator.Authenticate(r.Context(), sess.Token); err == nil {
					info.SignedIn, info.Principal, info.Permissions = true, p.ID, p.Permissions
					info.ExpiresAt, info.CSRF = &exp, sess.CSRF
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// page answers a short HTML page with msg (as text) and a way back.
func (s *Sessions) page(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Herald console: sign-in</title></head><body><h1>Sign-in failed</h1><p>`+
		html.EscapeString(msg)+`</p><p><a href="/console/">Back to the console</a></p></body></html>`)
}

// errorCode keeps an OAuth error code shown or logged to its defined
// alphabet (RFC 6749, section 4.1.2.1: printable ASCII without " and \)
// and 64 characters; anything else reads "invalid".
func errorCode(s string) string {
	if s == "" || len(s) > 64 {
		return "invalid"
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return "invalid"
		}
	}
	return s
}
