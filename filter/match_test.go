package filter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// TestResourceFilterMatch is the table of the notifications API's filter types as
// package filter documents them.
func TestResourceFilterMatch(t *testing.T) {
	t.Parallel()
	type row struct {
		typ     filter.Type
		pattern string
		yes     []string
		no      []string
	}
	rows := []row{
		{filter.Eq, "/users/7", []string{"/users/7"}, []string{"", "/users/7/", "/users/70", "/users", "users/7", "/users/7/x"}},
		{filter.Eq, "/users/7/", []string{"/users/7/"}, []string{"/users/7", "/users/7/x"}},
		{filter.Unspecified, "/users/7", []string{"/users/7"}, []string{"", "/users/7/", "/users/70"}},
		// An empty eq pattern is invalid (see Validate) and matches nothing,
		// not even an event without a resource.
		{filter.Eq, "", nil, []string{"", "a", "/"}},
		{filter.Unspecified, "", nil, []string{"", "a"}},

		{filter.StartsWithGreedy, "/users/", []string{"/users/", "/users/7", "/users/7/", "/users/7/photos/1"}, []string{"", "/users", "/usersx/", "/other/users/"}},
		{filter.StartsWithGreedy, "/users", []string{"/users", "/users/", "/users/7/photos"}, []string{"", "/user", "users", "/usersx", "/usersx/1"}},
		// The published definitions' examples: whole words.
		{filter.StartsWithGreedy, "folder_1", []string{"folder_1", "folder_1/", "folder_1/file.txt", "folder_1/sub/file.txt", "folder_1/folder_2/folder_3/astronaut.usd"}, []string{"folder_10", "folder_10/file.txt", "folder_", "/folder_1/x"}},
		{filter.StartsWithGreedy, "folder_1/", []string{"folder_1/", "folder_1/file.txt", "folder_1/sub/file.txt"}, []string{"folder_1", "folder_10/file.txt"}},
		{filter.StartsWithGreedy, "/", []string{"/", "/a", "/a/b/"}, []string{"", "a", "a/"}},
		{filter.StartsWithGreedy, "", []string{"", "a", "/a", "/a/b/c/", "//"}, nil},

		{filter.StartsWithLazy, "/users/", []string{"/users/", "/users/7", "/users/7/"}, []string{"", "/users", "/users/7/photos", "/users/7/photos/", "/users/7//", "/other/7"}},
		{filter.StartsWithLazy, "/users", []string{"/users", "/users/", "/users/7", "/users/7/"}, []string{"/users/7/photos", "/user", "/usersx", "/usersx/1"}},
		{filter.StartsWithLazy, "folder_1", []string{"folder_1", "folder_1/file.txt", "folder_1/astronaut.usd"}, []string{"folder_10", "folder_10/file.txt", "folder_1/folder_2/folder_3/astronaut.usd"}},
		{filter.StartsWithLazy, "", []string{"", "a", "/a", "/a/", "a/", "/"}, []string{"a/b", "/a/b", "/a/b/", "//a/"}},
	}
	for _, r := range rows {
		f := filter.ResourceFilter{FilterType: r.typ, ResourceID: r.pattern}
		for _, id := range r.yes {
			require.True(t, f.Match(id), "%s %q should match %q", r.typ, r.pattern, id)
		}
		for _, id := range r.no {
			require.False(t, f.Match(id), "%s %q should not match %q", r.typ, r.pattern, id)
		}
	}
}

// TestGroupsMatch covers how groups and filters combine.
func TestGroupsMatch(t *testing.T) {
	t.Parallel()
	greedy := func(p string) filter.ResourceFilter {
		return filter.ResourceFilter{FilterType: filter.StartsWithGreedy, ResourceID: p}
	}
	eq := func(p string) filter.ResourceFilter {
		return filter.ResourceFilter{FilterType: filter.Eq, ResourceID: p}
	}

	tests := []struct {
		name   string
		groups filter.Groups
		typ    string
		id     string
		want   bool
	}{
		{"nil groups match everything", nil, "any.type", "/x", true},
		{"empty groups match everything", filter.Groups{}, "any.type", "", true},
		{"no filters: any resource of the type", filter.Groups{{EventType: "a"}}, "a", "/deep/path", true},
		{"no filters: no resource of the type", filter.Groups{{EventType: "a"}}, "a", "", true},
		{"no filters: other type", filter.Groups{{EventType: "a"}}, "b", "/x", false},
		{"type is exact, not a prefix", filter.Groups{{EventType: "a"}}, "a.b", "", false},
		{"type is case-sensitive", filter.Groups{{EventType: "a"}}, "A", "", false},
		{"empty filter list is no filters", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{}}}, "a", "/x", true},
		{"any filter of the group", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{eq("/1"), eq("/2")}}}, "a", "/2", true},
		{"no filter of the group", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{eq("/1"), eq("/2")}}}, "a", "/3", false},
		{"filters need a resource", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{eq("/1")}}}, "a", "", false},
		{"any group", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{eq("/1")}}, {EventType: "b"}}, "b", "/9", true},
		{"filters belong to their own group", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{greedy("/x/")}}, {EventType: "b", Filters: []filter.ResourceFilter{eq("/1")}}}, "b", "/x/1", false},
		{"greedy empty in a group matches any resource of its type", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{greedy("")}}}, "a", "", true},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tc.groups.Match(tc.typ, tc.id), tc.name)
	}
}

