package httpx_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// allCodes lists every herr code: those whose String is a name.
func allCodes() []herr.Code {
	var out []herr.Code
	for c := herr.Code(0); !strings.HasPrefix(c.String(), "code("); c++ {
		out = append(out, c)
	}
	return out
}

// TestStatus is the one herr → HTTP table, checked for every code.
func TestStatus(t *testing.T) {
	t.Parallel()
	want := map[herr.Code]int{
		herr.Unknown:            500,
		herr.Malformed:          400,
		herr.InvalidArgument:    422,
		herr.OutOfRange:         400,
		herr.Unauthenticated:    401,
		herr.PermissionDenied:   403,
		herr.NotFound:           404,
		herr.AlreadyExists:      409,
		herr.FailedPrecondition: 409,
		herr.Aborted:            409,
		herr.ResourceExhausted:  429,
		herr.Unavailable:        503,
		herr.DeadlineExceeded:   504,
		herr.Canceled:           499,
		herr.Internal:           500,
		herr.Unimplemented:      501,
	}
	codes := allCodes()
	require.Len(t, codes, len(want), "a new herr code needs a row here and in httpx.Status")
	for _, c := range codes {
		w, ok := want[c]
		require.True(t, ok, "no expected status for %s", c)
		require.Equal(t, w, httpx.Status(c), "%s", c)
	}
	require.Equal(t, 500, httpx.Status(herr.Code(999)), "an unknown code is a server error")
	require.Equal(t, 500, httpx.Status(herr.Code(-1)))
}

func decodeError(t *testing.T, rec *httptest.ResponseRecorder) httpx.ErrorBody {
	t.Helper()
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var b httpx.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b), "%s", rec.Body)
	return b
}

// TestWriteError checks the body shape and that causes stay out of it.
func TestWriteError(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest("GET", "/x", nil)

	rec := httptest.NewRecorder()
	httpx.WriteError(rec, req, herr.Wrap(herr.Unavailable, errors.New("dial tcp 10.0.0.1: password=hunter2"), "the broker is unavailable"))
	require.Equal(t, 503, rec.Code)
	b := decodeError(t, rec)
	require.Equal(t, "unavailable", b.Code)
	require.Equal(t, "the broker is unavailable", b.Message)
	require.NotContains(t, rec.Body.String(), "hunter2")
	require.Nil(t, b.InFlight)
	require.Empty(t, rec.Header().Get("Retry-After"))

	rec = httptest.NewRecorder()
	httpx.WriteError(rec, req, errors.New("raw internal detail"))
	require.Equal(t, 500, rec.Code)
	b = decodeError(t, rec)
	require.Equal(t, "unknown", b.Code)
	require.NotContains(t, rec.Body.String(), "raw internal detail")

	rec = httptest.NewRecorder()
	httpx.WriteError(rec, req, herr.New(herr.InvalidArgument, "event_type is required"))
	require.Equal(t, 422, rec.Code)
	require.Equal(t, httpx.ErrorBody{Code: "invalid_argument", Message: "event_type is required", Detail: "event_type is required"}, decodeError(t, rec))
	require.NotContains(t, rec.Body.String(), "in_flight", "omitted unless set")
	require.NotContains(t, rec.Body.String(), "committed", "omitted unless set")
}

