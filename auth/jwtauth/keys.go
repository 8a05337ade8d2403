package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/heraldevents/herald/herr"
)

// errKeysUnavailable is the caller's answer when the keys cannot be had.
var errKeysUnavailable = herr.New(herr.Unavailable, "the token issuer's signing keys cannot be fetched; retry with backoff")

// CheckFetchURL accepts an https URL, or an http URL whose host is a
// loopback address or "localhost".
func CheckFetchURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("%q is not https (plain http is allowed to loopback hosts only)", s)
	}
	return fmt.Errorf("%q is not an https URL", s)
}

// keySource holds the issuer's key set: a jwk.Cache entry, registered on
// the first fetch, plus the rate limit of fetches that tokens force.
type keySource struct {
	issuer   string
	client   *http.Client
	interval time.Duration
	log      *slog.Logger
	cache    *jwk.Cache
	stop     context.CancelFunc

	mu         sync.Mutex
	jwksURL    string        // "" until discovered
	registered bool          // jwksURL is in cache
	inflight   chan struct{} // closed when the running fetch ends
	lastErr    error         // outcome of the last fetch
	// lastFirst and lastForced are the starts of the last fetch made
	// without a cached set and of the last made for an unknown kid: each
	// kind is rate-limited on its own, so the first fetch does not delay
	// the refresh of a key rotated soon after.
	lastFirst, lastForced time.Time
}

func newKeySource(c Config) (*keySource, error) {
	client := c.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: FetchTimeout}
	}
	// Hold redirects to the same rule as the configured URLs.
	held := *client
	held.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return CheckFetchURL(req.URL.String())
	}
	ctx, stop := context.WithCancel(context.Background())
	cache, err := jwk.NewCache(ctx, httprc.NewClient(
		httprc.WithHTTPClient(&held),
		httprc.WithWorkers(1),
		httprc.WithWhitelist(httprc.WhitelistFunc(func(u string) bool { return CheckFetchURL(u) == nil })),
	))
	if err != nil {
		stop()
		return nil, err
	}
	return &keySource{issuer: c.Issuer, client: &held, interval: c.RefreshInterval, log: c.Logger, cache: cache, stop: stop, jwksURL: c.JWKSURL}, nil
}

func (k *keySource) close() error {
	k.stop()
	return nil
}

// cached returns the cached key set, or nil when none was fetched yet.
func (k *keySource) cached(ctx context.Context) jwk.Set {
	k.mu.Lock()
	u, ok := k.jwksURL, k.registered
	k.mu.Unlock()
	if !ok {
		return nil
	}
	set, err := k.cache.Lookup(ctx, u)
	if err != nil {
		return nil
	}
	return set
}

// set returns a key set that holds kid if the issuer publishes it: the
// cached one, or one fetched now when kid is not in it (kid "" needs
// only some key set). Errors are errKeysUnavailable.
func (k *keySource) set(ctx context.Context, kid string) (jwk.Set, error) {
	s := k.cached(ctx)
	if s != nil {
		if _, ok := s.LookupKeyID(kid); ok || (kid == "" && s.Len() > 0) {
			return s, nil
		}
	}
	if err := k.refresh(ctx, s != nil); err != nil {
		return nil, err
	}
	if s := k.cached(ctx); s != nil {
		return s, nil
	}
	return nil, errKeysUnavailable
}

// refresh fetches the key set now, unless a fetch of the same kind (see
// lastFirst) started less than interval ago: then it returns that fetch's outcome (waiting for it if it
// still runs). Concurrent callers share one fetch. The fetch itself is
// detached from ctx, so one caller going away does not fail the others,
// and is bounded by FetchTimeout.
func (k *keySource) refresh(ctx context.Context, haveSet bool) error {
	k.mu.Lock()
	ch := k.inflight
	last := &k.lastFirst
	if haveSet {
		last = &k.lastForced
	}
	if ch == nil && (last.IsZero() || time.Since(*last) >= k.interval) {
		ch = make(chan struct{})
		k.inflight, *last = ch, time.Now()
		go k.fetch(context.WithoutCancel(ctx), ch)
	}
	k.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return herr.Wrap(herr.CodeOf(ctx.Err()), ctx.Err(), "the request ended while the issuer's keys were fetched")
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastErr != nil {
		return errKeysUnavailable
	}
	return nil
}

// fetch discovers the key set's URL if needed and fetches the set, then
// records the outcome and closes done.
func (k *keySource) fetch(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	err := k.fetchOnce(ctx)
	if err != nil {
		k.log.WarnContext(ctx, "cannot fetch the token issuer's signing keys; tokens that no cached key verifies get 503", "err", err)
	}
	k.mu.Lock()
	k.lastErr = err
	k.inflight = nil
	k.mu.Unlock()
	close(done)
}

func (k *keySource) fetchOnce(ctx context.Context) error {
	k.mu.Lock()
	u, registered := k.jwksURL, k.registered
	k.mu.Unlock()
	if u == "" {
		var err error
		if u, err = k.discover(ctx); err != nil {
			return err
		}
		k.mu.Lock()
		k.jwksURL = u
		k.mu.Unlock()
	}
	if registered {
		_, err := k.cache.Refresh(ctx, u)
		return err
	}
	err := k.cache.Register(ctx, u,
		jwk.WithMaxFetchBodySize(maxDocumentBytes),
		jwk.WithHttprcResourceOption(httprc.WithMinInterval(MinCacheInterval)),
		jwk.WithHttprcResourceOption(httprc.WithMaxInterval(MaxCacheInterval)),
	)
	if k.cache.IsRegistered(ctx, u) {
		// Registered even when the first fetch failed: the cache keeps
		// trying in the background, and later refreshes go through it.
		k.mu.Lock()
		k.registered = true
		k.mu.Unlock()
	}
	return err
}

// discover reads jwks_uri from the issuer's OpenID Connect discovery
// document, whose issuer must be the configured one.
func (k *keySource) discover(ctx context.Context) (string, error) {
	u := strings.TrimSuffix(k.issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	res, err := k.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("discovery document: status %d", res.StatusCode)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxDocumentBytes)).Decode(&doc); err != nil {
		return "", fmt.Errorf("discovery document: %w", err)
	}
	if doc.Issuer != k.issuer {
		return "", errors.New("discovery document: its issuer is not HERALD_JWT_ISSUER")
	}
	if err := CheckFetchURL(doc.JWKSURI); err != nil {
		return "", fmt.Errorf("discovery document: jwks_uri: %w", err)
	}
	return doc.JWKSURI, nil
}
