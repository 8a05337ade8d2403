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
	"strconv"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/bufpool"
	"github.com/heraldevents/herald/internal/logredact"
	"github.com/heraldevents/herald/internal/strictjson"
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

// WindowState is what an error of a full in-flight window reports (as
// leasestore.WindowFullError does): the events in flight, the committed
// cursor and the last position handed out, which the durable-consumer
// API's 429 body carries.
type WindowState interface {
	WindowState() (inFlight, committed, dispatched int64)
}

// WriteError writes err as a JSON error response. Unexpected errors (5xx)
// are logged with their cause, through the request's logger
// (accesslog.Logger), naming the route pattern, never the path, with any
// reconnect token cut out of the cause; the client gets only the safe
// message.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	code := herr.CodeOf(err)
	status := Status(code)
	body := ErrorBody{Code: code.String(), Message: herr.MessageOf(err)}
	if status == http.StatusUnprocessableEntity && strings.HasPrefix(r.URL.Path, notificationsPrefix) {
		body.Detail = fieldProblems(r, err, body.Message)
	}
	if d, ok := herr.RetryAfterOf(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1)))
	}
	var full WindowState
	if errors.As(err, &full) {
		n, c, d := full.WindowState()
		committed, dispatched := cloudevent.FormatSequence(c), cloudevent.FormatSequence(d)
		body.InFlight, body.Committed, body.Dispatched = &n, &committed, &dispatched
	}
	if code == herr.PermissionDenied {
		insufficientScope(w, r, err)
	}
	if status >= 500 && !IsLoadShed(err) { // the refusals' sources log them, rate-limited
		// The route pattern, not the path: a path carries ids, and a
		// non-durable queue's id is its reconnect token; the cause's text
		// may quote one too (store errors quote consumer ids).
		accesslog.Logger(r.Context()).LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("method", r.Method), slog.String("route", accesslog.Route(r)), slog.Int("status", status),
			slog.String("err", logredact.String(err.Error())))
	}
	WriteJSON(w, status, body)
}

// IsLoadShed reports whether err refuses work under load on purpose
// (Admission's *OverloadedError, the stream-open bound's
// *delivery.OpensShedError: any error in the chain with a LoadShed method
// that says so): an expected answer, which its source logs rate-limited,
// never a failure to log per request.
func IsLoadShed(err error) bool {
	var shed interface{ LoadShed() bool }
	return errors.As(err, &shed) && shed.LoadShed()
}

// WriteJSON writes v as JSON with status, ending in a newline (see
// WriteRawJSON).
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

// WriteRawJSON writes an already encoded JSON body, followed by a
// newline: JSON readers ignore it, and a terminal shows the next prompt
// (or curl's next answer) on a line of its own, as json.Encoder's output
// does. Content-Length counts it.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write(newline)
}

var newline = []byte{'\n'}

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

// ReadBodyPooled is ReadBody into a buffer lent by package
// internal/bufpool: release gives it back, after which neither body nor
// any slice of it may be used. For the hot handlers whose body is as
// big as a publish batch, which would otherwise be a fresh allocation
// per request. A body of unknown length is read as ReadBody reads it
// (release then does nothing).
func ReadBodyPooled(r *http.Request, limit int64) (body []byte, release func(), err error) {
	n := r.ContentLength
	if n < 0 || n > limit {
		b, err := ReadBody(r, limit)
		return b, func() {}, err
	}
	buf := bufpool.Get(int(n))
	b := (*buf)[:n]
	if _, err := io.ReadFull(r.Body, b); err != nil {
		bufpool.Put(buf)
		return nil, func() {}, readErr(err)
	}
	return b, func() { bufpool.Put(buf) }, nil
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
// strictjson.LenientParts).
func DecodeJSON(r *http.Request, limit int64, v any, opts ...strictjson.Option) error {
	b, err := ReadBody(r, limit)
	if err != nil {
		return err
	}
	return strictjson.Unmarshal(b, v, opts...)
}

// Authenticate wraps next so that it runs only for requests with a valid
// bearer token, with the principal in the request context. Answers follow
// RFC 6750, section 3: no token is 401 with a bare Bearer challenge; two
// Authorization headers, or a token with a control character, is 400 with
// error="invalid_request" (see BearerToken); a token a refuses is 401 with
// error="invalid_token" and the refusal's description ("token expired",
// "wrong audience"); a verifier that cannot fetch the issuer's keys is 503
// with Retry-After. A 403 from the handler gets error="insufficient_scope"
// (WriteError).
func Authenticate(a auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := BearerToken(r.Header.Values("Authorization"))
		if err != nil {
			if herr.CodeOf(err) == herr.Malformed {
				w.Header().Set("WWW-Authenticate", challenge("invalid_request", ""))
				WriteError(w, r, err)
				return
			}
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
		accesslog.SetPrincipal(r.Context(), p.ID)
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
	token, ok := auth.ParseBearer(values[0])
	if !ok {
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
