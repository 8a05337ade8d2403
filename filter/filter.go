// Package filter holds filter groups, the subscription filters of the notifications API
// ("FilterGroup Structure", "Filter Types"), and decides whether an event
// matches them.
//
// # Matching
//
// A list of groups matches an event when any group matches. An empty list
// matches every event. A group matches when its EventType equals the event's
// type exactly and, if it has filters, any one filter matches the event's
// resource id. A group with no filters matches every event of its type.
//
// A resource id is a path of words separated by "/" (the notifications
// API's published definitions: "each word separated by a slash is something
// that a consumer could filter by"), so both prefix types match whole words.
// With p the filter's ResourceID and id the event's resource id, id starts
// with p on a word boundary when it starts with p and p is "", p ends in
// "/", id is p, or the next byte of id is "/". Then:
//
//   - Eq (and Unspecified, which defaults to Eq): id == p. p must not be empty.
//   - StartsWithGreedy (deep prefix): id starts with p on a word boundary.
//     "folder_1" matches "folder_1" and everything under "folder_1/", not
//     "folder_10/file.txt"; "folder_1/" matches everything under it (not
//     "folder_1" itself); "" matches every id.
//   - StartsWithLazy (shallow prefix): id starts with p on a word boundary
//     and what follows, after one leading "/" and one trailing "/" are
//     trimmed, has no "/" left: one more word at most. "/users/" matches
//     "/users/7" and "/users/7/" but not "/users/7/photos"; "/users" matches
//     "/users" and "/users/7" but not "/usersx". "" matches "" and one-word
//     ids ("a", "/a", "/a/").
//
// Brokers push down what they can (exact type, a prefix of the id): every
// push-down matches a superset of Match, and Match is always re-run in the
// handler, so the result is exact on every backend.
package filter

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
)

// Type is a resource filter type. Its JSON form is the notifications API's lower-case name
// ("eq", "starts_with_lazy", "starts_with_greedy", "unspecified"); the proto
// enum names ("FILTER_TYPE_EQ", …) and numbers are accepted on input too.
type Type int

// Filter types, numbered as the notifications API's ResourceFilter.FilterType enum.
const (
	Unspecified      Type = 0
	Eq               Type = 1
	StartsWithLazy   Type = 2
	StartsWithGreedy Type = 3
)

var typeNames = map[Type]string{
	Unspecified:      "unspecified",
	Eq:               "eq",
	StartsWithLazy:   "starts_with_lazy",
	StartsWithGreedy: "starts_with_greedy",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("filter_type(%d)", int(t))
}

// MarshalJSON writes the notifications API's lower-case name.
func (t Type) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON accepts the lower-case name, the proto enum name, or the
// enum number.
func (t *Type) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		if _, ok := typeNames[Type(n)]; !ok {
			return herr.New(herr.InvalidArgument, "unknown filter_type %d (want 0-3)", n)
		}
		*t = Type(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return herr.New(herr.InvalidArgument, "filter_type must be a string or a number")
	}
	name := strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "FILTER_TYPE_"))
	for k, v := range typeNames {
		if v == name {
			*t = k
			return nil
		}
	}
	return herr.New(herr.InvalidArgument, "unknown filter_type (want eq, starts_with_lazy, starts_with_greedy or unspecified)")
}

// ResourceFilter is one resource-id condition of a group.
type ResourceFilter struct {
	FilterType Type   `json:"filter_type"`
	ResourceID string `json:"resource_id"`
}

// Group selects events of one event type, optionally narrowed by resource id.
type Group struct {
	EventType string           `json:"event_type"`
	Filters   []ResourceFilter `json:"filters"`
}

// MarshalJSON writes "filters" as [] rather than null when a group has none.
func (g Group) MarshalJSON() ([]byte, error) {
	type plain Group // without this method
	if g.Filters == nil {
		g.Filters = []ResourceFilter{}
	}
	return json.Marshal(plain(g))
}

// Groups is a list of filter groups; see the package doc for its semantics.
type Groups []Group

// Limits on filter groups. They keep a consumer's filters small enough for
// every broker's filter syntax (an SNS filter policy allows 150 value
// combinations; Pub/Sub filters 256 bytes of expression per clause).
const (
	MaxGroups           = 20
	MaxFiltersPerGroup  = 20
	MaxResourceIDLength = 1024
	// MaxTotalBytes caps the event types and resource ids of one list
	// together. The groups are stored in the consumer's record, which must
	// fit a DynamoDB item (400 KB) beside its lease table; without this cap
	// 20 groups of 20 filters of 1,024 bytes would take 410 KB alone.
	MaxTotalBytes = 16 << 10
)

