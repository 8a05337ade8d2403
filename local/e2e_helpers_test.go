package local_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// The end-to-end tests talk to a real local.Start instance over loopback
// HTTP, so they exercise routing, authentication, JSON shapes and status
// codes exactly as a client sees them. Every test that pulls starts its own
// instance: a destination receives every event published after it exists,
// so sharing one instance between parallel subtests would leak events.

// client is a minimal Herald REST client for tests. Its methods return
// errors rather than failing the test so that goroutines may use them.
type client struct {
	base  string
	token string
	hc    *http.Client
}

// response is an HTTP answer read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// start runs a fresh Herald and returns a client holding its token.
func start(t testing.TB, opts ...local.Option) *client {
	t.Helper()
	h := local.Start(t, opts...)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{base: h.URL, token: h.Token, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// raw sends body (nil for none) with the given bearer token ("" for no
// Authorization header).
func (c *client) raw(method, path, token string, body []byte) (*response, error) {
	authorization := ""
	if token != "" {
		authorization = "Bearer " + token
	}
	return c.rawWithHeader(method, path, authorization, body)
}

// rawWithHeader sends body (nil for none) with authorization as the
// Authorization header, verbatim ("" for none).
func (c *client) rawWithHeader(method, path, authorization string, body []byte) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// call sends v (marshalled unless it is a []byte or string) with the
// client's token.
func (c *client) call(method, path string, v any) (*response, error) {
	var body []byte
	switch v := v.(type) {
	case nil:
	case []byte:
		body = v
	case string:
		body = []byte(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		body = b
	}
	return c.raw(method, path, c.token, body)
}

// must is call for the test goroutine: a transport error fails the test.
func (c *client) must(t testing.TB, method, path string, v any) *response {
	t.Helper()
	r, err := c.call(method, path, v)
	require.NoError(t, err, "%s %s", method, path)
	return r
}

// expect is must plus a status check that prints the body on mismatch.
func (c *client) expect(t testing.TB, status int, method, path string, v any) *response {
	t.Helper()
	r := c.must(t, method, path, v)
	require.Equal(t, status, r.Status, "%s %s: body %s", method, path, r.Body)
	return r
}

// decode unmarshals the body into v and fails the test if it cannot.
func (r *response) decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
}

// errorBody is the JSON shape of every error response (functions/httpx).
type errorBody struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	Detail     any    `json:"detail"`
	InFlight   *int64 `json:"in_flight"`
	Committed  string `json:"committed"`
	Dispatched string `json:"dispatched"`
}

// expectError checks status, the JSON content type and a non-empty error
// body, and returns the body.
func (c *client) expectError(t testing.TB, status int, method, path string, v any) errorBody {
	t.Helper()
	r := c.expect(t, status, method, path, v)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var e errorBody
	r.decode(t, &e)
	require.NotEmpty(t, e.Code, "error body %s", r.Body)
	require.NotEmpty(t, e.Message, "error body %s", r.Body)
	return e
}

// wireEvent is the notifications API's REST event shape, as echoed in results.
type wireEvent struct {
	EventType  string          `json:"event_type"`
	Message    json.RawMessage `json:"message"`
	OccurredAt string          `json:"occurred_at"`
	Resource   *struct {
		ResourceID string `json:"resource_id"`
	} `json:"resource"`
}

// publishResult is the notifications API's PublishingResult.
type publishResult struct {
	Event         *wireEvent `json:"event"`
	Success       bool       `json:"success"`
	FailureReason string     `json:"failure_reason"`
}

// ev builds a publishable event.
func ev(eventType, resourceID string, message any) map[string]any {
	e := map[string]any{"event_type": eventType, "message": message}
	if resourceID != "" {
		e["resource"] = map[string]string{"resource_id": resourceID}
	}
	return e
}

// publish publishes events in one batch and requires every one to succeed.
func (c *client) publish(t testing.TB, events ...map[string]any) []publishResult {
	t.Helper()
	r := c.expect(t, http.StatusOK, "POST", "/api/v1beta/events/batch", map[string]any{"events": events})
	var out struct {
		Results []publishResult `json:"results"`
	}
	r.decode(t, &out)
	require.Len(t, out.Results, len(events))
	for i, res := range out.Results {
		require.True(t, res.Success, "event %d: %s", i, res.FailureReason)
	}
	return out.Results
}

// destination is the REST shape of an event destination.
type destination struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	FilterGroups json.RawMessage `json:"filter_groups"`
	Paused       bool            `json:"paused"`
	CreatedAt    time.Time       `json:"created_at"`
	Committed    string          `json:"committed"`
	InFlight     int64           `json:"in_flight"`
}

