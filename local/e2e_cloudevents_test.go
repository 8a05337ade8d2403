package local_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/require"
)

// TestCloudEventsE2E checks that pulled events are CloudEvents 1.0 in
// structured JSON mode, with Herald's attribute mapping (package
// cloudevent), both through the SDK and by their raw keys.
func TestCloudEventsE2E(t *testing.T) {
	t.Parallel()
	c := start(t)
	id := c.create(t, nil)

	var pub struct {
		Result publishResult `json:"result"`
	}
	c.expect(t, http.StatusOK, "POST", "/api/v1beta/events", map[string]any{"event": map[string]any{
		"event_type":  "myapp.user.created",
		"message":     map[string]any{"user_id": "123", "tags": []string{"a", "b"}},
		"occurred_at": "2024-10-16T14:30:00.25Z",
		"resource":    map[string]string{"resource_id": "/users/123"},
	}}).decode(t, &pub)
	require.True(t, pub.Result.Success)
	// An event without a resource has no subject at all.
	c.expect(t, http.StatusOK, "POST", "/api/v1beta/events", map[string]any{"event": map[string]any{
		"event_type": "myapp.ping",
	}})

	l := c.pullLease(t, id, "limit", "10")
	require.Len(t, l.Events, 2)

	t.Run("SDK decodes a valid CloudEvent with the mapped attributes", func(t *testing.T) {
		var e cloudevents.Event
		require.NoError(t, json.Unmarshal(l.Events[0], &e))
		require.NoError(t, e.Validate())
		require.Equal(t, "1.0", e.SpecVersion())
		require.NotEmpty(t, e.ID())
		require.Equal(t, "myapp.user.created", e.Type())
		require.NotEmpty(t, e.Source())
		require.Equal(t, "/users/123", e.Subject())
		require.True(t, e.Time().Equal(time.Date(2024, 10, 16, 14, 30, 0, 250_000_000, time.UTC)), "time %s", e.Time())
		require.Equal(t, "application/json", e.DataContentType())
		require.JSONEq(t, `{"user_id":"123","tags":["a","b"]}`, string(e.Data()))

		ext := e.Extensions()
		require.Equal(t, "001.00000000000000000001", ext["sequence"])
		require.Equal(t, "herald:dev", ext["principalidentity"])
		publishedAt, ok := ext["publishedat"].(string)
		require.True(t, ok, "publishedat is %T", ext["publishedat"])
		at, err := time.Parse(time.RFC3339Nano, publishedAt)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), at, time.Hour)
	})

	t.Run("raw JSON has the structured-mode keys", func(t *testing.T) {
		var raw map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(l.Events[0], &raw))
		str := func(k string) string {
			t.Helper()
			var s string
			require.Contains(t, raw, k)
			require.NoError(t, json.Unmarshal(raw[k], &s), "key %s = %s", k, raw[k])
			return s
		}
		require.Equal(t, "1.0", str("specversion"))
		require.NotEmpty(t, str("id"))
		require.NotEmpty(t, str("source"))
		require.Equal(t, "myapp.user.created", str("type"))
		require.Equal(t, "/users/123", str("subject"))
		require.Equal(t, "001.00000000000000000001", str("sequence"))
		require.Equal(t, "herald:dev", str("principalidentity"))
		require.NotEmpty(t, str("publishedat"))
		tm, err := time.Parse(time.RFC3339Nano, str("time"))
		require.NoError(t, err)
		require.True(t, tm.Equal(time.Date(2024, 10, 16, 14, 30, 0, 250_000_000, time.UTC)))
		// data is the message itself, not a string or base64.
		require.JSONEq(t, `{"user_id":"123","tags":["a","b"]}`, string(raw["data"]))
		require.NotContains(t, raw, "data_base64")
	})

	t.Run("ids are unique, sequences follow delivery order, no resource means no subject", func(t *testing.T) {
		var a, b cloudevents.Event
		require.NoError(t, json.Unmarshal(l.Events[0], &a))
		require.NoError(t, json.Unmarshal(l.Events[1], &b))
		require.NotEqual(t, a.ID(), b.ID())
		require.Equal(t, "myapp.ping", b.Type())
		require.Equal(t, "001.00000000000000000002", b.Extensions()["sequence"])
		require.Less(t, a.Extensions()["sequence"].(string), b.Extensions()["sequence"].(string))
		var raw map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(l.Events[1], &raw))
		require.NotContains(t, raw, "subject")
		require.JSONEq(t, `{}`, string(raw["data"]))
	})
}
