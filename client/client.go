package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Defaults of New.
const (
	// DefaultTimeout bounds one attempt of a REST call. It is above the
	// longest wait a pull can make at the broker (HERALD_RECEIVE_WAIT, at
	// most 20 s).
	DefaultTimeout = 30 * time.Second
	// maxResponseBytes bounds a REST answer the client reads: a lease holds
	// at most 1,000,000 encoded bytes (HERALD_MAX_LEASE_BYTES), a batch
	// publish answer 100 echoed events of at most 256 KiB each.
	maxResponseBytes = 64 << 20
)

// Client calls one Herald deployment. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	http      *http.Client // REST
	grpc      *http.Client // gRPC streams: HTTP/2, cleartext (h2c) for http:// URLs
	tokens    oauth2.TokenSource
	timeout   time.Duration
	retry     RetryPolicy
	userAgent string
	noKeys    bool // WithoutIdempotencyKeys
}

// Option configures New.
type Option func(*Client)

// WithToken sends token as `Authorization: Bearer <token>` on every call.
func WithToken(token string) Option {
	return func(c *Client) {
		c.tokens = oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token, TokenType: "Bearer"})
	}
}

// WithTokenSource asks ts for the bearer token of every call and of every
// stream (re)connect, so tokens that expire (JWTs) are refreshed by the
// source. Wrap a source that is slow to ask in oauth2.ReuseTokenSource.
func WithTokenSource(ts oauth2.TokenSource) Option { return func(c *Client) { c.tokens = ts } }

// WithTimeout bounds each attempt of a REST call (default DefaultTimeout);
// the caller's context bounds the call with its retries. Streams have no
// per-call timeout: they end with their context.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetry replaces the retry policy (default DefaultRetryPolicy);
// RetryPolicy{MaxAttempts: 1} turns retries off.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithHTTPClient makes REST calls through hc (its Timeout, if set, bounds
// each attempt too). gRPC streams keep their own HTTP/2 transport.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header of every call.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithoutIdempotencyKeys stops the client from sending a random
// Idempotency-Key with every publish (see WithIdempotencyKey): a retried
// publish may then publish its events twice. Keys set with
// WithIdempotencyKey are still sent.
func WithoutIdempotencyKeys() Option { return func(c *Client) { c.noKeys = true } }

// New returns a client of the Herald at baseURL (scheme, host and an
// optional path prefix, e.g. "http://127.0.0.1:8080" or
// "https://herald.example.com/prod"). It makes no call. A base URL that is
// not http or https is an error.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		// url.Parse's error quotes the URL, credentials and all.
		return nil, errors.New("herald client: base URL does not parse as a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("herald client: base URL %q must be http:// or https:// with a host", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("herald client: base URL %q must have no query or fragment", u.Redacted())
	}
	c := &Client{base: u, timeout: DefaultTimeout, retry: DefaultRetryPolicy, userAgent: "herald-go-client"}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	c.grpc = &http.Client{Transport: &http.Transport{Protocols: protocols, Proxy: http.ProxyFromEnvironment}}
	if c.timeout <= 0 {
		return nil, errors.New("herald client: WithTimeout must be positive")
	}
	if err := c.retry.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases idle connections. The client must not be used after.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
	c.grpc.CloseIdleConnections()
}

// BaseURL returns the base URL the client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// request is one REST call.
type request struct {
	method string
	path   string // below the base URL, e.g. "/v1/event-destinations"
	query  url.Values
	body   any // marshalled as JSON; nil for none
	// noRetry lists statuses that are answers for this call, not
	// failures to retry (pull: 429).
	noRetry []int
	// retryAlso lists statuses that are failures to retry for this call
	// besides the usual ones (a keyed publish: 409, its key in progress).
	retryAlso []int
	// header holds extra request headers (Idempotency-Key).
	header http.Header
}

// response is a successful REST answer.
type response struct {
	status int
	body   []byte
}

// do runs req with retries and decodes a 2xx JSON answer into out (when
// out is non-nil and the answer has a body). A non-2xx answer is an *Error.
// A wait before a retry that would outlast ctx's deadline is not begun: the
// last failure is returned at once.
func (c *Client) do(ctx context.Context, req request, out any) (response, error) {
	var body []byte
	if req.body != nil {
		var err error
		if body, err = json.Marshal(req.body); err != nil {
			return response{}, fmt.Errorf("herald client: encode request: %w", err)
		}
	}
	var last error
	for attempt := 1; ; attempt++ {
		res, err := c.once(ctx, req, body)
		if err == nil {
			if out != nil && len(res.body) > 0 {
				if err := json.Unmarshal(res.body, out); err != nil {
					return res, fmt.Errorf("herald client: %s %s: decode answer: %w", req.method, req.path, err)
				}
			}
			return res, nil
		}
		last = err
		retryAfter, retryable := c.retryable(ctx, req, err)
		if !retryable || attempt >= c.retry.MaxAttempts {
			return response{}, last
		}
		wait := c.retry.delay(attempt, retryAfter)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			// No attempt could start before the context ends: the
			// failure (a 429 and its Retry-After) is the answer now.
			return response{}, last
		}
		if err := sleep(ctx, wait); err != nil {
			return response{}, last
		}
	}
}

// retryable says whether err may be fixed by retrying req, and the
// server's Retry-After.
func (c *Client) retryable(ctx context.Context, req request, err error) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	var he *Error
	if errors.As(err, &he) {
		for _, s := range req.noRetry {
			if he.StatusCode == s {
				return 0, false
			}
		}
		for _, s := range req.retryAlso {
			if he.StatusCode == s {
				return he.RetryAfter, true
			}
		}
		return he.RetryAfter, retryableStatus(he.StatusCode)
	}
	// Anything else is a transport failure: connection refused or reset,
	// a timed-out attempt, a broken answer.
	return 0, true
}

// retryableStatus lists the statuses retrying can fix.
func retryableStatus(s int) bool {
	switch s {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// once makes one attempt of req.
func (c *Client) once(ctx context.Context, req request, body []byte) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.base
	u.Path = c.base.Path + req.path
	u.RawPath = ""
	if len(req.query) > 0 {
		u.RawQuery = req.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), rd)
	if err != nil {
		return response{}, fmt.Errorf("herald client: %w", err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	for k, vs := range req.header {
		hr.Header[k] = vs
	}
	hr.Header.Set("User-Agent", c.userAgent)
	if err := c.authorize(hr.Header); err != nil {
		return response{}, err
	}
	res, err := c.http.Do(hr)
	if err != nil {
		return response{}, fmt.Errorf("herald client: %s %s: %w", req.method, req.path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes+1))
	if err != nil {
		return response{}, fmt.Errorf("herald client: %s %s: read answer: %w", req.method, req.path, err)
	}
	if len(data) > maxResponseBytes {
		return response{}, fmt.Errorf("herald client: %s %s: answer larger than %d bytes", req.method, req.path, maxResponseBytes)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return response{}, newError(req.method, req.path, res, data)
	}
	return response{status: res.StatusCode, body: data}, nil
}

// authorize sets the Authorization header from the token source, if any.
func (c *Client) authorize(h http.Header) error {
	if c.tokens == nil {
		return nil
	}
	tok, err := c.tokens.Token()
	if err != nil {
		// The source's error may quote what it exchanged; keep it, since it
		// is the caller's own, but never add the token.
		return fmt.Errorf("herald client: token source: %w", err)
	}
	typ := tok.Type() // "Bearer" unless the source says otherwise
	h.Set("Authorization", typ+" "+tok.AccessToken)
	return nil
}

// sleep waits d or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
