package local_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDestinationsE2E covers Herald's event-destination management and the
// 404s of every per-destination endpoint.
func TestDestinationsE2E(t *testing.T) {
	t.Parallel()

	t.Run("create, get, list, delete", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		groups := []map[string]any{{"event_type": "a.b", "filters": []map[string]string{{"filter_type": "starts_with_greedy", "resource_id": "/x/"}}}}
		r := c.expect(t, http.StatusCreated, "POST", "/v1/event-destinations",
			map[string]any{"type": "DURABLE_CONSUMER", "filter_groups": groups})
		var d destination
		r.decode(t, &d)
		require.NotEmpty(t, d.ID)
		require.Equal(t, "/v1/event-destinations/"+d.ID, r.Header.Get("Location"))
		require.Equal(t, "DURABLE_CONSUMER", d.Type)
		require.False(t, d.Paused)
		require.Equal(t, zeroSequence, d.Committed)
		require.Zero(t, d.InFlight)
		require.JSONEq(t, `[{"event_type":"a.b","filters":[{"filter_type":"starts_with_greedy","resource_id":"/x/"}]}]`, string(d.FilterGroups))

		other := c.create(t, nil)

		got := c.getDest(t, d.ID)
		require.Equal(t, d.ID, got.ID)
		require.JSONEq(t, string(d.FilterGroups), string(got.FilterGroups))
		// No groups read back as an empty list, never null.
		require.JSONEq(t, `[]`, string(c.getDest(t, other).FilterGroups))

		var list struct {
			Destinations []destination `json:"destinations"`
		}
		c.expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil).decode(t, &list)
		var ids []string
		for _, x := range list.Destinations {
			ids = append(ids, x.ID)
		}
		want := []string{d.ID, other}
		sort.Strings(ids)
		sort.Strings(want)
		require.Equal(t, want, ids)

		r = c.expect(t, http.StatusNoContent, "DELETE", "/v1/event-destinations/"+d.ID, nil)
		require.Empty(t, r.Body)
		c.expectError(t, http.StatusNotFound, "GET", "/v1/event-destinations/"+d.ID, nil)
		c.expectError(t, http.StatusNotFound, "DELETE", "/v1/event-destinations/"+d.ID, nil)
		c.expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil).decode(t, &list)
		require.Len(t, list.Destinations, 1)
		require.Equal(t, other, list.Destinations[0].ID)
	})

	t.Run("pause and resume", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, ev("a.b", "", map[string]int{"n": 1}))

		var d destination
		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/pause", nil).decode(t, &d)
		require.True(t, d.Paused)
		require.True(t, c.getDest(t, id).Paused)
		e := c.expectError(t, http.StatusConflict, "POST", pullPath(id, nil), nil)
		require.Equal(t, "failed_precondition", e.Code)
		// Pausing twice is harmless.
		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/pause", nil)

		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/resume", nil).decode(t, &d)
		require.False(t, d.Paused)
		l := c.pullLease(t, id)
		require.Len(t, l.Events, 1)
	})

	t.Run("unknown or missing type is 400", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for _, body := range []any{
			map[string]any{"type": "WEBHOOK"},
			map[string]any{"type": "durable_consumer"},
			map[string]any{},
		} {
			e := c.expectError(t, http.StatusBadRequest, "POST", "/v1/event-destinations", body)
			require.Equal(t, "malformed", e.Code)
		}
		c.expectError(t, http.StatusBadRequest, "POST", "/v1/event-destinations", `{"type":`)
	})

	t.Run("invalid filter groups are 422", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for name, groups := range map[string]string{
			"eq with empty resource_id":          `[{"event_type":"a.b","filters":[{"filter_type":"eq","resource_id":""}]}]`,
			"unspecified with empty resource_id": `[{"event_type":"a.b","filters":[{"resource_id":""}]}]`,
			"bad event_type":                     `[{"event_type":"a b","filters":[]}]`,
			"missing event_type":                 `[{"filters":[]}]`,
		} {
			e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/v1/event-destinations",
				`{"type":"DURABLE_CONSUMER","filter_groups":`+groups+`}`)
			require.Equal(t, "invalid_argument", e.Code, name)
		}
		// An unknown filter_type is an invalid filter group too: 422, with
		// a message naming the allowed types.
		e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/v1/event-destinations",
			`{"type":"DURABLE_CONSUMER","filter_groups":[{"event_type":"a.b","filters":[{"filter_type":"regex","resource_id":"x"}]}]}`)
		require.Contains(t, e.Message, "starts_with_lazy")
	})

	t.Run("unknown id is 404 everywhere", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		const missing = "/v1/event-destinations/no-such-destination"
		for _, tc := range []struct {
			method, path string
			body         any
		}{
			{"GET", missing, nil},
			{"DELETE", missing, nil},
			{"POST", missing + "/pause", nil},
			{"POST", missing + "/resume", nil},
			{"POST", missing + "/pull", nil},
			{"POST", missing + "/acknowledge", map[string]any{"leaseId": "x", "generation": 0, "status": "ok"}},
		} {
			e := c.expectError(t, http.StatusNotFound, tc.method, tc.path, tc.body)
			require.Equal(t, "not_found", e.Code, "%s %s", tc.method, tc.path)
		}
	})
}

