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
	"reflect"
	"strconv"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
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
	var full *leasestore.WindowFullError
	if errors.As(err, &full) {
		n := full.InFlight
		body.InFlight = &n
		secs := int((full.RetryAfter + 999_999_999) / 1_000_000_000)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	if code == herr.PermissionDenied {
		insufficientScope(w, r, err)
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
			return nil, herr.Wrap(herr.Malformed, err, "could not read the request body")
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, herr.Wrap(herr.Malformed, err, "could not read the request body")
	}
	if int64(len(b)) > limit {
		return nil, herr.New(herr.InvalidArgument, "request body is larger than %d bytes", limit)
	}
	return b, nil
}

// DecodeJSON reads and decodes a JSON body into v. Bad JSON (or JSON of the
// wrong shape) is herr.Malformed.
func DecodeJSON(r *http.Request, limit int64, v any) error {
	b, err := ReadBody(r, limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		// A field type's own decoder (filter.Type, say) may reject a value
		// with a coded, caller-safe error: pass it on as it is.
		var coded *herr.Error
		if errors.As(err, &coded) {
			return coded
		}
		return herr.Wrap(herr.Malformed, err, "request body is not valid JSON of the expected shape: "+jsonProblem(err))
	}
	return nil
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(root)"
		}
		return field + " must be " + jsonKind(te.Type.Kind())
	default:
		return "invalid JSON"
	}
}

// jsonKind names the JSON value a Go kind decodes from, so messages speak
// JSON rather than Go type names.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a JSON integer"
	case reflect.Float32, reflect.Float64:
		return "a JSON number"
	default:
		return "a different JSON value"
	}
}

// Authenticate wraps next so that it runs only for requests with a valid
// bearer token, with the principal in the request context. Answers follow
// RFC 6750, section 3: no token is 401 with a bare Bearer challenge; a
// token a refuses is 401 with error="invalid_token" and the refusal's
// description ("token expired", "wrong audience"); a verifier that cannot
// fetch the issuer's keys is 503 with Retry-After. A 403 from the handler
// gets error="insufficient_scope" (WriteError).
func Authenticate(a auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", challenge("", ""))
			msg := "an Authorization: Bearer <token> header is required"
			if queryTokenAllowed(r.Context()) {
				msg += " (clients that cannot set headers, such as browsers, may pass the token in the access_token query parameter)"
			}
			WriteError(w, r, herr.New(herr.Unauthenticated, "%s", msg))
			return
		}
		p, err := a.Authenticate(r.Context(), token)
		if err != nil {
			switch herr.CodeOf(err) {
			case herr.Unauthenticated:
				w.Header().Set("WWW-Authenticate", challenge("invalid_token", herr.MessageOf(err)))
			case herr.Unavailable:
				w.Header().Set("Retry-After", retryAfterKeys)
			}
			WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

func bearer(h string) (string, bool) { return auth.ParseBearer(h) }

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
