package rabbit

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/heraldevents/herald/herr"
)

// exchangePattern is what this driver accepts as a deployment's exchange
// name: RabbitMQ's own rule for names (letters, digits, '-', '_', '.')
// without ':' and '|', which separate the parts of the names derived from
// it, so two deployments on one vhost never share a queue.
var exchangePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,200}$`)

// maxQueueName leaves room under RabbitMQ's 255-byte name limit for the
// filter exchanges' "|a"/"|b" suffix.
const maxQueueName = 240

func checkExchange(name string) error {
	if !exchangePattern.MatchString(name) || strings.HasPrefix(name, "amq.") {
		return herr.New(herr.InvalidArgument, "rabbit URL: exchange %q must be 1-200 letters, digits, '-', '_' or '.', not starting with \"amq.\"", name)
	}
	return nil
}

func checkSubscription(name string) error {
	if name == "" || !utf8.ValidString(name) {
		return herr.New(herr.InvalidArgument, "subscription name must be non-empty UTF-8")
	}
	return nil
}

// queueName maps a subscription to its queue: "EXCHANGE:NAME". Queue names
// are vhost-wide, so the exchange is part of it. A name too long for
// RabbitMQ keeps a readable head and ends in a hash of the whole, which
// keeps the mapping deterministic (any process finds the same queue) and
// injective in practice.
func queueName(exchange, sub string) string {
	q := exchange + ":" + sub
	if len(q) <= maxQueueName {
		return q
	}
	sum := sha256.Sum256([]byte(q))
	tail := "~" + hex.EncodeToString(sum[:16])
	head := q[:maxQueueName-len(tail)]
	for !utf8.ValidString(head) { // do not cut a rune in half
		head = head[:len(head)-1]
	}
	return head + tail
}

// filterExchanges are the two names a queue's filter exchange alternates
// between; see the package doc, "Filters".
func filterExchanges(queue string) [2]string {
	return [2]string{queue + "|a", queue + "|b"}
}
