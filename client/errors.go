package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Error is a REST answer outside 2xx. Code and Message come from Herald's
// error body ({"code": "invalid_argument", "message": "…"}); a body that is
// not Herald's (a proxy's page) leaves Code empty and Message holding its
// first bytes.
type Error struct {
	// StatusCode is the HTTP status, e.g. 404.
	StatusCode int
	// Code is Herald's error code, e.g. "not_found", "invalid_argument".
	Code string
	// Message is Herald's caller-safe message.
	Message string
	// RetryAfter is the answer's Retry-After (429, 503), 0 when absent.
	RetryAfter time.Duration
	// InFlight is the consumer's leased and unacknowledged event count on a
	// pull's 429, nil otherwise.
	InFlight *int64

	op string // "POST /v1/event-destinations"
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("herald: %s: %d %s", e.op, e.StatusCode, msg)
}

// newError builds the *Error of a non-2xx answer.
func newError(method, path string, res *http.Response, body []byte) *Error {
	e := &Error{StatusCode: res.StatusCode, op: method + " " + path}
	var b struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		InFlight *int64 `json:"in_flight"`
	}
	if json.Unmarshal(body, &b) == nil && (b.Code != "" || b.Message != "") {
		e.Code, e.Message, e.InFlight = b.Code, b.Message, b.InFlight
	} else {
		s := strings.TrimSpace(string(body))
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		e.Message = s
	}
	e.RetryAfter = parseRetryAfter(res.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date (RFC 9110, section 10.2.3); 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// StatusCode returns the HTTP status of a REST error (0 for an error that
// is not a Herald answer). A gRPC stream error answers with the status its
// code corresponds to (NOT_FOUND 404, PERMISSION_DENIED 403,
// UNAUTHENTICATED 401, INVALID_ARGUMENT 400, RESOURCE_EXHAUSTED 429,
// UNAVAILABLE 503).
func StatusCode(err error) int {
	var he *Error
	if errors.As(err, &he) {
		return he.StatusCode
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return http.StatusNotFound
		case connect.CodePermissionDenied:
			return http.StatusForbidden
		case connect.CodeUnauthenticated:
			return http.StatusUnauthorized
		case connect.CodeInvalidArgument:
			return http.StatusBadRequest
		case connect.CodeResourceExhausted:
			return http.StatusTooManyRequests
		case connect.CodeUnavailable:
			return http.StatusServiceUnavailable
		}
	}
	return 0
}

// IsNotFound reports whether err says the consumer, queue, dead letter or
// reconnect token does not exist (404, gRPC NOT_FOUND).
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }
