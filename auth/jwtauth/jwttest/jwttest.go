// Package jwttest is an OpenID Connect issuer for tests: a discovery
// document and a key set served over httptest on loopback, with signing
// keys generated in the test, and helpers that mint tokens — valid ones
// and the broken kinds a verifier must refuse. It also serves the
// authorization-code flow with PKCE (an authorization endpoint that signs
// in the user SetLogin names without asking, and a token endpoint), for
// tests of a relying party such as the web console.
package jwttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// DefaultAudience is the aud of Token's tokens unless a claim replaces it.
const DefaultAudience = "https://herald.test"

// Issuer is a running test issuer. URL is its issuer identifier, and
// URL/.well-known/openid-configuration its discovery document.
type Issuer struct {
	URL string

	srv         *httptest.Server
	fetches     atomic.Int64
	discoveries atomic.Int64
	down        atomic.Bool
	mu          sync.Mutex
	published   []jwk.Key // public keys in the key set
	signer      jwk.Key   // private key of new tokens
	alg         jwa.SignatureAlgorithm
	kid         string
	n           int

	login     login                  // who the authorization endpoint signs in
	codes     map[string]pendingCode // issued, not yet redeemed codes
	exchanges int                    // codes redeemed
}

// login is the user the authorization endpoint signs in, and the client
// it signs them in to.
type login struct{ clientID, sub, scope string }

// pendingCode is an authorization code and the request it answered.
type pendingCode struct {
	clientID, redirectURI, challenge, nonce string
	login                                   login
}

// New starts an issuer with one RSA key (RS256, kid "key-1"), closed when
// t ends. The key set is served with Cache-Control: max-age=3600, so a
// verifier fetches it again only for an unknown kid.
func New(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{codes: map[string]pendingCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		i.discoveries.Add(1)
		if i.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": i.URL, "jwks_uri": i.URL + "/jwks.json",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
			"authorization_endpoint":                i.URL + "/authorize",
			"token_endpoint":                        i.URL + "/token",
			"response_types_supported":              []string{"code"},
			"code_challenge_methods_supported":      []string{"S256"},
		})
	})
	mux.HandleFunc("GET /authorize", i.authorize)
	mux.HandleFunc("POST /token", i.token)
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, r *http.Request) {
		i.fetches.Add(1)
		if i.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		i.mu.Lock()
		set := jwk.NewSet()
		for _, k := range i.published {
			_ = set.AddKey(k)
		}
		i.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_ = json.NewEncoder(w).Encode(set)
	})
	i.srv = httptest.NewServer(mux)
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	i.add(t, rsaKey, jwa.RS256())
	return i
}

// add makes priv the signing key under a new kid and publishes its
// public half.
func (i *Issuer) add(t testing.TB, priv any, alg jwa.SignatureAlgorithm) {
	t.Helper()
	i.mu.Lock()
	defer i.mu.Unlock()
	i.n++
	kid := "key-" + string(rune('0'+i.n))
	k, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	_ = k.Set(jwk.KeyIDKey, kid)
	_ = k.Set(jwk.AlgorithmKey, alg)
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	i.published = append(i.published, pub)
	i.signer, i.alg, i.kid = k, alg, kid
}

// Rotate publishes a new ECDSA P-256 key (ES256) under a new kid beside
// the old ones and signs new tokens with it.
func (i *Issuer) Rotate(t testing.TB) {
	t.Helper()
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	i.add(t, ecKey, jwa.ES256())
}

// SetDown makes the discovery document and key set answer 503 (true) or
// serve again (false).
func (i *Issuer) SetDown(down bool) { i.down.Store(down) }

// DiscoveryFetches counts the requests for the discovery document so
// far.
func (i *Issuer) DiscoveryFetches() int64 { return i.discoveries.Load() }

// KeySetFetches counts the requests for the key set so far.
func (i *Issuer) KeySetFetches() int64 { return i.fetches.Load() }

// Claims returns the claims of a token valid now for DefaultAudience:
// iss, aud, sub, iat, exp (in 5 minutes) and scope.
func (i *Issuer) Claims(sub, scope string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": i.URL, "aud": DefaultAudience, "sub": sub,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "scope": scope,
	}
}

// Token returns a token for sub with scope (space-separated), valid now,
// signed with the current key.
func (i *Issuer) Token(t testing.TB, sub, scope string) string {
	t.Helper()
	return i.Sign(t, i.Claims(sub, scope))
}

// Sign returns claims signed with the current key (its alg, its kid).
func (i *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return i.SignWithHeaders(t, claims, nil)
}

