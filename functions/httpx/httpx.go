// Package httpx holds what every REST function shares: the one mapping from
// herr codes to HTTP statuses, JSON error bodies, body decoding with size
// limits, and bearer-token authentication.
//
// Error bodies have one shape:
//
//	{"code": "invalid_argument", "message": "event_type is required",
//	 "detail": "event_type is required"}
//
// detail repeats the message (cut to 1,024 characters) because the clients
// of both APIs read it there: the notifications API's ErrorResponse
// requires it, and the Occtoo .NET SDK reads RFC 9457 problem details. A
// 422 on the notifications API (paths under /api/) instead carries detail
// as that API's HTTPValidationError list, one {loc, msg, type} naming the
// offending field (herr.Error.Field, after "body" or "query"):
//
//	{"code": "invalid_argument", "message": "event_type is required",
//	 "detail": [{"loc": ["body", "event", "event_type"],
//	             "msg": "event_type is required", "type": "value_error"}]}
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
	"strings"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
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
	// Detail is a string or a []FieldProblem; nil is written as Message,
	// cut to MaxDetailLength characters (see the package doc).
	Detail any `json:"detail"`
	// InFlight, Committed and Dispatched are set on 429 from a pull:
	// events leased and unacknowledged, the committed cursor and the last
	// sequence handed out (the zero sequence before the first of each).
	InFlight   *int64  `json:"in_flight,omitempty"`
	Committed  *string `json:"committed,omitempty"`
	Dispatched *string `json:"dispatched,omitempty"`
}

// MarshalJSON fills a nil Detail from Message.
func (b ErrorBody) MarshalJSON() ([]byte, error) {
	type plain ErrorBody // without this method
	if b.Detail == nil {
		b.Detail = truncate(b.Message, MaxDetailLength)
	}
	return json.Marshal(plain(b))
}

// FieldProblem is one entry of a 422's detail list on the notifications
// API: its ValidationError, as FastAPI writes it.
type FieldProblem struct {
	// Loc is the field's path: member names and array indices from the
	// request's root ("body", "query").
	Loc []any `json:"loc"`
	// Msg is the caller-safe message, at most MaxDetailLength characters.
	Msg string `json:"msg"`
	// Type classifies the problem: "missing" for an absent required
	// field, else "value_error".
	Type string `json:"type"`
}

// MaxDetailLength is the notifications API's cap on detail and msg, in
// characters.
const MaxDetailLength = 1024

// notificationsPrefix starts every path of the notifications API
// (compatible with NVIDIA Omniverse's); the durable-consumer API's are
// under /v1/.
const notificationsPrefix = "/api/"

// truncate cuts s to at most n characters, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// fieldProblems is the 422 detail list of err. A field path that does not
// say where it is gets "query" in front for GET and DELETE (whose
// parameters are in the query string) and "body" otherwise, as FastAPI
// writes locations.
func fieldProblems(r *http.Request, err error, msg string) []FieldProblem {
	loc := herr.FieldOf(err)
	if len(loc) == 0 || (loc[0] != "body" && loc[0] != "query" && loc[0] != "header") {
		where := "body"
		if r.Method == http.MethodGet || r.Method == http.MethodDelete {
			where = "query"
		}
		loc = append([]any{where}, loc...)
	}
	kind := "value_error"
	if strings.HasSuffix(msg, " is required") {
		kind = "missing"
	}
	return []FieldProblem{{Loc: loc, Msg: truncate(msg, MaxDetailLength), Type: kind}}
}

// WriteError writes err as a JSON error response. Unexpected errors are
// logged with their cause; the client gets only the safe message.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	code := herr.CodeOf(err)
	status := Status(code)
	body := ErrorBody{Code: code.String(), Message: herr.MessageOf(err)}
	if status == http.StatusUnprocessableEntity && strings.HasPrefix(r.URL.Path, notificationsPrefix) {
		body.Detail = fieldProblems(r, err, body.Message)
	}
	var full *leasestore.WindowFullError
	if errors.As(err, &full) {
		n := full.InFlight
		committed, dispatched := cloudevent.FormatSequence(full.Committed), cloudevent.FormatSequence(full.Dispatched)
		body.InFlight, body.Committed, body.Dispatched = &n, &committed, &dispatched
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
		WriteRawJSON(w, http.StatusInternalServerError, []byte(`{"code":"internal","message":"internal error","detail":"internal error"}`))
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
// bearer token, with the principal in the request context. Others get 401.
func Authenticate(a auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
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

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
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
