// Package httpx holds what every REST function shares: the one mapping from
// herr codes to HTTP statuses, JSON error bodies, body decoding with size
// limits, and bearer-token authentication.
//
// Error bodies have one shape:
//
//	{"code": "invalid_argument", "message": "event_type is required"}
//
// The message is caller-safe (see package herr): never a token, never a raw
// backend error.
package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
	"github.com/heraldevents/herald/leasestore"
)

// Status maps a herr code to its HTTP status. It is the only such mapping.
func Status(c herr.Code) int {
	switch c {
	case herr.Malformed, herr.OutOfRange:
		return http.StatusBadRequest
	case herr.InvalidArgument:
		return http.StatusUnprocessableEntity
	case herr.Unauthenticated:
		return http.StatusUnauthorized
	case herr.PermissionDenied:
		return http.StatusForbidden
	case herr.NotFound:
		return http.StatusNotFound
	case herr.AlreadyExists, herr.FailedPrecondition, herr.Aborted:
		return http.StatusConflict
	case herr.ResourceExhausted:
		return http.StatusTooManyRequests
	case herr.Unavailable:
		return http.StatusServiceUnavailable
	case herr.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case herr.Canceled:
		return 499 // client closed request
	case herr.Unimplemented:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// InFlight is set on 429 from a pull: events leased and unacknowledged.
	InFlight *int64 `json:"in_flight,omitempty"`
}

// WriteError writes err as a JSON error response. Unexpected errors are
// logged with their cause; the client gets only the safe message.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	code := herr.CodeOf(err)
	status := Status(code)
	body := ErrorBody{Code: code.String(), Message: herr.MessageOf(err)}
	var over *OverloadedError
	if errors.As(err, &over) {
		w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	}
	var full *leasestore.WindowFullError
	if errors.As(err, &full) {
		n := full.InFlight
		body.InFlight = &n
		secs := int((full.RetryAfter + 999_999_999) / 1_000_000_000)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	if status >= 500 {
		slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	WriteJSON(w, status, body)
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// http.Error would label this body text/plain; keep the one error
		// shape, content type included.
		WriteRawJSON(w, http.StatusInternalServerError, []byte(`{"code":"internal","message":"internal error"}`))
		return
	}
	WriteRawJSON(w, status, b)
}

// WriteRawJSON writes an already encoded JSON body.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ReadBody reads the request body up to limit bytes. A larger body is
// herr.InvalidArgument naming the limit (HTTP 422: the request is
// well-formed but too large to accept).
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > limit {
		return nil, herr.New(herr.InvalidArgument, "request body is larger than %d bytes", limit)
	} else if n >= 0 {
		// The length is known (net/http holds the body to it): read into
		// one buffer of that size rather than let io.ReadAll grow and copy
		// its way up to it, which for a 100-event publish batch allocated
		// twice the body.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, readErr(err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, readErr(err)
	}
	if int64(len(b)) > limit {
		return nil, herr.New(herr.InvalidArgument, "request body is larger than %d bytes", limit)
	}
	return b, nil
}

// readErr is the error of a body that could not be read: the client's
// fault (herr.Malformed), unless Admission refused the bytes.
func readErr(err error) error {
	var over *OverloadedError
	if errors.As(err, &over) {
		return over
	}
	return herr.Wrap(herr.Malformed, err, "could not read the request body")
}

// DecodeJSON reads and decodes a JSON body into v by the strict rules of
// package internal/strictjson: member names match exactly, an unknown or
// repeated member is herr.Malformed (HTTP 400) naming it (`unknown field
// "delay"`), bad JSON or JSON of the wrong shape is herr.Malformed, and
// invalid UTF-8 is herr.InvalidArgument (422). opts relax a rule (see
// strictjson.LenientUTF8).
func DecodeJSON(r *http.Request, limit int64, v any, opts ...strictjson.Option) error {
	b, err := ReadBody(r, limit)
	if err != nil {
		return err
	}
	return strictjson.Unmarshal(b, v, opts...)
}

// Authenticate wraps next so that it runs only for requests with a valid
// bearer token, with the principal in the request context. Others get 401;
// a request with two Authorization headers, or a token with a control
// character, gets 400 (see BearerToken).
func Authenticate(a auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := BearerToken(r.Header.Values("Authorization"))
		if err != nil {
			if herr.CodeOf(err) == herr.Malformed {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="invalid_request"`)
				WriteError(w, r, err)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
			msg := "an Authorization: Bearer <token> header is required"
			if queryTokenAllowed(r.Context()) {
				msg += " (clients that cannot set headers, such as browsers, may pass the token in the access_token query parameter)"
			}
			WriteError(w, r, herr.New(herr.Unauthenticated, "%s", msg))
			return
		}
		p, err := a.Authenticate(r.Context(), token)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
			WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// BearerToken returns the token of the one `Authorization: Bearer <token>`
// header among values (all the request's Authorization headers; the
// scheme is case-insensitive, RFC 9110 §11.1). Errors, never quoting the
// header: herr.Unauthenticated when there is none or it is not a bearer
// token; herr.Malformed (HTTP 400, RFC 6750 §3.1 invalid_request) for
// more than one header — which one a proxy or a client library honours is
// not defined — and for a token that is not visible ASCII (RFC 6750's
// b64token is a subset of it: a control character, a space or a byte past
// 0x7E is no token).
func BearerToken(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", herr.New(herr.Unauthenticated, "an Authorization: Bearer <token> header is required")
	case 1:
	default:
		return "", herr.New(herr.Malformed, "send one Authorization header, not %d", len(values))
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	token = strings.Trim(token, " \t")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", herr.New(herr.Unauthenticated, "an Authorization: Bearer <token> header is required")
	}
	for i := 0; i < len(token); i++ {
		if token[i] < 0x21 || token[i] > 0x7e {
			return "", herr.New(herr.Malformed, "the bearer token must be visible ASCII characters (0x21-0x7E)")
		}
	}
	return token, nil
}

// Principal returns the authenticated principal of r. Handlers behind
// Authenticate always have one.
func Principal(r *http.Request) (*auth.Principal, error) {
	return auth.FromContext(r.Context())
}

type queryTokenKey struct{}

// WithQueryTokenAllowed marks ctx as a request to a route that also takes
// its bearer token from the access_token query parameter (the stream
// endpoints; see functions/stream.AccessTokenFromQuery), so that a 401
// says so.
func WithQueryTokenAllowed(ctx context.Context) context.Context {
	return context.WithValue(ctx, queryTokenKey{}, true)
}

func queryTokenAllowed(ctx context.Context) bool {
	ok, _ := ctx.Value(queryTokenKey{}).(bool)
	return ok
}
