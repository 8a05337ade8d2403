package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// requireCode asserts err carries the herr code named want.
func requireCode(t *testing.T, err error, want string, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Equal(t, want, herr.CodeOf(err).String(), msgAndArgs...)
}

// TestTypeJSON checks the filter_type forms: the notifications API's lower-case names
// out, and names, proto enum names and numbers in.
func TestTypeJSON(t *testing.T) {
	t.Parallel()
	for typ, name := range map[filter.Type]string{
		filter.Unspecified:      "unspecified",
		filter.Eq:               "eq",
		filter.StartsWithLazy:   "starts_with_lazy",
		filter.StartsWithGreedy: "starts_with_greedy",
	} {
		b, err := json.Marshal(typ)
		require.NoError(t, err)
		require.Equal(t, `"`+name+`"`, string(b))
		require.Equal(t, name, typ.String())
	}

	accepted := map[string]filter.Type{
		`"eq"`:                             filter.Eq,
		`"unspecified"`:                    filter.Unspecified,
		`"starts_with_lazy"`:               filter.StartsWithLazy,
		`"starts_with_greedy"`:             filter.StartsWithGreedy,
		`"FILTER_TYPE_UNSPECIFIED"`:        filter.Unspecified,
		`"FILTER_TYPE_EQ"`:                 filter.Eq,
		`"FILTER_TYPE_STARTS_WITH_LAZY"`:   filter.StartsWithLazy,
		`"FILTER_TYPE_STARTS_WITH_GREEDY"`: filter.StartsWithGreedy,
		`"STARTS_WITH_GREEDY"`:             filter.StartsWithGreedy,
		`"Eq"`:                             filter.Eq,
		`0`:                                filter.Unspecified,
		`1`:                                filter.Eq,
		`2`:                                filter.StartsWithLazy,
		`3`:                                filter.StartsWithGreedy,
	}
	for in, want := range accepted {
		var got filter.Type = 99
		require.NoError(t, json.Unmarshal([]byte(in), &got), in)
		require.Equal(t, want, got, in)
	}

	for _, in := range []string{`"regex"`, `"FILTER_TYPE_PREFIX"`, `""`, `4`, `-1`, `1.5`, `true`, `{}`, `["eq"]`} {
		var got filter.Type
		require.Error(t, json.Unmarshal([]byte(in), &got), in)
	}
	require.Equal(t, "filter_type(7)", filter.Type(7).String())
}

// TestGroupsJSON checks a round trip through the notifications API's FilterGroup shape.
func TestGroupsJSON(t *testing.T) {
	t.Parallel()
	in := `[{"event_type":"myapp.file.uploaded","filters":[{"filter_type":"FILTER_TYPE_STARTS_WITH_GREEDY","resource_id":"/uploads/"},{"resource_id":"/x"},{"filter_type":2,"resource_id":"/y/"}]}]`
	var gs filter.Groups
	require.NoError(t, json.Unmarshal([]byte(in), &gs))
	require.Equal(t, filter.Groups{{EventType: "myapp.file.uploaded", Filters: []filter.ResourceFilter{
		{FilterType: filter.StartsWithGreedy, ResourceID: "/uploads/"},
		{FilterType: filter.Unspecified, ResourceID: "/x"},
		{FilterType: filter.StartsWithLazy, ResourceID: "/y/"},
	}}}, gs)
	out, err := json.Marshal(gs)
	require.NoError(t, err)
	require.JSONEq(t, `[{"event_type":"myapp.file.uploaded","filters":[{"filter_type":"starts_with_greedy","resource_id":"/uploads/"},{"filter_type":"unspecified","resource_id":"/x"},{"filter_type":"starts_with_lazy","resource_id":"/y/"}]}]`, string(out))
}

// TestParse checks the codes Parse returns.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, empty := range []string{"", "  ", "\n"} {
		gs, err := filter.Parse("filter_groups", empty)
		require.NoError(t, err)
		require.Nil(t, gs)
	}

	gs, err := filter.Parse("filter_groups", `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"/1"}]}]`)
	require.NoError(t, err)
	require.True(t, gs.Match("a", "/1"))
	require.False(t, gs.Match("a", "/2"))

	for _, bad := range []string{`[`, `{}`, `"x"`, `[{"event_type":1}]`, `[{"event_type":"a","filters":[{"filter_type":"nope"}]}]`} {
		_, err := filter.Parse("filter_groups", bad)
		requireCode(t, err, "malformed", bad)
		require.Contains(t, herr.MessageOf(err), "filter_groups", bad)
	}
	_, err = filter.Parse("previous_filter_groups", `[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":""}]}]`)
	requireCode(t, err, "invalid_argument")
	require.Contains(t, herr.MessageOf(err), "previous_filter_groups[0]")
}

// TestGroupsEqual checks that Equal treats unspecified as eq and respects
// order.
func TestGroupsEqual(t *testing.T) {
	t.Parallel()
	a := filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.Unspecified, ResourceID: "/1"}}}}
	b := filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.Eq, ResourceID: "/1"}}}}
	require.True(t, a.Equal(b))
	require.True(t, b.Equal(a))
	require.True(t, filter.Groups(nil).Equal(filter.Groups{}))

	other := []filter.Groups{
		{{EventType: "b", Filters: b[0].Filters}},
		{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithGreedy, ResourceID: "/1"}}}},
		{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.Eq, ResourceID: "/2"}}}},
		{{EventType: "a"}},
		append(b, filter.Group{EventType: "c"}),
	}
	for i, o := range other {
		require.False(t, b.Equal(o), "case %d", i)
	}
	two := filter.Groups{{EventType: "x"}, {EventType: "y"}}
	require.False(t, two.Equal(filter.Groups{{EventType: "y"}, {EventType: "x"}}), "order matters")
}