// EventTypePattern is the rule an event type follows: 1–256 characters of
// letters, digits, '.', '_' and '-', any of them first (the notifications
// API's published Event schema: maxLength 256, ^[a-zA-Z0-9._-]+$).
var EventTypePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,256}$`)

// ValidEventType reports whether t follows EventTypePattern. It is the
// check publishing runs on every event: a loop over the bytes, a tenth of
// the regular expression's time (TestValidEventTypeMatchesPattern holds
// the two equal).
func ValidEventType(t string) bool {
	if len(t) == 0 || len(t) > 256 {
		return false
	}
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// EventTypeRule says EventTypePattern in words, for error messages.
const EventTypeRule = "1-256 characters of letters, digits, '.', '_' or '-'"

// Validate checks groups against the rules above. Errors are
// herr.InvalidArgument with a message naming the offending field, which
// herr.FieldOf also gives as a path from field ([field, 0, "event_type"]).
func (gs Groups) Validate(field string) error {
	if len(gs) > MaxGroups {
		return herr.InField(herr.New(herr.InvalidArgument, "%s: at most %d filter groups are allowed, got %d", field, MaxGroups, len(gs)), field)
	}
	total := 0
	for _, g := range gs {
		total += len(g.EventType)
		for _, f := range g.Filters {
			total += len(f.ResourceID)
		}
	}
	if total > MaxTotalBytes {
		return herr.InField(herr.New(herr.InvalidArgument, "%s: event types and resource ids together take %d bytes; at most %d are allowed", field, total, MaxTotalBytes), field)
	}
	for i, g := range gs {
		if !ValidEventType(g.EventType) {
			return herr.InField(herr.New(herr.InvalidArgument, "%s[%d].event_type must be %s", field, i, EventTypeRule), field, i, "event_type")
		}
		if len(g.Filters) > MaxFiltersPerGroup {
			return herr.InField(herr.New(herr.InvalidArgument, "%s[%d].filters: at most %d filters are allowed", field, i, MaxFiltersPerGroup), field, i, "filters")
		}
		for j, f := range g.Filters {
			if len(f.ResourceID) > MaxResourceIDLength {
				return herr.InField(herr.New(herr.InvalidArgument, "%s[%d].filters[%d].resource_id is longer than %d bytes", field, i, j, MaxResourceIDLength), field, i, "filters", j, "resource_id")
			}
			if (f.FilterType == Eq || f.FilterType == Unspecified) && f.ResourceID == "" {
				return herr.InField(herr.New(herr.InvalidArgument, "%s[%d].filters[%d].resource_id must not be empty for an eq filter", field, i, j), field, i, "filters", j, "resource_id")
			}
			if _, ok := typeNames[f.FilterType]; !ok {
				return herr.InField(herr.New(herr.InvalidArgument, "%s[%d].filters[%d].filter_type is unknown", field, i, j), field, i, "filters", j, "filter_type")
			}
		}
	}
	return nil
}

// Parse decodes a JSON array of filter groups and validates it. An empty
// string is an empty list. Malformed JSON is herr.Malformed; invalid groups
// are herr.InvalidArgument. field names the parameter in messages.
func Parse(field, s string) (Groups, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var gs Groups
	if err := strictjson.Unmarshal([]byte(s), &gs); err != nil {
		return nil, herr.Wrap(herr.Malformed, err, field+" must be a JSON array of filter groups: "+herr.MessageOf(err))
	}
	if err := gs.Validate(field); err != nil {
		return nil, err
	}
	return gs, nil
}

// Match reports whether an event with this type and resource id passes gs.
func (gs Groups) Match(eventType, resourceID string) bool {
	if len(gs) == 0 {
		return true
	}
	for i := range gs {
		if gs[i].match(eventType, resourceID) {
			return true
		}
	}
	return false
}

func (g *Group) match(eventType, resourceID string) bool {
	if g.EventType != eventType {
		return false
	}
	if len(g.Filters) == 0 {
		return true
	}
	for _, f := range g.Filters {
		if f.Match(resourceID) {
			return true
		}
	}
	return false
}

// Match reports whether resourceID passes f alone.
func (f ResourceFilter) Match(resourceID string) bool {
	switch f.FilterType {
	case StartsWithGreedy:
		return wordPrefix(resourceID, f.ResourceID)
	case StartsWithLazy:
		if !wordPrefix(resourceID, f.ResourceID) {
			return false
		}
		rest := resourceID[len(f.ResourceID):]
		rest = strings.TrimPrefix(rest, "/")
		rest = strings.TrimSuffix(rest, "/")
		return !strings.Contains(rest, "/")
	default: // Eq and Unspecified
		return f.ResourceID != "" && resourceID == f.ResourceID
	}
}

// wordPrefix reports whether id starts with p on a word boundary (see the
// package doc).
func wordPrefix(id, p string) bool {
	if !strings.HasPrefix(id, p) {
		return false
	}
	return p == "" || p[len(p)-1] == '/' || len(id) == len(p) || id[len(p)] == '/'
}

// Equal reports whether two lists hold the same groups in the same order,
// comparing Unspecified and Eq as the same type.
func (gs Groups) Equal(other Groups) bool {
	if len(gs) != len(other) {
		return false
	}
	for i := range gs {
		a, b := gs[i], other[i]
		if a.EventType != b.EventType || len(a.Filters) != len(b.Filters) {
			return false
		}
		for j := range a.Filters {
			if a.Filters[j].ResourceID != b.Filters[j].ResourceID || norm(a.Filters[j].FilterType) != norm(b.Filters[j].FilterType) {
				return false
			}
		}
	}
	return true
}

func norm(t Type) Type {
	if t == Unspecified {
		return Eq
	}
	return t
}