// create makes a durable consumer with groups (nil for none) and returns
// its id.
func (c *client) create(t testing.TB, groups any) string {
	t.Helper()
	body := map[string]any{"type": "DURABLE_CONSUMER"}
	if groups != nil {
		body["filter_groups"] = groups
	}
	r := c.expect(t, http.StatusCreated, "POST", "/v1/event-destinations", body)
	var d destination
	r.decode(t, &d)
	require.NotEmpty(t, d.ID)
	return d.ID
}

// getDest fetches a destination, requiring 200.
func (c *client) getDest(t testing.TB, id string) destination {
	t.Helper()
	var d destination
	c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id, nil).decode(t, &d)
	return d
}

// lease is the durable-consumer API's 200 pull response.
type lease struct {
	LeaseID    string            `json:"leaseId"`
	Generation int64             `json:"generation"`
	Attempt    int64             `json:"attempt"`
	ExpiresAt  time.Time         `json:"expiresAt"`
	Events     []json.RawMessage `json:"events"`
}

// ceHead is the part of a delivered CloudEvent the tests compare.
type ceHead struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Subject  string          `json:"subject"`
	Sequence string          `json:"sequence"`
	Data     json.RawMessage `json:"data"`
}

// heads decodes the events of l.
func (l *lease) heads(t testing.TB) []ceHead {
	t.Helper()
	out := make([]ceHead, len(l.Events))
	for i, e := range l.Events {
		require.NoError(t, json.Unmarshal(e, &out[i]))
	}
	return out
}

// pullPath builds a pull URL with the given query (may be nil).
func pullPath(id string, q url.Values) string {
	p := "/v1/event-destinations/" + id + "/pull"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// pull pulls with query parameters given as key, value pairs and returns
// the raw response.
func (c *client) pull(t testing.TB, id string, kv ...string) *response {
	t.Helper()
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return c.must(t, "POST", pullPath(id, q), nil)
}

// pullLease pulls and requires a 200 lease.
func (c *client) pullLease(t testing.TB, id string, kv ...string) lease {
	t.Helper()
	r := c.pull(t, id, kv...)
	require.Equal(t, http.StatusOK, r.Status, "pull body %s", r.Body)
	var l lease
	r.decode(t, &l)
	require.NotEmpty(t, l.LeaseID)
	require.NotEmpty(t, l.Events)
	return l
}

// ackResult is the acknowledge answer.
type ackResult struct {
	Status    string `json:"status"`
	Committed string `json:"committed"`
}

// ack acknowledges a lease and requires 200.
func (c *client) ack(t testing.TB, id, leaseID string, generation int64, status string) ackResult {
	t.Helper()
	var a ackResult
	c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/acknowledge",
		map[string]any{"leaseId": leaseID, "generation": generation, "status": status}).decode(t, &a)
	return a
}

// zeroSequence is the committed cursor before the first commit.
const zeroSequence = "001.00000000000000000000"

// drain pulls (worker "drain", limit 100) and acknowledges ok until the
// destination answers 204, returning the delivered events in order.
func (c *client) drain(t testing.TB, id string) []ceHead {
	t.Helper()
	var out []ceHead
	for {
		r := c.pull(t, id, "limit", "100", "workerId", "drain")
		if r.Status == http.StatusNoContent {
			return out
		}
		require.Equal(t, http.StatusOK, r.Status, "pull body %s", r.Body)
		var l lease
		r.decode(t, &l)
		out = append(out, l.heads(t)...)
		require.Equal(t, "committed", c.ack(t, id, l.LeaseID, l.Generation, "ok").Status)
	}
}

// newClock returns a controllable time source for local.WithClock. It
// starts at the real time so that stamps look ordinary, and moves only
// when told.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Now().UTC().Truncate(time.Millisecond))
}

// eventsOf returns n events of eventType, resource ids /items/0…, each
// message {"n": i}.
func eventsOf(eventType string, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = ev(eventType, fmt.Sprintf("/items/%d", i), map[string]any{"n": i})
	}
	return out
}

// containsNone fails the test if body contains any of secrets.
func containsNone(t testing.TB, body []byte, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.False(t, strings.Contains(string(body), s), "body %s leaks %q", body, s)
	}
}
