package gcppubsub

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/heraldevents/herald/herr"
)

// Pub/Sub resource ids (topics and subscriptions) are 3–255 characters of
// letters, digits and "-_.~+%", start with a letter and must not start with
// "goog".
const maxIDLen = 255

// genSep separates a subscription's base id from its generation number.
const genSep = "~g"

// maxBaseLen leaves room for genSep and the 20 digits of any uint64.
const maxBaseLen = maxIDLen - len(genSep) - 20

// hashHexLen is how many hex digits of SHA-256 a shortened base keeps
// (128 bits: collisions are not a practical concern).
const hashHexLen = 32

// escapeID maps s to Pub/Sub id characters. Letters, digits and "-_.+"
// pass unchanged; every other byte, '~' and '%' included, becomes %XX. The
// mapping is injective and never produces '~', which baseID uses as its
// separator.
func escapeID(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '+':
			sb.WriteByte(c)
		default:
			sb.WriteByte('%')
			sb.WriteByte(hexDigits[c>>4])
			sb.WriteByte(hexDigits[c&0xF])
		}
	}
	return sb.String()
}

// baseID returns the id every generation of Herald subscription name on
// topicID starts with: escapeID(topicID) + "~" + escapeID(name). The topic
// is part of it because subscription ids are unique per project, not per
// topic, and two deployments may share a project. Since neither escaped
// part contains '~', different (topic, name) pairs give different ids.
//
// A base longer than maxBaseLen keeps its first bytes and ends in "~~"
// and 32 hex digits of SHA-256 over topic and name; an unshortened base
// never contains "~~", so the two forms cannot collide.
func baseID(topicID, name string) string {
	b := escapeID(topicID) + "~" + escapeID(name)
	if len(b) <= maxBaseLen {
		return b
	}
	sum := sha256.Sum256([]byte(topicID + "\x00" + name))
	return b[:maxBaseLen-2-hashHexLen] + "~~" + hex.EncodeToString(sum[:])[:hashHexLen]
}

// genID returns the subscription id of generation gen of base.
func genID(base string, gen uint64) string {
	return base + genSep + strconv.FormatUint(gen, 10)
}

// parseGen reports the generation number of subscription id if it is a
// generation of base: base, genSep, then decimal digits without a leading
// zero, and nothing else.
func parseGen(base, id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, base+genSep)
	if !ok || rest == "" || rest[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

// checkTopicID validates a topic id by Pub/Sub's rules, so that a bad URL
// fails when it is opened rather than at the first publish.
func checkTopicID(id string) error {
	if len(id) < 3 || len(id) > maxIDLen {
		return herr.New(herr.InvalidArgument, "gcppubsub: topic id %q must be 3-255 characters", id)
	}
	if c := id[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') || strings.HasPrefix(strings.ToLower(id), "goog") {
		return herr.New(herr.InvalidArgument, "gcppubsub: topic id %q must start with a letter and not with \"goog\"", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~+%", c) >= 0) {
			return herr.New(herr.InvalidArgument, "gcppubsub: topic id %q may hold only letters, digits and -_.~+%%", id)
		}
	}
	return nil
}

// checkProjectID validates a project id loosely (Google's rules are 6–30
// lower-case letters, digits and hyphens, but emulators accept more): it
// must be non-empty and hold no '/'.
func checkProjectID(id string) error {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return herr.New(herr.InvalidArgument, "gcppubsub: project id %q is not valid", id)
	}
	return nil
}
