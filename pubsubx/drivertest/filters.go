package drivertest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/pubsubx"
)

// filterEvent is one event the filter test sends, named by its label
// "type resource" ("-" for no resource_id attribute).
type filterEvent struct{ eventType, resourceID, label string }

// filterEvents covers the corners of the notifications API's filter types: trailing
// slashes, a path without a leading slash, nested paths, a prefix that is
// not a path segment, unicode, no resource at all, and event types that
// are prefixes of one another.
var filterEvents = []filterEvent{
	{"order.created", "/users/7", "order.created /users/7"},
	{"order.created", "/users/7/", "order.created /users/7/"},
	{"order.created", "/users/7/photos", "order.created /users/7/photos"},
	{"order.created", "/users", "order.created /users"},
	{"order.created", "/users/", "order.created /users/"},
	{"order.created", "/usersx/1", "order.created /usersx/1"},
	{"order.created", "users/7", "order.created users/7"},
	{"order.created", "/ünïcode/路径", "order.created /ünïcode/路径"},
	{"order.created", noResource, "order.created -"},
	{"order.created.v2", "/users/7", "order.created.v2 /users/7"},
	{"order.created.v2", noResource, "order.created.v2 -"},
	{"user.deleted", "/users/7", "user.deleted /users/7"},
	{"user.deleted", "/a", "user.deleted /a"},
	{"user.deleted", noResource, "user.deleted -"},
	{"order", "/users/7", "order /users/7"},
	// The notifications API's event types: any allowed character first,
	// up to 256 of them (one more than an AMQP routing key holds).
	{".dot.first", "/a", ".dot.first /a"},
	{longType, "/a", "long /a"},
	{longType[:255], "/a", "long255 /a"},
}

// longType is an event type of the longest allowed length, 256 characters.
var longType = strings.Repeat("t", 255) + "x"

// filterCase is one subscription of the filter test and the labels of the
// events its groups match, worked out by hand from the notifications API's rules.
type filterCase struct {
	tag    string
	groups filter.Groups
	want   []string
}

func eqF(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.Eq, ResourceID: id}
}
func greedyF(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithGreedy, ResourceID: id}
}
func lazyF(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithLazy, ResourceID: id}
}

// group is a filter group of one event type.
func group(eventType string, fs ...filter.ResourceFilter) filter.Group {
	return filter.Group{EventType: eventType, Filters: fs}
}

var filterCases = []filterCase{
	{"eq", filter.Groups{group("order.created", eqF("/users/7"))},
		[]string{"order.created /users/7"}},
	{"eqslash", filter.Groups{group("order.created", eqF("/users/7/"))},
		[]string{"order.created /users/7/"}},
	{"unspecified", filter.Groups{group("order.created", filter.ResourceFilter{ResourceID: "/users"})},
		[]string{"order.created /users"}},
	{"greedy", filter.Groups{group("order.created", greedyF("/users/"))},
		[]string{"order.created /users/7", "order.created /users/7/", "order.created /users/7/photos", "order.created /users/"}},
	{"greedyunicode", filter.Groups{group("order.created", greedyF("/ünïcode/"))},
		[]string{"order.created /ünïcode/路径"}},
	{"greedynoslash", filter.Groups{group("order.created", greedyF("users"))},
		[]string{"order.created users/7"}},
	{"lazy", filter.Groups{group("order.created", lazyF("/users/"))},
		[]string{"order.created /users/7", "order.created /users/7/", "order.created /users/"}},
	{"lazynoslash", filter.Groups{group("order.created", lazyF("/users"))},
		[]string{"order.created /users/7", "order.created /users/7/", "order.created /users", "order.created /users/"}},
	{"typeonly", filter.Groups{group("order.created")},
		[]string{"order.created /users/7", "order.created /users/7/", "order.created /users/7/photos", "order.created /users",
			"order.created /users/", "order.created /usersx/1", "order.created users/7", "order.created /ünïcode/路径", "order.created -"}},
	{"typeprefix", filter.Groups{group("order")},
		[]string{"order /users/7"}},
	// A prefix matches whole words: "/users" is not a prefix of "/usersx/1".
	{"greedyword", filter.Groups{group("order.created", greedyF("/users"))},
		[]string{"order.created /users/7", "order.created /users/7/", "order.created /users/7/photos", "order.created /users", "order.created /users/"}},
	{"dotfirst", filter.Groups{group(".dot.first")},
		[]string{".dot.first /a"}},
	{"longtype", filter.Groups{group(longType)},
		[]string{"long /a"}},
	{"everything", nil, allLabels()},
	{"multi", filter.Groups{group("order.created.v2", eqF("/users/7")), group("user.deleted", greedyF(""))},
		[]string{"order.created.v2 /users/7", "user.deleted /users/7", "user.deleted /a", "user.deleted -"}},
	{"lazyempty", filter.Groups{group("user.deleted", lazyF(""))},
		[]string{"user.deleted /a", "user.deleted -"}},
	{"twofilters", filter.Groups{group("order.created", eqF("/users"), lazyF("/usersx/"))},
		[]string{"order.created /users", "order.created /usersx/1"}},
}

func allLabels() []string {
	out := make([]string, len(filterEvents))
	for i, e := range filterEvents {
		out[i] = e.label
	}
	return out
}

// testFilters: every message a subscription's groups match is delivered
// (the broker never filters too much), and re-checking what arrived with
// filter.Groups.Match, as the Herald handler does, leaves exactly those.
func testFilters(t *testing.T, f *fixture) {
	b := f.broker()
	subs := make([]string, len(filterCases))
	for i, c := range filterCases {
		subs[i] = f.subscribe(b, c.tag, c.groups)
	}
	sent := make([]*pubsubx.Message, len(filterEvents))
	label := map[string]string{} // event id → label
	for i, e := range filterEvents {
		sent[i] = f.message(e.eventType, e.resourceID)
		label[eventID(sent[i])] = e.label
	}
	f.send(b, sent...)

	for i, c := range filterCases {
		t.Run(c.tag, func(t *testing.T) {
			// Subscriptions are independent: check them side by side. The
			// parent's cleanups (delete, close) wait for all of them.
			t.Parallel()
			f := f.in(t)
			// The hand-worked expectation agrees with the filter package.
			var want []*pubsubx.Message
			for _, m := range sent {
				if c.groups.Match(m.EventType(), m.ResourceID()) {
					want = append(want, m)
				}
			}
			require.ElementsMatch(t, c.want, labels(want, label), "fixture: hand-worked expectation disagrees with filter.Match")

			got := f.receiveAll(b, subs[i], want)
			for id := range got {
				require.Contains(t, label, id, "delivered a message that was never sent")
			}
			requireMatched(t, c.groups, got, want)
			t.Logf("%s: broker delivered %d of %d events, %d match", c.tag, len(got), len(sent), len(want))
		})
	}
}

// labels maps msgs to their labels.
func labels(msgs []*pubsubx.Message, label map[string]string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = label[eventID(m)]
	}
	return out
}

// requireMatched requires got to hold every message of want, and the
// messages of got that groups match to be exactly want.
func requireMatched(t testing.TB, groups filter.Groups, got map[string]*pubsubx.Message, want []*pubsubx.Message) {
	t.Helper()
	for _, w := range want {
		require.Contains(t, got, eventID(w), "a matching message was not delivered (the broker filtered too much)")
	}
	var matched []string
	for id, m := range got {
		if groups.Match(m.EventType(), m.ResourceID()) {
			matched = append(matched, id)
		}
	}
	require.ElementsMatch(t, ids(want), matched, "after filter.Match the delivered set differs from the expected one")
}