// SignWithHeaders is Sign with more protected header parameters (such as
// "crit"), set after kid and typ so that they may replace them.
func (i *Issuer) SignWithHeaders(t testing.TB, claims, headers map[string]any) string {
	t.Helper()
	tok, err := i.sign(claims, headers)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// sign is SignWithHeaders for the issuer's own endpoints, which have no
// testing.TB at hand.
func (i *Issuer) sign(claims, headers map[string]any) (string, error) {
	i.mu.Lock()
	key, alg, kid := i.signer, i.alg, i.kid
	i.mu.Unlock()
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, kid)
	_ = hdr.Set(jws.TypeKey, "JWT")
	for k, v := range headers {
		if err := hdr.Set(k, v); err != nil {
			return "", fmt.Errorf("header %s: %w", k, err)
		}
	}
	b, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)))
	return string(b), err
}

// Unsigned returns claims as an `alg: none` token (empty signature).
func (i *Issuer) Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	return raw(t, map[string]any{"alg": "none", "typ": "JWT"}, claims, nil)
}

// HS256WithPublicKey returns claims signed with HS256 using the current
// public key's JSON as the HMAC secret, under the current kid: the
// algorithm-confusion attack a verifier must refuse.
func (i *Issuer) HS256WithPublicKey(t testing.TB, claims map[string]any) string {
	t.Helper()
	i.mu.Lock()
	pub := i.published[len(i.published)-1]
	kid := i.kid
	i.mu.Unlock()
	secret, err := json.Marshal(pub)
	if err != nil {
		t.Fatal(err)
	}
	return raw(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}, claims, func(in []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		return m.Sum(nil)
	})
}

func raw(t testing.TB, hdr, claims map[string]any, sign func([]byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	in := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	var sig []byte
	if sign != nil {
		sig = sign([]byte(in))
	}
	return in + "." + enc.EncodeToString(sig)
}

// SetLogin makes the authorization endpoint sign in sub, without asking,
// to the client clientID: the access token it then issues carries scope
// (space-separated permissions) and aud DefaultAudience, the ID token aud
// clientID and the request's nonce. Until SetLogin is called the
// authorization endpoint refuses every request.
func (i *Issuer) SetLogin(clientID, sub, scope string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.login = login{clientID: clientID, sub: sub, scope: scope}
}

// Exchanges counts the authorization codes redeemed at the token
// endpoint so far.
func (i *Issuer) Exchanges() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.exchanges
}

// authorize answers an authorization request (RFC 6749 section 4.1.1,
// with PKCE, RFC 7636): it requires response_type=code, the client of
// SetLogin, an absolute redirect_uri, state, nonce and an S256
// code_challenge, and redirects to redirect_uri with a new code and the
// state. Errors are 400 answers, not redirects: the test reads them.
func (i *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	i.mu.Lock()
	who := i.login
	i.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case who.clientID == "":
		http.Error(w, "no login configured (SetLogin)", http.StatusBadRequest)
		return
	case q.Get("client_id") != who.clientID:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case err != nil || !redirect.IsAbs():
		http.Error(w, "redirect_uri must be an absolute URL", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "an S256 code_challenge is required", http.StatusBadRequest)
		return
	case q.Get("state") == "" || q.Get("nonce") == "":
		http.Error(w, "state and nonce are required", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	i.mu.Lock()
	i.codes[code] = pendingCode{clientID: who.clientID, redirectURI: q.Get("redirect_uri"),
		challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), login: who}
	i.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token redeems a code once (RFC 6749 section 4.1.3): the client (in
// the form or HTTP Basic), redirect_uri and the PKCE code_verifier must
// match the authorization request. It answers an access token for
// DefaultAudience and an ID token, both valid for 5 minutes.
func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	clientID := r.PostForm.Get("client_id")
	if id, _, ok := r.BasicAuth(); ok {
		clientID, _ = url.QueryUnescape(id)
	}
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	i.mu.Lock()
	p, ok := i.codes[r.PostForm.Get("code")]
	delete(i.codes, r.PostForm.Get("code")) // a code is good once
	i.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code":
		fail("unsupported_grant_type")
		return
	case !ok || p.clientID != clientID || p.redirectURI != r.PostForm.Get("redirect_uri"):
		fail("invalid_grant")
		return
	case subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(p.challenge)) != 1:
		fail("invalid_grant") // wrong or missing PKCE verifier
		return
	}
	i.mu.Lock()
	i.exchanges++
	i.mu.Unlock()
	access, err := i.sign(i.Claims(p.login.sub, p.login.scope), nil)
	idClaims := i.Claims(p.login.sub, "")
	delete(idClaims, "scope")
	idClaims["aud"], idClaims["nonce"] = p.clientID, p.nonce
	id, err2 := i.sign(idClaims, nil)
	if err != nil || err2 != nil {
		http.Error(w, "cannot sign", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": id,
	})
}
