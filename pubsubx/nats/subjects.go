package nats

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/heraldevents/herald/filter"
)

// Subject layout (see the package doc, "Filters"):
//
//	PREFIX.TYPE.R0.R1…
//
// TYPE is the encoded event type and R0… are the encoded pieces of the
// resource id split on '/'. A piece keeps letters, digits, '-' and '_' and
// writes every other byte as %XX, so '.', '*', '>', spaces and non-ASCII
// never reach a subject; the empty piece is "~". Splitting is injective
// (joining the pieces with '/' gives the id back), so "" (one empty piece,
// "~"), "/" ("~.~"), "/a" ("~.a") and "/a/" ("~.a.~") all differ, and a
// resource-id prefix that ends at a '/' is a token prefix of every id that
// starts with it.
const (
	emptyToken = "~"
	// truncToken ends a subject whose resource tokens ran over
	// resourceBudget. A lone '%' is never an encoded piece (which writes
	// '%' only as "%25").
	truncToken = "%"
	// resourceBudget bounds the bytes of the resource tokens (with their
	// dots) in a subject, so that a subject always fits NATS's 4 KiB
	// protocol line (max_control_line) with the prefix, the longest event
	// type and a reply subject: a 1 KiB id of escaped bytes would need 3 KiB.
	resourceBudget = 2048
	// maxFilterBytes bounds the filter subjects of one consumer together;
	// past it each group falls back to its event type alone.
	maxFilterBytes = 64 << 10
)

// encodeToken writes s as one subject token.
func encodeToken(s string) string {
	if s == "" {
		return emptyToken
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			sb.WriteByte(c)
			continue
		}
		const hexdigits = "0123456789ABCDEF"
		sb.WriteByte('%')
		sb.WriteByte(hexdigits[c>>4])
		sb.WriteByte(hexdigits[c&15])
	}
	return sb.String()
}

// pieceTokens encodes the '/'-separated pieces of a resource id (or of a
// prefix of one).
func pieceTokens(pieces []string) []string {
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = encodeToken(p)
	}
	return out
}

// fitBudget returns how many of toks fit resourceBudget.
func fitBudget(toks []string) int {
	n := 0
	for i, t := range toks {
		n += len(t) + 1
		if n > resourceBudget {
			return i
		}
	}
	return len(toks)
}

// subjects builds a deployment's subjects and consumer filters.
type subjects struct {
	prefix []string // the subject prefix's tokens
}

func newSubjects(prefix string) subjects {
	return subjects{prefix: strings.Split(prefix, ".")}
}

// base returns PREFIX.TYPE as tokens.
func (s subjects) base(eventType string) []string {
	out := make([]string, 0, len(s.prefix)+8)
	out = append(out, s.prefix...)
	return append(out, encodeToken(eventType))
}

// message returns the subject of an event. Resource tokens past the budget
// are replaced by truncToken; the cut depends only on the tokens before
// it, so ids sharing a prefix are cut alike and filters can follow suit.
func (s subjects) message(eventType, resourceID string) string {
	return strings.Join(s.messageTokens(eventType, resourceID), ".")
}

func (s subjects) messageTokens(eventType, resourceID string) []string {
	toks := pieceTokens(strings.Split(resourceID, "/"))
	out := s.base(eventType)
	if n := fitBudget(toks); n < len(toks) {
		return append(append(out, toks[:n]...), truncToken)
	}
	return append(out, toks...)
}

// all is the pattern of every subject of the deployment.
func (s subjects) all() []string {
	return append(append([]string(nil), s.prefix...), ">")
}

// patterns returns filter patterns (as tokens) whose union holds every
// subject groups match: exact where a filter maps to subjects, a superset
// where it cannot (the handler re-checks):
//
//	no groups                    PREFIX.>
//	group without filters        PREFIX.TYPE.>
//	eq "/a/b"                    PREFIX.TYPE.~.a.b (the message subject)
//	greedy "/a/" or "/a/b"       PREFIX.TYPE.~.a.>  (a partial last piece
//	                             widens to its parent)
//	lazy "/a/"                   PREFIX.TYPE.~.a.* and .*.* and .*.*.*
//	                             (one more piece, with an optional empty
//	                             piece on either side: "/a//b/")
//	lazy "/a/b" (partial piece)  PREFIX.TYPE.~.a.>
//
// A literal part over the resource budget is cut where message subjects
// are cut, and ends in ">".
func (s subjects) patterns(groups filter.Groups) [][]string {
	if len(groups) == 0 {
		return [][]string{s.all()}
	}
	var out [][]string
	for _, g := range groups {
		out = append(out, s.groupPatterns(g)...)
	}
	out = normalize(out)
	size := 0
	for _, p := range out {
		size += len(strings.Join(p, ".")) + 1
	}
	if size > maxFilterBytes {
		out = nil
		for _, g := range groups {
			out = append(out, append(s.base(g.EventType), ">"))
		}
		out = normalize(out)
	}
	return out
}