// TestWriteErrorDetail checks detail: the message as a string beside code
// and message, cut to 1,024 characters; on a 422 of the notifications API
// the HTTPValidationError list naming the field.
func TestWriteErrorDetail(t *testing.T) {
	t.Parallel()
	raw := func(rec *httptest.ResponseRecorder) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), "%s", rec.Body)
		return m
	}

	rec := httptest.NewRecorder()
	httpx.WriteError(rec, httptest.NewRequest("GET", "/api/v1beta/events", nil), herr.New(herr.NotFound, "no such queue"))
	require.Equal(t, "no such queue", raw(rec)["detail"])

	long := strings.Repeat("é", 1500)
	rec = httptest.NewRecorder()
	httpx.WriteError(rec, httptest.NewRequest("GET", "/v1/x", nil), herr.New(herr.Malformed, "%s", long))
	require.Equal(t, strings.Repeat("é", 1024), raw(rec)["detail"], "cut on a character boundary")
	require.Equal(t, long, raw(rec)["message"], "message is whole")

	// A 422 on the durable-consumer API keeps the string.
	rec = httptest.NewRecorder()
	httpx.WriteError(rec, httptest.NewRequest("POST", "/v1/event-destinations/x/acknowledge", nil), herr.New(herr.InvalidArgument, "request body is larger than 5 bytes"))
	require.Equal(t, 422, rec.Code)
	require.Equal(t, "request body is larger than 5 bytes", raw(rec)["detail"])

	// On the notifications API it is a list naming the field.
	rec = httptest.NewRecorder()
	err := herr.InField(herr.InField(herr.New(herr.InvalidArgument, "event_type is required"), "event_type"), "body", "events", 3)
	httpx.WriteError(rec, httptest.NewRequest("POST", "/api/v1beta/events/batch", nil), err)
	require.Equal(t, 422, rec.Code)
	m := raw(rec)
	require.Equal(t, "event_type is required", m["message"])
	require.Equal(t, []any{map[string]any{
		"loc": []any{"body", "events", 3.0, "event_type"}, "msg": "event_type is required", "type": "missing",
	}}, m["detail"])

	// A field without its place is in the query of a GET or DELETE.
	rec = httptest.NewRecorder()
	httpx.WriteError(rec, httptest.NewRequest("DELETE", "/api/v1beta/queues/durable?queue_id=x%20y", nil), herr.InField(herr.New(herr.InvalidArgument, "bad queue_id"), "queue_id"))
	require.Equal(t, []any{map[string]any{"loc": []any{"query", "queue_id"}, "msg": "bad queue_id", "type": "value_error"}}, raw(rec)["detail"])

	// Without a named field the location is the body.
	rec = httptest.NewRecorder()
	httpx.WriteError(rec, httptest.NewRequest("POST", "/api/v1beta/queues/durable", nil), herr.New(herr.InvalidArgument, "bad queue"))
	require.Equal(t, []any{map[string]any{"loc": []any{"body"}, "msg": "bad queue", "type": "value_error"}}, raw(rec)["detail"])
}

// TestWriteErrorWindowFull checks the 429 of a full in-flight window.
func TestWriteErrorWindowFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{42 * time.Second, "42"},
		{1500 * time.Millisecond, "2"}, // rounded up: retrying early is pointless
		{0, "1"},                       // at least one second
	} {
		rec := httptest.NewRecorder()
		httpx.WriteError(rec, httptest.NewRequest("POST", "/pull", nil), &leasestore.WindowFullError{InFlight: 1000, RetryAfter: tc.after, Committed: 0, Dispatched: 1000})
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		require.Equal(t, tc.want, rec.Header().Get("Retry-After"), "retry after %v", tc.after)
		b := decodeError(t, rec)
		require.Equal(t, "resource_exhausted", b.Code)
		require.NotNil(t, b.InFlight)
		require.EqualValues(t, 1000, *b.InFlight)
		require.NotEmpty(t, b.Message)
		require.Equal(t, "001.00000000000000000000", *b.Committed, "the zero position before the first commit")
		require.Equal(t, "001.00000000000000001000", *b.Dispatched)
	}
}

