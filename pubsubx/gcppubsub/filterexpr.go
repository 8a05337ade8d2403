package gcppubsub

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/pubsubx"
)

// MaxFilterBytes is Pub/Sub's limit on a subscription filter expression.
// filterExpression never returns a longer one: it pushes down less.
const MaxFilterBytes = 256

// typeClause is the pushed-down form of the groups of one event type:
// the type, and either any resource (anyResource) or one of conds.
type typeClause struct {
	eventType   string
	anyResource bool
	conds       []string // rendered resource conditions, deduplicated
}

// filterExpression returns the Pub/Sub filter for groups: a superset of
// what groups.Match accepts, never a subset, since the Herald handler
// re-checks every delivered message with Match but cannot get back one the
// broker dropped. "" means no filter.
//
// Each group becomes `attributes.event_type = "T"`, ANDed with its resource
// conditions ORed: `attributes.resource_id = "X"` for eq,
// `hasPrefix(attributes.resource_id, "P")` for greedy and lazy prefixes (a
// lazy prefix is shallow, which Pub/Sub cannot express; the deep prefix is
// a superset). Groups of one event type are merged, and the groups are
// ORed. A group without filters, or with a greedy or lazy "" (which must
// also match events without a resource_id attribute), or with a value
// the filter language cannot carry (control characters, invalid UTF-8),
// pushes down its event type only.
//
// When the expression would exceed MaxFilterBytes, the resource conditions
// of the clause with the longest ones are dropped, one clause at a time;
// if the event types alone are still too long, there is no filter.
func filterExpression(groups filter.Groups) string {
	if len(groups) == 0 {
		return ""
	}
	var clauses []*typeClause
	byType := map[string]*typeClause{}
	for _, g := range groups {
		conds, anyResource, matchesSome := resourceConds(g.Filters)
		if !matchesSome {
			continue // e.g. only eq "" filters: the group matches no event
		}
		if _, ok := quote(g.EventType); !ok {
			return "" // cannot name the type: filter nothing (superset)
		}
		c := byType[g.EventType]
		if c == nil {
			c = &typeClause{eventType: g.EventType}
			byType[g.EventType] = c
			clauses = append(clauses, c)
		}
		if c.anyResource {
			continue
		}
		if anyResource {
			c.anyResource, c.conds = true, nil
			continue
		}
		for _, cond := range conds {
			if !contains(c.conds, cond) {
				c.conds = append(c.conds, cond)
			}
		}
	}
	if len(clauses) == 0 {
		// No group can match any event. Pub/Sub has no "false" literal,
		// and no filter is a superset too.
		return ""
	}
	for {
		expr := render(clauses)
		if len(expr) <= MaxFilterBytes {
			return expr
		}
		// Push down less: widen the clause whose conditions are longest.
		widest, widestLen := -1, 0
		for i, c := range clauses {
			if n := condsLen(c.conds); !c.anyResource && n > widestLen {
				widest, widestLen = i, n
			}
		}
		if widest < 0 {
			return "" // event types alone do not fit: no filter at all
		}
		clauses[widest].anyResource, clauses[widest].conds = true, nil
	}
}

// resourceConds renders the resource conditions of one group's filters.
// anyResource reports that the group matches every resource (including
// none), so no condition may be pushed down; matchesSome is false when no
// event can match (every filter is an eq with an empty id).
func resourceConds(fs []filter.ResourceFilter) (conds []string, anyResource, matchesSome bool) {
	if len(fs) == 0 {
		return nil, true, true
	}
	for _, f := range fs {
		switch f.FilterType {
		case filter.StartsWithGreedy, filter.StartsWithLazy:
			if f.ResourceID == "" {
				return nil, true, true
			}
			lit, ok := quote(f.ResourceID)
			if !ok {
				return nil, true, true
			}
			conds = append(conds, "hasPrefix(attributes."+pubsubx.AttrResourceID+", "+lit+")")
		default: // Eq and Unspecified
			if f.ResourceID == "" {
				continue // matches nothing (filter.ResourceFilter.Match)
			}
			lit, ok := quote(f.ResourceID)
			if !ok {
				return nil, true, true
			}
			conds = append(conds, "attributes."+pubsubx.AttrResourceID+" = "+lit)
		}
	}
	return conds, false, len(conds) > 0
}

// render writes clauses as one expression. Pub/Sub requires parentheses
// wherever AND and OR meet.
func render(clauses []*typeClause) string {
	parts := make([]string, len(clauses))
	for i, c := range clauses {
		lit, _ := quote(c.eventType) // checked by filterExpression
		s := "attributes." + pubsubx.AttrEventType + " = " + lit
		switch {
		case c.anyResource || len(c.conds) == 0:
		case len(c.conds) == 1:
			s += " AND " + c.conds[0]
		default:
			s += " AND (" + strings.Join(c.conds, " OR ") + ")"
		}
		if len(clauses) > 1 && strings.Contains(s, " AND ") {
			s = "(" + s + ")"
		}
		parts[i] = s
	}
	return strings.Join(parts, " OR ")
}

// quote returns s as a filter string literal, with '"' and '\' escaped by
// a backslash. ok is false for values the literal cannot carry safely:
// invalid UTF-8 and control characters.
func quote(s string) (lit string, ok bool) {
	if !utf8.ValidString(s) {
		return "", false
	}
	var sb strings.Builder
	sb.Grow(len(s) + 2)
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return "", false
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String(), true
}

func condsLen(conds []string) int {
	n := 0
	for _, c := range conds {
		n += len(c)
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