// TestValidate checks each rule and that errors are InvalidArgument
// naming the offending field.
func TestValidate(t *testing.T) {
	t.Parallel()
	manyFilters := make([]filter.ResourceFilter, filter.MaxFiltersPerGroup+1)
	for i := range manyFilters {
		manyFilters[i] = filter.ResourceFilter{FilterType: filter.Eq, ResourceID: fmt.Sprint("/", i)}
	}
	manyGroups := make(filter.Groups, filter.MaxGroups+1)
	for i := range manyGroups {
		manyGroups[i] = filter.Group{EventType: "a"}
	}
	long := make([]byte, filter.MaxResourceIDLength+1)
	for i := range long {
		long[i] = 'x'
	}

	valid := []filter.Groups{
		nil,
		{},
		{{EventType: "a"}},
		{{EventType: ".a"}, {EventType: "-"}, {EventType: "_x"}, {EventType: string(long[:256])}},
		{{EventType: "myapp.user-created_v2", Filters: []filter.ResourceFilter{
			{FilterType: filter.StartsWithGreedy, ResourceID: ""},
			{FilterType: filter.StartsWithLazy, ResourceID: ""},
			{FilterType: filter.Eq, ResourceID: "/x"},
			{FilterType: filter.Unspecified, ResourceID: "/x"},
			{FilterType: filter.Eq, ResourceID: string(long[:filter.MaxResourceIDLength])},
		}}},
		manyGroups[:filter.MaxGroups],
		{{EventType: "a", Filters: manyFilters[:filter.MaxFiltersPerGroup]}},
	}
	for i, gs := range valid {
		require.NoError(t, gs.Validate("filter_groups"), "valid case %d", i)
	}

	invalid := []struct {
		name   string
		groups filter.Groups
		field  string
	}{
		{"eq with empty resource", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.Eq}}}}, "fg[0].filters[0].resource_id"},
		{"unspecified with empty resource", filter.Groups{{EventType: "a"}, {EventType: "b", Filters: []filter.ResourceFilter{{ResourceID: "/x"}, {}}}}, "fg[1].filters[1].resource_id"},
		{"unknown filter type", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: 9, ResourceID: "/x"}}}}, "fg[0].filters[0].filter_type"},
		{"empty event type", filter.Groups{{}}, "fg[0].event_type"},
		{"event type with a space", filter.Groups{{EventType: "a b"}}, "fg[0].event_type"},
		{"event type with a slash", filter.Groups{{EventType: "a/b"}}, "fg[0].event_type"},
		{"event type over 256", filter.Groups{{EventType: string(long[:257])}}, "fg[0].event_type"},
		{"resource id too long", filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithGreedy, ResourceID: string(long)}}}}, "fg[0].filters[0].resource_id"},
		{"too many groups", manyGroups, "fg"},
		{"too many filters", filter.Groups{{EventType: "a", Filters: manyFilters}}, "fg[0].filters"},
	}
	for _, tc := range invalid {
		err := tc.groups.Validate("fg")
		requireCode(t, err, "invalid_argument", tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
		require.Equal(t, "fg", herr.FieldOf(err)[0], "%s: the field path starts at the parameter", tc.name)
	}
}

// TestValidateTotalBytes holds a consumer's filters to a size its record can
// store.
func TestValidateTotalBytes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", filter.MaxResourceIDLength)
	var gs filter.Groups
	for range 17 { // 17 × 1,024 bytes of resource ids > 16 KiB
		gs = append(gs, filter.Group{EventType: "a.b", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithGreedy, ResourceID: long}}})
	}
	err := gs.Validate("filter_groups")
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.NoError(t, gs[:15].Validate("filter_groups"))
}

// TestValidEventTypeMatchesPattern: the byte loop publishing runs says
// what EventTypePattern says, for every byte and the length bounds.
func TestValidEventTypeMatchesPattern(t *testing.T) {
	t.Parallel()
	cases := []string{"", "a", strings.Repeat("a", 256), strings.Repeat("a", 257), "a.b_c-D9", "a b", "é", "a\n", "a$", "\x00"}
	for c := range 256 {
		cases = append(cases, "x"+string(rune(c)), string([]byte{byte(c)}))
	}
	for _, c := range cases {
		require.Equal(t, filter.EventTypePattern.MatchString(c), filter.ValidEventType(c), "%q", c)
	}
}