func (s subjects) groupPatterns(g filter.Group) [][]string {
	base := s.base(g.EventType)
	if len(g.Filters) == 0 {
		return [][]string{append(base, ">")}
	}
	var out [][]string
	for _, f := range g.Filters {
		switch f.FilterType {
		case filter.StartsWithGreedy, filter.StartsWithLazy:
			pieces := strings.Split(f.ResourceID, "/")
			last := pieces[len(pieces)-1]
			lit := pieceTokens(pieces[:len(pieces)-1])
			if n := fitBudget(lit); n < len(lit) {
				out = append(out, join3(base, lit[:n], ">"))
				continue
			}
			if f.FilterType == filter.StartsWithGreedy || last != "" {
				out = append(out, join3(base, lit, ">"))
				continue
			}
			out = append(out, join3(base, lit, "*"), join3(base, lit, "*", "*"), join3(base, lit, "*", "*", "*"))
		default: // Eq, Unspecified
			out = append(out, s.messageTokens(g.EventType, f.ResourceID))
		}
	}
	return out
}

func join3(base, lit []string, tail ...string) []string {
	out := make([]string, 0, len(base)+len(lit)+len(tail))
	out = append(out, base...)
	out = append(out, lit...)
	return append(out, tail...)
}

// covers reports whether every subject b matches is matched by a.
func covers(a, b []string) bool {
	for i, t := range a {
		if i >= len(b) {
			return false
		}
		switch {
		case t == ">":
			return true
		case b[i] == ">":
			return false
		case t == "*":
		case t != b[i]:
			return false
		}
	}
	return len(a) == len(b)
}

// collide reports whether some subject is matched by both a and b.
func collide(a, b []string) bool {
	for i := 0; ; i++ {
		switch {
		case i == len(a) || i == len(b):
			return len(a) == len(b)
		case a[i] == ">" || b[i] == ">":
			return true
		case a[i] == "*" || b[i] == "*" || a[i] == b[i]:
		default:
			return false
		}
	}
}

// joinAll returns one pattern matching everything ps match: their longest
// common literal prefix, short enough to leave every pattern at least one
// token, followed by ">".
func joinAll(ps [][]string) []string {
	if len(ps) == 1 {
		return ps[0]
	}
	limit := len(ps[0]) - 1
	for _, p := range ps[1:] {
		limit = min(limit, len(p)-1)
	}
	n := 0
	for n < limit {
		t := ps[0][n]
		if t == "*" || t == ">" {
			break
		}
		same := true
		for _, p := range ps[1:] {
			if p[n] != t {
				same = false
				break
			}
		}
		if !same {
			break
		}
		n++
	}
	return append(append([]string(nil), ps[0][:n]...), ">")
}

// normalize removes duplicates and patterns another one covers, and joins
// patterns that overlap without one covering the other: JetStream refuses
// overlapping filter subjects on one consumer. The result matches at least
// what ps matches.
func normalize(ps [][]string) [][]string {
	out := append([][]string(nil), ps...)
	for changed := true; changed; {
		changed = false
	scan:
		for i := 0; i < len(out); i++ {
			for j := 0; j < len(out); j++ {
				if i == j {
					continue
				}
				switch {
				case covers(out[i], out[j]): // also drops duplicates
					out = append(out[:j], out[j+1:]...)
					changed = true
					break scan
				case collide(out[i], out[j]):
					joined := joinAll([][]string{out[i], out[j]})
					out[i] = joined
					out = append(out[:j], out[j+1:]...)
					changed = true
					break scan
				}
			}
		}
	}
	return out
}

func subjectStrings(ps [][]string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strings.Join(p, ".")
	}
	return out
}

func tokensOf(subjects []string) [][]string {
	out := make([][]string, len(subjects))
	for i, s := range subjects {
		out[i] = strings.Split(s, ".")
	}
	return out
}

// plainConsumer is a subscription name used as the consumer name as is.
var plainConsumer = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// consumerName maps a subscription name to a JetStream durable name, which
// must not hold '.', '*', '>', '/', '\' or whitespace and becomes a file
// name on the server. Plain names are kept; others keep a readable head
// (other characters as '_') and end in '~' and a hash of the whole name,
// so the mapping is deterministic across processes and no hashed name can
// equal a plain one ('~' is not plain).
func consumerName(sub string) string {
	if plainConsumer.MatchString(sub) {
		return sub
	}
	head := []byte(sub)
	if len(head) > 32 {
		head = head[:32]
	}
	for i, c := range head {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			head[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(sub))
	return string(head) + "~" + hex.EncodeToString(sum[:16])
}
