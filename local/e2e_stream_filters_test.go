package local_test

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamFilterSemanticsE2E runs the notifications API's filter semantics over SSE:
// one fresh non-durable stream per case, every combination of two event
// types and a set of resource ids (the empty one included) published, and
// exactly the expected ones delivered. A final marker event, selected by
// an extra group, says that everything published before it has been seen.
func TestStreamFilterSemanticsE2E(t *testing.T) {
	t.Parallel()
	resources := []string{"", "/users", "/users/", "/users/7", "/users/7/", "/users/7/photos", "/usersx/1", "a", "/other/7"}
	all := func(typ string) []string {
		out := make([]string, len(resources))
		for i, r := range resources {
			out[i] = typ + ":" + r
		}
		return out
	}
	cases := []struct {
		name   string
		groups string // JSON array; "" sends no filter_groups
		want   []string
	}{
		{"no filter_groups: every event", ``, append(all("a"), all("b")...)},
		{"empty filter_groups: every event", `[]`, append(all("a"), all("b")...)},
		{"a group without filters: every event of its type, empty resource id included", `[{"event_type":"a"}]`, all("a")},
		{"eq matches exactly", `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"/users/7"}]}]`, []string{"a:/users/7"}},
		{"unspecified is eq", `[{"event_type":"b","filters":[{"filter_type":"unspecified","resource_id":"a"}]}]`, []string{"b:a"}},
		{"starts_with_greedy is deep and never matches the empty id", `[{"event_type":"a","filters":[{"filter_type":"starts_with_greedy","resource_id":"/users/"}]}]`,
			[]string{"a:/users/", "a:/users/7", "a:/users/7/", "a:/users/7/photos"}},
		{"starts_with_greedy \"\" matches every id, the empty one too", `[{"event_type":"a","filters":[{"filter_type":"starts_with_greedy","resource_id":""}]}]`, all("a")},
		{"starts_with_lazy is shallow", `[{"event_type":"a","filters":[{"filter_type":"starts_with_lazy","resource_id":"/users/"}]}]`,
			[]string{"a:/users/", "a:/users/7", "a:/users/7/"}},
		{"starts_with_lazy \"\" matches the empty id and one-segment ids", `[{"event_type":"b","filters":[{"filter_type":"starts_with_lazy","resource_id":""}]}]`,
			[]string{"b:", "b:/users", "b:/users/", "b:a"}},
		{"any filter of any group", `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"/other/7"},{"filter_type":"starts_with_lazy","resource_id":"/usersx"}]},{"event_type":"b","filters":[{"filter_type":"FILTER_TYPE_STARTS_WITH_GREEDY","resource_id":"/users/7/"}]}]`,
			[]string{"a:/other/7", "a:/usersx/1", "b:/users/7/", "b:/users/7/photos"}},
		{"a type nobody publishes", `[{"event_type":"c"}]`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := start(t)
			path := streamPath()
			if tc.groups != "" {
				gs := []json.RawMessage{}
				require.NoError(t, json.Unmarshal([]byte(tc.groups), &gs))
				if len(gs) > 0 { // [] already passes everything, the marker too
					gs = append(gs, json.RawMessage(`{"event_type":"zz.end"}`))
				}
				path = streamPath("filter_groups", groupsJSON(t, gs))
			}
			s := c.mustStream(t, path, nil)
			s.connected(t)
			var events []map[string]any
			for _, typ := range []string{"a", "b"} {
				for _, res := range resources {
					events = append(events, ev(typ, res, map[string]string{"k": typ + ":" + res}))
				}
			}
			c.publish(t, events...)
			c.publish(t, ev("zz.end", "", map[string]string{"k": "end"}))
			got := []string{}
			for {
				e := s.event(t)
				var m map[string]string
				require.NoError(t, json.Unmarshal(e.Message, &m))
				if m["k"] == "end" {
					break
				}
				got = append(got, m["k"])
			}
			want := append([]string{}, tc.want...)
			sort.Strings(got)
			sort.Strings(want)
			require.Equal(t, want, got)
		})
	}
}
