package awssnssqs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/pubsubx"
)

func eq(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.Eq, ResourceID: id}
}
func greedy(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithGreedy, ResourceID: id}
}
func lazy(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithLazy, ResourceID: id}
}
func grp(eventType string, fs ...filter.ResourceFilter) filter.Group {
	return filter.Group{EventType: eventType, Filters: fs}
}

// TestFilterPolicies pins the policies built for typical groups, most
// exact first; every list ends with "" (no policy).
func TestFilterPolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups filter.Groups
		want   []string
	}{
		{"no groups: no policy", nil, []string{""}},
		{"type only", filter.Groups{grp("a")},
			[]string{`{"event_type":["a"]}`, ""}},
		{"eq", filter.Groups{grp("a", eq("/users/7"))},
			[]string{`{"event_type":["a"],"resource_id":["/users/7"]}`, ""}},
		{"unspecified is eq", filter.Groups{grp("a", filter.ResourceFilter{ResourceID: "/u"})},
			[]string{`{"event_type":["a"],"resource_id":["/u"]}`, ""}},
		{"greedy", filter.Groups{grp("a", greedy("/users/"))},
			[]string{`{"event_type":["a"],"resource_id":[{"prefix":"/users/"}]}`, ""}},
		{"lazy as its deep prefix", filter.Groups{grp("a", lazy("/users/"))},
			[]string{`{"event_type":["a"],"resource_id":[{"prefix":"/users/"}]}`, ""}},
		{"greedy empty: no resource condition", filter.Groups{grp("a", greedy(""))},
			[]string{`{"event_type":["a"]}`, ""}},
		{"lazy empty: no resource condition", filter.Groups{grp("a", lazy(""), eq("/x"))},
			[]string{`{"event_type":["a"]}`, ""}},
		{"prefix covers eq and longer prefix", filter.Groups{grp("a", eq("/u/1"), greedy("/u/"), lazy("/u/2/"), eq("/v"))},
			[]string{`{"event_type":["a"],"resource_id":[{"prefix":"/u/"},"/v"]}`, ""}},
		{"quote or backslash not pushed down", filter.Groups{grp("a", eq(`/x"y`)), grp("b", greedy(`/p\`))},
			[]string{`{"event_type":["a","b"]}`, ""}},
		{"same type merged", filter.Groups{grp("a", eq("/1")), grp("a", eq("/2"))},
			[]string{`{"event_type":["a"],"resource_id":["/1","/2"]}`, ""}},
		{"same type, one unrestricted", filter.Groups{grp("a", eq("/1")), grp("a")},
			[]string{`{"event_type":["a"]}`, ""}},
		{"two types, same values share a branch", filter.Groups{grp("a", eq("/1")), grp("b", eq("/1"))},
			[]string{`{"event_type":["a","b"],"resource_id":["/1"]}`, ""}},
		{"two conditions: $or, then flat", filter.Groups{grp("a", eq("/1")), grp("b", greedy("/p/"))},
			[]string{
				`{"$or":[{"event_type":["a"],"resource_id":["/1"]},{"event_type":["b"],"resource_id":[{"prefix":"/p/"}]}]}`,
				`{"event_type":["a","b"],"resource_id":[{"prefix":"/p/"},"/1"]}`,
				"",
			}},
		{"unrestricted and restricted: $or, then types only", filter.Groups{grp("a", eq("/1")), grp("b")},
			[]string{
				`{"$or":[{"event_type":["a"],"resource_id":["/1"]},{"event_type":["b"]}]}`,
				`{"event_type":["a","b"]}`,
				"",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.groups.Validate("groups"), "fixture groups must be valid")
			require.Equal(t, tc.want, filterPolicies(tc.groups))
		})
	}
}

// TestFilterPoliciesTooComplex: past 150 combinations the exact policy is
// skipped, and the flat one drops resource_id when it is too complex too.
func TestFilterPoliciesTooComplex(t *testing.T) {
	var groups filter.Groups
	for i := range filter.MaxGroups {
		g := grp(fmt.Sprintf("t%02d", i))
		for j := range filter.MaxFiltersPerGroup {
			g.Filters = append(g.Filters, eq(fmt.Sprintf("/r/%02d/%02d", i, j)))
		}
		groups = append(groups, g)
	}
	require.NoError(t, groups.Validate("groups"))
	ps := filterPolicies(groups)
	require.Len(t, ps, 2, "20×20 values: no exact policy, a types-only flat one, then none")
	require.NotContains(t, ps[0], "resource_id")
	require.Equal(t, 20, strings.Count(ps[0], `"t`), "every type is kept")
	require.Equal(t, "", ps[1])
}

// TestFilterPoliciesNeverDropMatches runs every candidate policy, under
// SNS's attribute-matching rules, over a corpus of events and group sets:
// a policy must pass every event filter.Match passes, stay within SNS's
// limits, and the exact one must be exact when only eq and greedy filters
// of pushable ids are involved.
func TestFilterPoliciesNeverDropMatches(t *testing.T) {
	ids := []string{"", "/", "/a", "/a/", "/a/b", "/ab", "a", "a/b", "/users/7", "/users/7/", "/users/7/photos",
		"/users", "/users/", "/usersx/1", "/ü/路", `/q"x`, `/b\s`}
	types := []string{"a", "a.b", "b", "c"}
	var filters []filter.ResourceFilter
	for _, id := range ids {
		filters = append(filters, greedy(id), lazy(id))
		if id != "" {
			filters = append(filters, eq(id))
		}
	}
	// Group sets: each filter alone, pairs of groups, and mixes with
	// unrestricted groups, over several types.
	var sets []filter.Groups
	for i, f := range filters {
		sets = append(sets, filter.Groups{grp(types[i%len(types)], f)})
		g := filters[(i*7+3)%len(filters)]
		sets = append(sets, filter.Groups{grp(types[i%len(types)], f), grp(types[(i+1)%len(types)], g)})
		sets = append(sets, filter.Groups{grp(types[i%len(types)], f, g), grp(types[(i+2)%len(types)])})
	}
	for _, groups := range sets {
		require.NoError(t, groups.Validate("groups"))
		ps := filterPolicies(groups)
		require.Equal(t, "", ps[len(ps)-1], "the last candidate is no policy")
		for _, p := range ps {
			if p != "" {
				checkLimits(t, p)
			}
			for _, et := range types {
				for _, id := range ids {
					if groups.Match(et, id) {
						require.True(t, evalPolicy(t, p, et, id), "policy %s drops %s %q matched by %+v", p, et, id, groups)
					}
				}
			}
		}
		if exactExpected(groups) {
			for _, et := range types {
				for _, id := range ids {
					require.Equal(t, groups.Match(et, id), evalPolicy(t, ps[0], et, id), "exact policy %s on %s %q for %+v", ps[0], et, id, groups)
				}
			}
		}
	}
}

// exactExpected: groups without lazy filters or unpushable ids can be
// expressed exactly.
func exactExpected(groups filter.Groups) bool {
	for _, g := range groups {
		for _, f := range g.Filters {
			if f.FilterType == filter.StartsWithLazy || unpushable(f.ResourceID) {
				return false
			}
		}
	}
	return true
}

// checkLimits requires p to be within SNS's documented limits: at most 5
// keys, 150 combinations (summed over "$or" branches) and 256 KB.
func checkLimits(t *testing.T, p string) {
	t.Helper()
	require.LessOrEqual(t, len(p), maxPolicyBytes)
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(p), &top))
	branches := []map[string]json.RawMessage{top}
	if or, ok := top["$or"]; ok {
		require.Len(t, top, 1)
		require.NoError(t, json.Unmarshal(or, &branches))
		require.Greater(t, len(branches), 1, "an $or needs two branches or more")
	}
	total := 0
	for _, br := range branches {
		require.LessOrEqual(t, len(br), 5)
		n := 1
		for _, raw := range br {
			var vals []json.RawMessage
			require.NoError(t, json.Unmarshal(raw, &vals))
			n *= len(vals)
		}
		total += n
	}
	require.LessOrEqual(t, total, maxPolicyCombinations)
}

// evalPolicy applies policy p to an event as SNS applies an attribute
// policy: a missing attribute fails its key; values are exact strings or
// {"prefix": …}; "$or" takes any branch. An empty resource id travels as a
// missing attribute, as Herald sends it.
func evalPolicy(t *testing.T, p, eventType, resourceID string) bool {
	t.Helper()
	if p == "" {
		return true
	}
	attrs := map[string]string{pubsubx.AttrEventType: eventType}
	if resourceID != "" {
		attrs[pubsubx.AttrResourceID] = resourceID
	}
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(p), &top))
	return evalBranch(t, top, attrs)
}