// TestReadBodyAndDecodeJSON checks the size limit and the codes.
func TestReadBodyAndDecodeJSON(t *testing.T) {
	t.Parallel()
	req := func(body string) *http.Request { return httptest.NewRequest("POST", "/x", strings.NewReader(body)) }

	b, err := httpx.ReadBody(req("12345"), 5)
	require.NoError(t, err)
	require.Equal(t, "12345", string(b))
	_, err = httpx.ReadBody(req("123456"), 5)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))

	var v struct {
		N int `json:"n"`
	}
	require.NoError(t, httpx.DecodeJSON(req(`{"n": 3}`), 100, &v))
	require.Equal(t, 3, v.N)
	for _, bad := range []string{`{"n":`, `{"n": "x"}`, ``, `nope`} {
		err := httpx.DecodeJSON(req(bad), 100, &v)
		require.Equal(t, herr.Malformed, herr.CodeOf(err), "%q", bad)
		require.NotContains(t, herr.MessageOf(err), "nope", "the input is not quoted back")
	}
	err = httpx.DecodeJSON(req(`{"n": "x"}`), 100, &v)
	require.Contains(t, herr.MessageOf(err), "n must be a JSON integer")
	var obj struct {
		Inner struct{} `json:"inner"`
	}
	err = httpx.DecodeJSON(req(`{"inner": []}`), 100, &obj)
	require.Contains(t, herr.MessageOf(err), "inner must be a JSON object", "messages speak JSON, not Go types")

	// A field's own decoder that returns a coded error keeps its code and
	// message (an unknown filter_type is a 422 that says what is allowed).
	var fv struct {
		F filter.Type `json:"filter_type"`
	}
	err = httpx.DecodeJSON(req(`{"filter_type": "regex"}`), 100, &fv)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), "starts_with_greedy")
	err = httpx.DecodeJSON(req(`{"n": 1}`+strings.Repeat(" ", 200)), 100, &v)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "too large is checked before syntax")
}

// TestReadBodyKnownLength checks the path for a body whose length the
// request declares: refused unread when too long, read into one buffer.
// It is not parallel: AllocsPerRun refuses to run beside other tests.
func TestReadBodyKnownLength(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100<<10)
	rd := bytes.NewReader(body)
	req := httptest.NewRequest("POST", "/x", rd)
	require.EqualValues(t, len(body), req.ContentLength)
	allocs := testing.AllocsPerRun(20, func() {
		rd.Reset(body)
		b, err := httpx.ReadBody(req, 1<<20)
		if err != nil || len(b) != len(body) {
			t.Fatalf("ReadBody: %v, %d bytes", err, len(b))
		}
	})
	require.LessOrEqual(t, allocs, 1.0, "one buffer of the declared length")

	// Declared too long: refused before reading a byte.
	rd.Reset(body)
	_, err := httpx.ReadBody(req, int64(len(body)-1))
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Equal(t, int64(len(body)), int64(rd.Len()), "nothing was read")

	// Shorter than declared: the body is broken.
	short := httptest.NewRequest("POST", "/x", strings.NewReader("abc"))
	short.ContentLength = 10
	_, err = httpx.ReadBody(short, 100)
	require.Equal(t, herr.Malformed, herr.CodeOf(err))

	// Unknown length (chunked): read up to the limit.
	chunked := httptest.NewRequest("POST", "/x", strings.NewReader("abcdef"))
	chunked.ContentLength = -1
	b, err := httpx.ReadBody(chunked, 6)
	require.NoError(t, err)
	require.Equal(t, "abcdef", string(b))
	chunked = httptest.NewRequest("POST", "/x", strings.NewReader("abcdefg"))
	chunked.ContentLength = -1
	_, err = httpx.ReadBody(chunked, 6)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
}

// TestAuthenticate checks the bearer middleware.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	p := &auth.Principal{ID: "alice"}
	var seen *auth.Principal
	h := httpx.Authenticate(auth.StaticTokens{"s3cret": p}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		seen, err = httpx.Principal(r)
		require.NoError(t, err)
		w.WriteHeader(http.StatusTeapot)
	}))
	call := func(authorization string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/x", nil)
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}

	for _, ok := range []string{"Bearer s3cret", "bearer s3cret", "BEARER  s3cret "} {
		seen = nil
		rec := call(ok)
		require.Equal(t, http.StatusTeapot, rec.Code, "%q", ok)
		require.Same(t, p, seen)
	}
	for _, bad := range []string{"", "Bearer", "Bearer ", "s3cret", "Basic s3cret", "Bearer wrong-s3cret", "Bearer s3cret2"} {
		rec := call(bad)
		require.Equal(t, http.StatusUnauthorized, rec.Code, "%q", bad)
		require.Equal(t, "unauthenticated", decodeError(t, rec).Code)
		require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
		require.NotContains(t, rec.Body.String(), "s3cret", "%q", bad)
	}

	_, err := httpx.Principal(httptest.NewRequest("GET", "/", nil))
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err))
}

