package client

import (
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how REST calls are retried (see the package doc for
// which failures are retried).
type RetryPolicy struct {
	// MaxAttempts is the most attempts of one call, the first included;
	// 1 turns retries off. Must be at least 1.
	MaxAttempts int
	// InitialBackoff is the ceiling of the first wait; each later wait's
	// ceiling doubles, up to MaxBackoff. The wait is drawn uniformly below
	// the ceiling ("full jitter"), so clients that failed together do not
	// retry together.
	InitialBackoff time.Duration
	// MaxBackoff caps the ceiling.
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a server's Retry-After is honoured; a
	// longer one is waited for this long. 0 means no cap beyond the call's
	// context.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is what New uses: 4 attempts, waits drawn below
// 200 ms, 400 ms, 800 ms, Retry-After honoured up to a minute.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:    4,
	InitialBackoff: 200 * time.Millisecond,
	MaxBackoff:     5 * time.Second,
	MaxRetryAfter:  time.Minute,
}

func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 1:
		return errors.New("herald client: RetryPolicy.MaxAttempts must be at least 1")
	case p.InitialBackoff < 0 || p.MaxBackoff < 0 || p.MaxRetryAfter < 0:
		return errors.New("herald client: RetryPolicy durations must not be negative")
	}
	return nil
}

// delay is the wait after the attempt-th failed attempt: a jittered
// exponential backoff, and at least the server's Retry-After.
func (p RetryPolicy) delay(attempt int, retryAfter time.Duration) time.Duration {
	d := jitter(backoffCeiling(p.InitialBackoff, p.MaxBackoff, attempt))
	if p.MaxRetryAfter > 0 && retryAfter > p.MaxRetryAfter {
		retryAfter = p.MaxRetryAfter
	}
	return max(d, retryAfter)
}

// backoffCeiling is initial·2^(n-1), capped at most.
func backoffCeiling(initial, most time.Duration, n int) time.Duration {
	d := initial
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// jitter draws uniformly from [0, d) ("full jitter").
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