// TestFilterGroupsE2E publishes one set of events and checks, per filter
// type, which of them a destination receives (package filter has the
// rules; this proves the handler stack applies them).
func TestFilterGroupsE2E(t *testing.T) {
	t.Parallel()
	resources := []string{"", "/users", "/users/", "/users/7", "/users/7/", "/users/7/photos", "/users/7/photos/1", "/usersx/1", "/other/7"}

	cases := []struct {
		name   string
		groups string // JSON; "" sends no filter_groups at all
		want   []string
	}{
		{"no groups: every event", ``, []string{
			"a:", "a:/users", "a:/users/", "a:/users/7", "a:/users/7/", "a:/users/7/photos", "a:/users/7/photos/1", "a:/usersx/1", "a:/other/7",
			"b:", "b:/users", "b:/users/", "b:/users/7", "b:/users/7/", "b:/users/7/photos", "b:/users/7/photos/1", "b:/usersx/1", "b:/other/7",
		}},
		{"empty groups: every event", `[]`, nil}, // filled below from the first case
		{"no filters: every event of the type", `[{"event_type":"a","filters":[]}]`, []string{
			"a:", "a:/users", "a:/users/", "a:/users/7", "a:/users/7/", "a:/users/7/photos", "a:/users/7/photos/1", "a:/usersx/1", "a:/other/7",
		}},
		{"eq", `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"/users/7"}]}]`, []string{"a:/users/7"}},
		{"unspecified is eq", `[{"event_type":"a","filters":[{"filter_type":"unspecified","resource_id":"/users/7"}]}]`, []string{"a:/users/7"}},
		{"missing filter_type is eq", `[{"event_type":"a","filters":[{"resource_id":"/users/7"}]}]`, []string{"a:/users/7"}},
		{"proto enum name", `[{"event_type":"a","filters":[{"filter_type":"FILTER_TYPE_EQ","resource_id":"/users/7"}]}]`, []string{"a:/users/7"}},
		{"starts_with_greedy is deep", `[{"event_type":"a","filters":[{"filter_type":"starts_with_greedy","resource_id":"/users/"}]}]`, []string{
			"a:/users/", "a:/users/7", "a:/users/7/", "a:/users/7/photos", "a:/users/7/photos/1",
		}},
		{"starts_with_lazy is shallow", `[{"event_type":"a","filters":[{"filter_type":"starts_with_lazy","resource_id":"/users/"}]}]`, []string{
			"a:/users/", "a:/users/7", "a:/users/7/",
		}},
		{"starts_with_lazy without trailing slash", `[{"event_type":"a","filters":[{"filter_type":"starts_with_lazy","resource_id":"/users"}]}]`, []string{
			"a:/users", "a:/users/", "a:/users/7", "a:/users/7/",
		}},
		{"any filter of a group, any group", `[
			{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"/other/7"},{"filter_type":"eq","resource_id":"/usersx/1"}]},
			{"event_type":"b","filters":[{"filter_type":"starts_with_greedy","resource_id":"/users/7/photos"}]}]`, []string{
			"a:/usersx/1", "a:/other/7", "b:/users/7/photos", "b:/users/7/photos/1",
		}},
		{"other type only", `[{"event_type":"c","filters":[]}]`, []string{}},
	}
	cases[1].want = cases[0].want

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := start(t)
			var groups any
			if tc.groups != "" {
				groups = json.RawMessage(tc.groups)
			}
			id := c.create(t, groups)
			var events []map[string]any
			for _, typ := range []string{"a", "b"} {
				for _, res := range resources {
					events = append(events, ev(typ, res, map[string]string{"k": typ + ":" + res}))
				}
			}
			c.publish(t, events...)
			got := []string{}
			for _, e := range c.drain(t, id) {
				var m map[string]string
				require.NoError(t, json.Unmarshal(e.Data, &m))
				got = append(got, m["k"])
			}
			want := append([]string{}, tc.want...)
			sort.Strings(got)
			sort.Strings(want)
			require.Equal(t, want, got)
		})
	}
}
