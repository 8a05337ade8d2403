package cli

import (
	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/strictjson"
)

// filterFlags are the shorthand filter flags and the JSON escape hatch.
type filterFlags struct {
	types      []string
	prefixes   []string
	lazy       []string
	eqs        []string
	jsonGroups string
}

func (f *filterFlags) add(cmd *cobra.Command, name string) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.types, "type", nil, "event type to select (repeatable; each is one filter group)")
	fl.StringArrayVar(&f.prefixes, "prefix", nil, "resource id prefix (deep: starts_with_greedy), applied to every --type (repeatable)")
	fl.StringArrayVar(&f.lazy, "lazy-prefix", nil, "resource id prefix plus at most one segment (starts_with_lazy), applied to every --type (repeatable)")
	fl.StringArrayVar(&f.eqs, "eq", nil, "exact resource id, applied to every --type (repeatable)")
	fl.StringVar(&f.jsonGroups, name, "", `filter groups as JSON, e.g. '[{"event_type":"a.b","filters":[{"filter_type":"eq","resource_id":"/x"}]}]'`)
}

// groups builds the filter groups; nil means every event.
func (f *filterFlags) groups(jsonFlag string) ([]client.FilterGroup, error) {
	if f.jsonGroups != "" {
		if len(f.types)+len(f.prefixes)+len(f.lazy)+len(f.eqs) > 0 {
			return nil, usagef("--%s cannot be combined with --type, --prefix, --lazy-prefix or --eq", jsonFlag)
		}
		var gs []client.FilterGroup
		if err := strictjson.Unmarshal([]byte(f.jsonGroups), &gs); err != nil {
			return nil, usagef("--%s is not a JSON array of filter groups: %v", jsonFlag, err)
		}
		return gs, nil
	}
	if len(f.types) == 0 {
		if len(f.prefixes)+len(f.lazy)+len(f.eqs) > 0 {
			return nil, usagef("--prefix, --lazy-prefix and --eq need a --type: a filter group is one event type")
		}
		return nil, nil
	}
	var rf []client.ResourceFilter
	for _, p := range f.prefixes {
		rf = append(rf, client.ResourceFilter{FilterType: client.FilterStartsWithGreedy, ResourceID: p})
	}
	for _, p := range f.lazy {
		rf = append(rf, client.ResourceFilter{FilterType: client.FilterStartsWithLazy, ResourceID: p})
	}
	for _, e := range f.eqs {
		rf = append(rf, client.ResourceFilter{FilterType: client.FilterEq, ResourceID: e})
	}
	gs := make([]client.FilterGroup, len(f.types))
	for i, t := range f.types {
		gs[i] = client.FilterGroup{EventType: t, Filters: rf}
	}
	return gs, nil
}