// TestWriteJSON checks the headers of a JSON answer, and that it ends in
// a newline (so that curl's output does not run into the next prompt)
// which Content-Length counts.
func TestWriteJSON(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	httpx.WriteJSON(rec, http.StatusCreated, map[string]int{"a": 1})
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, "8", rec.Header().Get("Content-Length"))
	require.Equal(t, "{\"a\":1}\n", rec.Body.String())

	rec = httptest.NewRecorder()
	httpx.WriteJSON(rec, http.StatusOK, func() {})
	require.Equal(t, http.StatusInternalServerError, rec.Code, "an unencodable value is a 500, not a panic")
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "and still the JSON error shape")
	require.Equal(t, "internal", decodeError(t, rec).Code)
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values []string
		token  string
		code   herr.Code
	}{
		{[]string{"Bearer abc"}, "abc", herr.Unknown},
		{[]string{"bearer  abc "}, "abc", herr.Unknown},
		{nil, "", herr.Unauthenticated},
		{[]string{"Basic abc"}, "", herr.Unauthenticated},
		{[]string{"Bearer "}, "", herr.Unauthenticated},
		{[]string{"Bearer abc", "Bearer abc"}, "", herr.Malformed},
		{[]string{"Bearer a\x00b"}, "", herr.Malformed},
		{[]string{"Bearer a b"}, "", herr.Malformed},
		{[]string{"Bearer a\u00e9"}, "", herr.Malformed},
	} {
		token, err := httpx.BearerToken(c.values)
		if c.code == herr.Unknown {
			require.NoError(t, err, "%q", c.values)
			require.Equal(t, c.token, token)
			continue
		}
		require.Equal(t, c.code, herr.CodeOf(err), "%q", c.values)
		require.NotContains(t, herr.MessageOf(err), "a\x00b")
	}
}

// TestAuthenticateTwoHeaders: two Authorization headers are a 400, not a
// guess at which one counts.
func TestAuthenticateTwoHeaders(t *testing.T) {
	t.Parallel()
	h := httpx.Authenticate(auth.StaticTokens{"tok-0123456789": {ID: "a"}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("Authorization", "Bearer tok-0123456789")
	r.Header.Add("Authorization", "Bearer other")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), "one Authorization header")
}

// FuzzBearerToken: any header value yields a visible-ASCII token or a
// coded error that does not quote it.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer\tabc", "Bearer \x00", "Basic x", "Bearer  a b ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		token, err := httpx.BearerToken([]string{v})
		if err != nil {
			require.Contains(t, []herr.Code{herr.Unauthenticated, herr.Malformed}, herr.CodeOf(err))
			return
		}
		require.NotEmpty(t, token)
		for i := 0; i < len(token); i++ {
			require.True(t, token[i] > 0x20 && token[i] < 0x7f, "%q", token)
		}
	})
}

// TestWriteErrorStreamOpensShed: a stream open refused under load is 503
// with its Retry-After in whole seconds, and counts as load shedding
// (not logged per request) like Admission's refusals; other 503s do not.
func TestWriteErrorStreamOpensShed(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest("GET", "/x", nil)
	err := &delivery.OpensShedError{RetryAfter: 2 * time.Second}
	rec := httptest.NewRecorder()
	httpx.WriteError(rec, req, err)
	require.Equal(t, 503, rec.Code)
	require.Equal(t, "2", rec.Header().Get("Retry-After"))
	b := decodeError(t, rec)
	require.Equal(t, "unavailable", b.Code)
	require.Contains(t, b.Message, "retry after 2 s")
	require.True(t, httpx.IsLoadShed(err))
	require.True(t, httpx.IsLoadShed(&httpx.OverloadedError{What: "publishes"}))
	require.False(t, httpx.IsLoadShed(herr.New(herr.Unavailable, "the broker is unavailable")))
}
