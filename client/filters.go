package client

// FilterGroup selects events of one type, optionally narrowed by resource
// filters: an event passes a group when its type equals EventType and,
// if Filters is non-empty, any filter passes. An event passes a list of
// groups when any group passes; no groups select every event. Limits: 20
// groups of 20 filters, 16 KiB of types and resource ids in all.
type FilterGroup struct {
	EventType string           `json:"event_type"`
	Filters   []ResourceFilter `json:"filters"`
}

// ResourceFilter tests an event's resource id (its CloudEvents subject).
type ResourceFilter struct {
	// FilterType is FilterEq, FilterStartsWithLazy or
	// FilterStartsWithGreedy.
	FilterType string `json:"filter_type"`
	ResourceID string `json:"resource_id"`
}

// Filter types.
const (
	// FilterEq passes a resource id equal to ResourceID (which must not be
	// empty).
	FilterEq = "eq"
	// FilterStartsWithGreedy (a deep prefix) passes a resource id that
	// starts with ResourceID.
	FilterStartsWithGreedy = "starts_with_greedy"
	// FilterStartsWithLazy (a shallow prefix) passes a resource id that
	// starts with ResourceID followed by at most one more path segment:
	// "/users/" passes "/users/7", not "/users/7/photos".
	FilterStartsWithLazy = "starts_with_lazy"
)

// nonNil returns gs, or an empty list for nil, so that JSON carries [].
func nonNil(gs []FilterGroup) []FilterGroup {
	if gs == nil {
		return []FilterGroup{}
	}
	out := make([]FilterGroup, len(gs))
	for i, g := range gs {
		out[i] = g
		if g.Filters == nil {
			out[i].Filters = []ResourceFilter{}
		}
	}
	return out
}
