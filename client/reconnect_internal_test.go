package client

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
)

func TestReconnectable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want bool
	}{
		{connect.NewError(connect.CodeUnavailable, errors.New("server shutting down")), true},
		{connect.NewError(connect.CodeResourceExhausted, errors.New("1,000 streams")), true},
		{connect.NewError(connect.CodeInternal, errors.New("Internal Server Error: The broker cancelled this stream's consumer. Reconnect to resume consuming.")), true},
		{connect.NewError(connect.CodeInternal, errors.New("something else broke")), false},
		{connect.NewError(connect.CodeNotFound, errors.New("queue gone")), false},
		{connect.NewError(connect.CodeUnauthenticated, errors.New("no token")), false},
		{connect.NewError(connect.CodeInternal, fmt.Errorf("protocol error: %w", io.ErrUnexpectedEOF)), true},
		{connect.NewError(connect.CodeInternal, fmt.Errorf("protocol error: incomplete envelope: %w", errors.New("http2: client conn is closed"))), true},
		{errors.New("token source: issuer down"), false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, reconnectable(c.err), "%v", c.err)
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, MaxRetryAfter: 10 * time.Second}
	for attempt, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 9: 400 * time.Millisecond} {
		for range 50 {
			d := p.delay(attempt, 0)
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.Less(t, d, ceiling, "attempt %d", attempt)
		}
	}
	assert.GreaterOrEqual(t, p.delay(1, 3*time.Second), 3*time.Second, "Retry-After is a floor")
	assert.Equal(t, 10*time.Second, p.delay(1, time.Hour), "Retry-After is capped by MaxRetryAfter")
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.Equal(t, 7*time.Second, parseRetryAfter("7", now))
	assert.Equal(t, 30*time.Second, parseRetryAfter(now.Add(30*time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT"), now))
	assert.Zero(t, parseRetryAfter("", now))
	assert.Zero(t, parseRetryAfter("-3", now))
	assert.Zero(t, parseRetryAfter("soon", now))
}
