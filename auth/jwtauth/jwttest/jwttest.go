// Package jwttest is an OpenID Connect issuer for tests: a discovery
// document and a key set served over httptest on loopback, with signing
// keys generated in the test, and helpers that mint tokens — valid ones
// and the broken kinds a verifier must refuse.
package jwttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

	srv       *httptest.Server
	fetches   atomic.Int64
	down      atomic.Bool
	mu        sync.Mutex
	published []jwk.Key // public keys in the key set
	signer    jwk.Key   // private key of new tokens
	alg       jwa.SignatureAlgorithm
	kid       string
	n         int
}

// New starts an issuer with one RSA key (RS256, kid "key-1"), closed when
// t ends. The key set is served with Cache-Control: max-age=3600, so a
// verifier fetches it again only for an unknown kid.
func New(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if i.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": i.URL, "jwks_uri": i.URL + "/jwks.json",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
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
	i.mu.Lock()
	key, alg, kid := i.signer, i.alg, i.kid
	i.mu.Unlock()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, kid)
	_ = hdr.Set(jws.TypeKey, "JWT")
	for k, v := range headers {
		if err := hdr.Set(k, v); err != nil {
			t.Fatalf("header %s: %v", k, err)
		}
	}
	b, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
