package local_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// objectOfSize returns a JSON object whose encoding is exactly n bytes
// (n ≥ 8): {"p":"aaa…"}. Plain letters survive any JSON re-encoding, so a
// delivered copy can be compared byte for byte.
func objectOfSize(n int) []byte {
	const overhead = len(`{"p":""}`)
	return []byte(`{"p":"` + strings.Repeat("a", n-overhead) + `"}`)
}

// TestPublishE2E covers the notifications API's publish endpoints over HTTP.
func TestPublishE2E(t *testing.T) {
	t.Parallel()

	t.Run("single event is accepted and echoed", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		r := c.expect(t, http.StatusOK, "POST", "/api/v1beta/events", map[string]any{"event": map[string]any{
			"event_type":  "myapp.user.created",
			"message":     map[string]any{"user_id": "123"},
			"occurred_at": "2024-10-16T14:30:00Z",
			"resource":    map[string]string{"resource_id": "/users/123"},
		}})
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var out struct {
			Result publishResult `json:"result"`
		}
		r.decode(t, &out)
		require.True(t, out.Result.Success)
		require.Empty(t, out.Result.FailureReason)
		require.NotNil(t, out.Result.Event)
		require.Equal(t, "myapp.user.created", out.Result.Event.EventType)
		require.JSONEq(t, `{"user_id":"123"}`, string(out.Result.Event.Message))
		require.Equal(t, "2024-10-16T14:30:00Z", out.Result.Event.OccurredAt)
		require.NotNil(t, out.Result.Event.Resource)
		require.Equal(t, "/users/123", out.Result.Event.Resource.ResourceID)
	})

	t.Run("missing occurred_at is echoed as the publish time", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		before := time.Now().Add(-time.Second)
		var out struct {
			Result publishResult `json:"result"`
		}
		c.expect(t, http.StatusOK, "POST", "/api/v1beta/events",
			map[string]any{"event": map[string]any{"event_type": "a.b"}}).decode(t, &out)
		require.True(t, out.Result.Success)
		at, err := time.Parse(time.RFC3339Nano, out.Result.Event.OccurredAt)
		require.NoError(t, err)
		require.True(t, at.After(before), "occurred_at %s", at)
	})

	t.Run("a chunked body of unknown length is read too", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		body := `{"event": {"event_type": "a.chunked", "message": {"k": 1}}}`
		// A reader that is not a *bytes.Reader or *strings.Reader leaves the
		// length unknown, so net/http sends the body chunked.
		req, err := http.NewRequest("POST", c.base+"/api/v1beta/events", io.MultiReader(strings.NewReader(body)))
		require.NoError(t, err)
		require.EqualValues(t, 0, req.ContentLength)
		req.Header.Set("Authorization", "Bearer "+c.token)
		res, err := c.hc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		var out struct {
			Result publishResult `json:"result"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		require.True(t, out.Result.Success)
		require.Equal(t, "a.chunked", out.Result.Event.EventType)
	})

	t.Run("batch events are accepted and echoed in order", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		res := c.publish(t, ev("a.one", "/x", map[string]int{"i": 1}), ev("a.two", "", map[string]int{"i": 2}))
		require.Equal(t, "a.one", res[0].Event.EventType)
		require.Equal(t, "a.two", res[1].Event.EventType)
		require.JSONEq(t, `{"i":2}`, string(res[1].Event.Message))
	})

	malformed := map[string]string{
		"truncated JSON":  `{"event": {"event_type": "a.b"`,
		"not JSON":        `event_type=a.b`,
		"array body":      `[]`,
		"wrong type":      `{"event": "a.b"}`,
		"numeric type":    `{"event": {"event_type": 123}}`,
		"trailing object": `{"event": {"event_type": "a.b"}} {}`,
	}
	for name, body := range malformed {
		t.Run("single malformed JSON is 400: "+name, func(t *testing.T) {
			t.Parallel()
			c := start(t)
			e := c.expectError(t, http.StatusBadRequest, "POST", "/api/v1beta/events", body)
			require.Equal(t, "malformed", e.Code)
		})
	}
	t.Run("batch malformed JSON is 400", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for _, body := range []string{`{"events": [`, `{"events": {}}`, `[1,2]`, `nope`} {
			e := c.expectError(t, http.StatusBadRequest, "POST", "/api/v1beta/events/batch", body)
			require.Equal(t, "malformed", e.Code, "body %s", body)
		}
	})

	over := objectOfSize(262145)
	invalid := map[string]any{
		"missing event":          map[string]any{},
		"null event":             map[string]any{"event": nil},
		"missing event_type":     map[string]any{"event": map[string]any{"message": map[string]any{}}},
		"empty event_type":       map[string]any{"event": map[string]any{"event_type": ""}},
		"event_type with space":  map[string]any{"event": map[string]any{"event_type": "my app"}},
		"event_type with slash":  map[string]any{"event": map[string]any{"event_type": "my/app"}},
		"event_type with emoji":  map[string]any{"event": map[string]any{"event_type": "app.🎉"}},
		"event_type 257 chars":   map[string]any{"event": map[string]any{"event_type": strings.Repeat("e", 257)}},
		"occurred_at no zone":    map[string]any{"event": map[string]any{"event_type": "a.b", "occurred_at": "2024-10-16T14:30:00"}},
		"occurred_at with space": map[string]any{"event": map[string]any{"event_type": "a.b", "occurred_at": "2024-10-16 14:30:00Z"}},
		"occurred_at words":      map[string]any{"event": map[string]any{"event_type": "a.b", "occurred_at": "yesterday"}},
		"message array":          map[string]any{"event": map[string]any{"event_type": "a.b", "message": []int{1}}},
		"message string":         map[string]any{"event": map[string]any{"event_type": "a.b", "message": "hello"}},
		"message number":         map[string]any{"event": map[string]any{"event_type": "a.b", "message": 42}},
		"message bool":           map[string]any{"event": map[string]any{"event_type": "a.b", "message": true}},
		"message over 256 KiB":   map[string]any{"event": map[string]any{"event_type": "a.b", "message": json.RawMessage(over)}},
	}
	for name, body := range invalid {
		t.Run("single invalid event is 422: "+name, func(t *testing.T) {
			t.Parallel()
			c := start(t)
			e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/events", body)
			require.Equal(t, "invalid_argument", e.Code)
			// detail is the notifications API's list of {loc, msg, type}.
			list, ok := e.Detail.([]any)
			require.True(t, ok, "detail %#v", e.Detail)
			require.Len(t, list, 1)
			loc := list[0].(map[string]any)["loc"].([]any)
			require.Equal(t, []any{"body", "event"}, loc[:2], "loc %v", loc)
		})
	}

	t.Run("event_type of exactly 256 chars, and any allowed character first, is accepted", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for _, et := range []string{strings.Repeat("e", 256), ".first", "-first", "_first"} {
			c.expect(t, http.StatusOK, "POST", "/api/v1beta/events",
				map[string]any{"event": map[string]any{"event_type": et}})
		}
	})

	t.Run("a 256 KiB message is accepted and delivered intact", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		msg := objectOfSize(262144)
		require.Len(t, msg, 262144)
		var out struct {
			Result publishResult `json:"result"`
		}
		c.expect(t, http.StatusOK, "POST", "/api/v1beta/events",
			map[string]any{"event": map[string]any{"event_type": "big.one", "message": json.RawMessage(msg)}}).decode(t, &out)
		require.True(t, out.Result.Success)
		l := c.pullLease(t, id)
		require.Len(t, l.Events, 1)
		got := l.heads(t)[0]
		require.Equal(t, "big.one", got.Type)
		require.True(t, bytes.Equal(msg, got.Data), "data differs: %d bytes delivered", len(got.Data))
	})

	t.Run("batch empty or missing events is 422", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for _, body := range []string{`{"events": []}`, `{}`, `{"events": null}`} {
			e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/events/batch", body)
			require.Equal(t, "invalid_argument", e.Code, "body %s", body)
		}
	})

	t.Run("batch of 1,001 is 422 naming events and publishes nothing", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/events/batch",
			map[string]any{"events": eventsOf("a.b", 1001)})
		require.Equal(t, []any{map[string]any{"loc": []any{"body", "events"}, "msg": e.Message, "type": "value_error"}}, e.Detail)
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status)
	})

	t.Run("batch of 1,000 is 200 and every event is published", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 1000)...)
		require.Len(t, c.drain(t, id), 1000)
	})

	t.Run("batch body over 5 MiB is 422", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		big := strings.Repeat("x", 200<<10)
		events := make([]map[string]any, 26) // 26 × 200 KiB > 5 MiB
		for i := range events {
			events[i] = map[string]any{"event_type": "a.b", "message": map[string]any{"pad": big}}
		}
		e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/events/batch", map[string]any{"events": events})
		require.Contains(t, e.Message, "5242880 bytes")
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status)
	})

	t.Run("batch mixing valid and invalid events fails only the invalid", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		body := `{"events": [
			{"event_type": "mix.ok", "message": {"k": 0}},
			{"event_type": 123, "message": {"k": 1}},
			{"message": {"k": 2}},
			{"event_type": "bad type!", "message": {"k": 3}},
			{"event_type": "mix.ok", "occurred_at": "soon", "message": {"k": 4}},
			{"event_type": "mix.ok", "message": [5]},
			"not an event",
			{"event_type": "mix.ok", "message": {"k": 7}, "resource": {"resource_id": "/r/7"}}
		]}`
		r := c.expect(t, http.StatusOK, "POST", "/api/v1beta/events/batch", body)
		var out struct {
			Results []publishResult `json:"results"`
		}
		r.decode(t, &out)
		require.Len(t, out.Results, 8)
		for i, res := range out.Results {
			if i == 0 || i == 7 {
				require.True(t, res.Success, "event %d: %s", i, res.FailureReason)
				require.Empty(t, res.FailureReason)
				continue
			}
			require.False(t, res.Success, "event %d", i)
			require.NotEmpty(t, res.FailureReason, "event %d", i)
		}
		// The raw JSON of a failed result says success:false explicitly.
		var rawOut struct {
			Results []map[string]json.RawMessage `json:"results"`
		}
		r.decode(t, &rawOut)
		require.Equal(t, "false", string(rawOut.Results[1]["success"]))

		// A batch is published in parallel (the notifications API), so the two may be
		// delivered in either order.
		got := map[string]string{}
		for _, e := range c.drain(t, id) {
			got[string(e.Data)] = e.Subject
		}
		require.Equal(t, map[string]string{`{"k":0}`: "", `{"k":7}`: "/r/7"}, got)
	})
}

// TestPublishEdgeValues covers values at the edge of the rules: timestamps
// whose UTC year leaves 0001–9999, and a null message echoed as {}.
func TestPublishEdgeValues(t *testing.T) {
	t.Parallel()
	c := start(t)
	for _, ts := range []string{"9999-12-31T23:59:59-23:59", "0000-06-01T00:00:00Z"} {
		e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/events",
			`{"event":{"event_type":"a.b","message":{},"occurred_at":"`+ts+`"}}`)
		require.Equal(t, "invalid_argument", e.Code, ts)
	}
	r := c.must(t, "POST", "/api/v1beta/events", `{"event":{"event_type":"a.b","message":null,"occurred_at":"9999-12-31T23:59:59Z"}}`)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), `"message":{}`)
}

// TestPublishControlCharacters: a REST publish whose event carries a
// control character gets a clean answer and nothing reaches a consumer.
// Escaped in the JSON (\u0001, \u0085) it breaks a publish rule: 422
// naming the field, as an HTTPValidationError. Raw in the body it is not
// JSON (RFC 8259 §7): 400 malformed. In a batch the event fails alone, in
// its result.
func TestPublishControlCharacters(t *testing.T) {
	t.Parallel()
	c := start(t)
	dest := c.create(t, nil)
	for name, tc := range map[string]struct {
		event string
		loc   []any
	}{
		"C0 in resource_id":  {`{"event_type":"a.b","resource":{"resource_id":"/x\u0001y"}}`, []any{"body", "event", "resource", "resource_id"}},
		"LF in resource_id":  {`{"event_type":"a.b","resource":{"resource_id":"/x\ny"}}`, []any{"body", "event", "resource", "resource_id"}},
		"DEL in resource_id": {`{"event_type":"a.b","resource":{"resource_id":"/x\u007fy"}}`, []any{"body", "event", "resource", "resource_id"}},
		"C1 in resource_id":  {`{"event_type":"a.b","resource":{"resource_id":"/x\u0085y"}}`, []any{"body", "event", "resource", "resource_id"}},
		"BEL in event_type":  {`{"event_type":"a.b\u0007"}`, []any{"body", "event", "event_type"}},
	} {
		e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/events", `{"event":`+tc.event+`}`)
		require.Equal(t, "invalid_argument", e.Code, name)
		detail, ok := e.Detail.([]any)
		require.True(t, ok, "%s: detail %v", name, e.Detail)
		require.Len(t, detail, 1, name)
		require.Equal(t, tc.loc, detail[0].(map[string]any)["loc"], name)

		r := c.must(t, "POST", "/api/v1beta/events/batch", `{"events":[`+tc.event+`]}`)
		require.Equal(t, http.StatusOK, r.Status, name)
		var out struct {
			Results []publishResult `json:"results"`
		}
		r.decode(t, &out)
		require.Len(t, out.Results, 1, name)
		require.False(t, out.Results[0].Success, name)
		require.NotEmpty(t, out.Results[0].FailureReason, name)
	}
	raw := "{\"event\":{\"event_type\":\"a.b\",\"resource\":{\"resource_id\":\"/x\x01y\"}}}"
	e := c.expectError(t, http.StatusBadRequest, "POST", "/api/v1beta/events", raw)
	require.Equal(t, "malformed", e.Code)
	require.NotContains(t, e.Message, "\x01", "the answer does not echo the control character")

	r, err := c.raw("POST", pullPath(dest, nil), c.token, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, r.Status, "no refused event reached the consumer: %s", r.Body)
}