func evalBranch(t *testing.T, br map[string]json.RawMessage, attrs map[string]string) bool {
	for key, raw := range br {
		if key == "$or" {
			var branches []map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(raw, &branches))
			anyOK := false
			for _, b := range branches {
				anyOK = anyOK || evalBranch(t, b, attrs)
			}
			if !anyOK {
				return false
			}
			continue
		}
		v, ok := attrs[key]
		if !ok {
			return false
		}
		var vals []json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &vals))
		matched := false
		for _, rv := range vals {
			var s string
			if json.Unmarshal(rv, &s) == nil {
				matched = matched || s == v
				continue
			}
			var pm prefixMatch
			require.NoError(t, json.Unmarshal(rv, &pm))
			matched = matched || strings.HasPrefix(v, pm.Prefix)
		}
		if !matched {
			return false
		}
	}
	return true
}

func TestQueueName(t *testing.T) {
	uuid := "herald-dc-3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40"
	long := "herald-q-" + strings.Repeat("Ab9._-", 33) + "xy" // 9 + 200 characters
	cases := []struct{ topic, sub string }{
		{"herald", uuid},
		{"herald", long},
		{"herald", long[:len(long)-1] + "z"},
		{strings.Repeat("t", 256), uuid},
		{"a-b", "c"}, {"a", "b-c"},
		{"t", "q.1"}, {"t", "q_1"},
		{"t", "ünï"}, {"t", "x"},
		{"other", uuid},
	}
	valid := func(s string) bool {
		return len(s) >= 1 && len(s) <= 80 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
	}
	seen := map[string]string{}
	for _, c := range cases {
		n := QueueName(c.topic, c.sub)
		require.True(t, valid(n), "QueueName(%q, %q) = %q is not a valid SQS name", c.topic, c.sub, n)
		require.Equal(t, n, QueueName(c.topic, c.sub), "deterministic")
		key := c.topic + "|" + c.sub
		require.NotContains(t, seen, n, "%s collides with %s", key, seen[n])
		seen[n] = key
	}
	// A deployment's queues share a readable prefix, and a Herald consumer
	// name fits whole.
	require.True(t, strings.HasPrefix(QueueName("herald", uuid), "herald-"+uuid+"-"))
	require.Len(t, QueueName("herald-production", uuid), 80)
}
