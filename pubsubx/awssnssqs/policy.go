package awssnssqs

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/pubsubx"
)

// SNS filter policy limits (Amazon SNS developer guide, "Filter policy
// constraints").
const (
	// maxPolicyCombinations bounds a policy's complexity: the product of the
	// value counts of its keys, summed over the branches of an "$or".
	maxPolicyCombinations = 150
	// maxPolicyBytes is the largest filter policy SNS accepts.
	maxPolicyBytes = 256 << 10
)

// filterPolicies returns the filter policies to try for groups, most exact
// first. Each one matches a superset of what groups match (filter.Match),
// so any of them is correct: the handler re-checks every message. The last
// one is always "" (no policy: every message), which SNS cannot refuse.
//
// The candidates are:
//
//  1. exact: one "$or" branch per distinct condition (a single branch needs
//     no "$or"), when its complexity and size are within SNS's limits;
//  2. flat: event_type in all types, and resource_id in the union of all
//     values when every type has a resource condition (dropped when that
//     is too complex): the form older SNS features and emulators accept;
//  3. none.
//
// Subscribe and UpdateSubscription fall back along the list when SNS
// refuses a policy (its own complexity count, or the per-topic quota of
// filter policies), so filtering degrades instead of failing.
func filterPolicies(groups filter.Groups) []string {
	if len(groups) == 0 {
		return []string{""}
	}
	conds := conditions(groups)
	var out []string
	add := func(p string) {
		if p == "" || len(p) > maxPolicyBytes {
			return
		}
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	add(exactPolicy(conds))
	add(flatPolicy(conds))
	return append(out, "")
}

// typeCondition is what one event type requires of resource_id: nothing
// (any, including a message without the attribute), or one of the values.
type typeCondition struct {
	eventType string
	any       bool
	eq        []string // exact values
	prefixes  []string // prefix values
}

// conditions merges groups per event type, in first-seen order. Merging is
// exact: groups are ORed, so two groups of one type are that type with the
// union of their resource conditions, or with none if either has none.
func conditions(groups filter.Groups) []*typeCondition {
	var order []*typeCondition
	byType := map[string]*typeCondition{}
	for _, g := range groups {
		c := byType[g.EventType]
		if c == nil {
			c = &typeCondition{eventType: g.EventType}
			byType[g.EventType] = c
			order = append(order, c)
		}
		if len(g.Filters) == 0 {
			c.any = true
		}
		for _, f := range g.Filters {
			switch {
			case unpushable(f.ResourceID):
				c.any = true
			case f.FilterType == filter.StartsWithGreedy || f.FilterType == filter.StartsWithLazy:
				// A lazy (shallow) prefix cannot be expressed; the deep
				// prefix is its superset. An empty prefix matches every id,
				// and the empty id too, which travels as a missing
				// attribute: so it must not become a resource_id condition.
				// Prefixes match whole path words (filter.Match): "/a" is
				// the id "/a" or a prefix "/a/", which SNS expresses
				// exactly; a filter already ending in "/" is the prefix.
				switch p := f.ResourceID; {
				case p == "":
					c.any = true
				case strings.HasSuffix(p, "/"):
					c.prefixes = append(c.prefixes, p)
				default:
					c.eq = append(c.eq, p)
					c.prefixes = append(c.prefixes, p+"/")
				}
			default: // Eq and Unspecified; never empty after Validate
				if f.ResourceID == "" {
					c.any = true
				} else {
					c.eq = append(c.eq, f.ResourceID)
				}
			}
		}
	}
	for _, c := range order {
		if c.any {
			c.eq, c.prefixes = nil, nil
			continue
		}
		c.prefixes, c.eq = minimize(c.prefixes, c.eq)
	}
	return order
}

// unpushable reports a resource id SNS may not compare as written: SNS
// documents that '"' and '\' must be escaped twice in attribute policies
// or they never match, and that behaviour cannot be checked against the
// emulator. Such a filter is not pushed down (a superset), so a matching
// message is never dropped by an escaping mismatch.
func unpushable(id string) bool {
	return strings.ContainsAny(id, `"\`)
}

// minimize drops prefixes covered by a shorter prefix and exact values
// covered by a prefix, and sorts both: fewer values keep the policy under
// SNS's complexity limit, and a sorted policy is deterministic.
func minimize(prefixes, eq []string) ([]string, []string) {
	sort.Strings(prefixes)
	var ps []string
	for _, p := range prefixes {
		// Sorted order puts a prefix right before the strings it covers.
		if len(ps) > 0 && strings.HasPrefix(p, ps[len(ps)-1]) {
			continue
		}
		ps = append(ps, p)
	}
	sort.Strings(eq)
	var es []string
	for _, e := range eq {
		if len(es) > 0 && es[len(es)-1] == e {
			continue
		}
		covered := false
		for _, p := range ps {
			if strings.HasPrefix(e, p) {
				covered = true
				break
			}
		}
		if !covered {
			es = append(es, e)
		}
	}
	return ps, es
}

// branch is one conjunction of a policy: event_type in types and, when
// values is not nil, resource_id in values.
type branch struct {
	types    []string
	prefixes []string
	eq       []string
}

func (b branch) valueCount() int { return len(b.prefixes) + len(b.eq) }

func (b branch) combinations() int { return len(b.types) * max(1, b.valueCount()) }

type prefixMatch struct {
	Prefix string `json:"prefix"`
}

func (b branch) object() map[string][]any {
	o := map[string][]any{}
	for _, t := range b.types {
		o[pubsubx.AttrEventType] = append(o[pubsubx.AttrEventType], t)
	}
	for _, p := range b.prefixes {
		o[pubsubx.AttrResourceID] = append(o[pubsubx.AttrResourceID], prefixMatch{p})
	}
	for _, e := range b.eq {
		o[pubsubx.AttrResourceID] = append(o[pubsubx.AttrResourceID], e)
	}
	return o
}

// exactPolicy renders conds as one "$or" branch per distinct resource
// condition: the types without one share a branch, and types with the same
// values share a branch. It returns "" when SNS would refuse the result.
func exactPolicy(conds []*typeCondition) string {
	var branches []branch
	anyTypes := -1
	byValues := map[string]int{}
	for _, c := range conds {
		if c.any {
			if anyTypes < 0 {
				anyTypes = len(branches)
				branches = append(branches, branch{})
			}
			branches[anyTypes].types = append(branches[anyTypes].types, c.eventType)
			continue
		}
		key := strings.Join(c.prefixes, "\x00") + "\x01" + strings.Join(c.eq, "\x00")
		i, ok := byValues[key]
		if !ok {
			i = len(branches)
			byValues[key] = i
			branches = append(branches, branch{prefixes: c.prefixes, eq: c.eq})
		}
		branches[i].types = append(branches[i].types, c.eventType)
	}
	total := 0
	for _, b := range branches {
		total += b.combinations()
	}
	if total > maxPolicyCombinations {
		return ""
	}
	if len(branches) == 1 {
		return render(branches[0].object())
	}
	or := make([]map[string][]any, len(branches))
	for i, b := range branches {
		or[i] = b.object()
	}
	return render(map[string]any{"$or": or})
}

// flatPolicy renders conds without "$or": every type, and the union of the
// resource values when every type has some. It returns "" when even the
// type list alone would be refused (never, with filter.MaxGroups types).
func flatPolicy(conds []*typeCondition) string {
	b := branch{}
	restricted := true
	var prefixes, eq []string
	for _, c := range conds {
		b.types = append(b.types, c.eventType)
		if c.any {
			restricted = false
		}
		prefixes = append(prefixes, c.prefixes...)
		eq = append(eq, c.eq...)
	}
	if restricted {
		b.prefixes, b.eq = minimize(prefixes, eq)
		if b.combinations() > maxPolicyCombinations {
			b.prefixes, b.eq = nil, nil
		}
	}
	if b.combinations() > maxPolicyCombinations {
		return ""
	}
	return render(b.object())
}

func render(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // readable policies; SNS parses any valid JSON
	if err := enc.Encode(v); err != nil {
		return "" // cannot happen: strings and slices of strings only
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
