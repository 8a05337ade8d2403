package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/heraldevents/herald/client"
)

// fastRetry keeps retry tests short; the waits are not what they check.
var fastRetry = client.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

// failing serves answers in turn, then 200 {"destinations": []}; it
// counts the requests.
func failing(t *testing.T, answers ...func(http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i < len(answers) {
			answers[i](w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"destinations": [{"id": "d1", "type": "DURABLE_CONSUMER"}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func status(code int, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"code": "x", "message": "try later"}`))
	}
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func TestRetriesFixableFailures(t *testing.T) {
	t.Parallel()
	srv, n := failing(t, status(503), status(429, "Retry-After", "0"), hangUp, status(502))
	c, err := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	require.NoError(t, err)
	ds, err := c.ListConsumers(testContext(t))
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, int32(5), n.Load(), "503, 429, a hang-up and 502 are retried, then the call succeeds")
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	srv, n := failing(t, status(503), status(503), status(503), status(503), status(503))
	c, err := client.New(srv.URL, client.WithRetry(fastRetry))
	require.NoError(t, err)
	_, err = c.ListConsumers(testContext(t))
	assert.Equal(t, 503, client.StatusCode(err))
	assert.Equal(t, int32(4), n.Load())
}

func TestNeverRetriesOtherClientErrors(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 409, 422} {
		srv, n := failing(t, status(code))
		c, err := client.New(srv.URL, client.WithRetry(fastRetry))
		require.NoError(t, err)
		_, err = c.ListConsumers(testContext(t))
		assert.Equal(t, code, client.StatusCode(err))
		assert.Equal(t, int32(1), n.Load(), "%d is not retried", code)
	}
}

func TestPullDoesNotRetryWindowFull(t *testing.T) {
	t.Parallel()
	srv, n := failing(t, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(429)
		_, _ = w.Write([]byte(`{"code": "resource_exhausted", "message": "window full", "in_flight": 1000}`))
	})
	c, err := client.New(srv.URL, client.WithRetry(fastRetry))
	require.NoError(t, err)
	_, err = c.Pull(testContext(t), "d1", client.PullOptions{})
	var he *client.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 7*time.Second, he.RetryAfter)
	require.NotNil(t, he.InFlight)
	assert.Equal(t, int64(1000), *he.InFlight)
	assert.Equal(t, int32(1), n.Load())
}

// TestRetryAfterIsHonoured: the wait after a 429 is at least its
// Retry-After, so a context shorter than it ends the call with the 429
// instead of a second attempt.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	srv, n := failing(t, status(429, "Retry-After", "3600"))
	c, err := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.ListConsumers(ctx)
	assert.Equal(t, 429, client.StatusCode(err))
	assert.Equal(t, int32(1), n.Load(), "no attempt before the Retry-After")
}

// TestRetryAfterPastTheDeadlineReturnsAtOnce: a Retry-After the context's
// deadline would cut short is not slept through; the 429 is the answer
// while the context is still live.
func TestRetryAfterPastTheDeadlineReturnsAtOnce(t *testing.T) {
	t.Parallel()
	srv, n := failing(t, status(429, "Retry-After", "3600"))
	c, err := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.ListConsumers(ctx)
	assert.Equal(t, 429, client.StatusCode(err))
	assert.NoError(t, ctx.Err(), "the call returned before its deadline, not at it")
	assert.Equal(t, int32(1), n.Load())
}

type countingSource struct{ n atomic.Int32 }

func (s *countingSource) Token() (*oauth2.Token, error) {
	if s.n.Add(1) == 1 {
		return &oauth2.Token{AccessToken: "first"}, nil
	}
	return &oauth2.Token{AccessToken: "second"}, nil
}

func TestTokenSourceAskedPerRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"destinations": []}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithTokenSource(&countingSource{}))
	require.NoError(t, err)
	for range 2 {
		_, err := c.ListConsumers(testContext(t))
		require.NoError(t, err)
	}
	mu.Lock() // the race detector does not see the order a TCP round trip gives
	defer mu.Unlock()
	assert.Equal(t, []string{"Bearer first", "Bearer second"}, seen)
}

type brokenSource struct{}

func (brokenSource) Token() (*oauth2.Token, error) { return nil, errors.New("issuer down") }

func TestTokenSourceErrorIsReturned(t *testing.T) {
	t.Parallel()
	srv, n := failing(t)
	c, err := client.New(srv.URL, client.WithTokenSource(brokenSource{}), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	_, err = c.ListConsumers(testContext(t))
	assert.ErrorContains(t, err, "issuer down")
	assert.Zero(t, n.Load(), "nothing is sent without a token")
}

func TestNewRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://x", "127.0.0.1:8080", "http://h/?q=1"} {
		_, err := client.New(u)
		assert.Error(t, err, u)
	}
}

// TestNewErrorsHideCredentials: a bad base URL's error never shows its
// password.
func TestNewErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ftp://user:pw-secret@h/x", "http://user:pw-secret@h/?q=1", "http://user:pw-secret@h/%zz", "http://user:pw-secret@h:bad/"} {
		_, err := client.New(u)
		require.Error(t, err, u)
		assert.NotContains(t, err.Error(), "pw-secret", u)
	}
}

// TestConsumeOutlastsPausedAndFullWindow: Consume waits out a paused
// consumer (409) and a full window (429), handles the lease that comes
// next and acknowledges it, and stops for good on 404.
func TestConsumeOutlastsPausedAndFullWindow(t *testing.T) {
	t.Parallel()
	var calls []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		n := len(calls)
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/acknowledge"):
			_, _ = w.Write([]byte(`{"status": "committed", "committed": "001.00000000000000000001"}`))
		case n == 1:
			status(409)(w)
		case n == 2:
			status(429, "Retry-After", "0")(w)
		case n == 3:
			w.WriteHeader(204)
		case n == 4:
			_, _ = w.Write([]byte(`{"leaseId": "L", "generation": 0, "attempt": 1, "expiresAt": "2999-01-01T00:00:00Z",
				"events": [{"specversion": "1.0", "id": "e1", "source": "/s", "type": "a.b", "sequence": "001.00000000000000000001"}]}`))
		default:
			status(404)(w)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithRetry(fastRetry))
	require.NoError(t, err)
	var handled []string
	err = c.Consume(testContext(t), "d1", func(_ context.Context, l *client.Lease) error {
		handled = append(handled, l.ID)
		return nil
	}, client.ConsumeOptions{IdleBackoff: time.Millisecond, MaxIdleBackoff: time.Millisecond})
	assert.True(t, client.IsNotFound(err), "%v", err)
	assert.Equal(t, []string{"L"}, handled)
	mu.Lock() // the race detector does not see the order a TCP round trip gives
	defer mu.Unlock()
	assert.Equal(t, []string{"pull", "pull", "pull", "pull", "acknowledge", "pull"}, calls)
}

// TestConsumeWorkersHaveTheirOwnIDs: every worker pulls with its own
// workerId, prefix-index.
func TestConsumeWorkersHaveTheirOwnIDs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ids := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids[r.URL.Query().Get("workerId")] = true
		n := len(ids)
		mu.Unlock()
		if n < 3 {
			w.WriteHeader(204)
			return
		}
		status(404)(w) // every worker has pulled: stop
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithRetry(fastRetry))
	require.NoError(t, err)
	err = c.Consume(testContext(t), "d1", func(context.Context, *client.Lease) error { return nil },
		client.ConsumeOptions{Workers: 3, WorkerPrefix: "billing", IdleBackoff: time.Millisecond, MaxIdleBackoff: time.Millisecond})
	assert.True(t, client.IsNotFound(err), "%v", err)
	mu.Lock() // the race detector does not see the order a TCP round trip gives
	defer mu.Unlock()
	assert.Equal(t, map[string]bool{"billing-0": true, "billing-1": true, "billing-2": true}, ids)
}
