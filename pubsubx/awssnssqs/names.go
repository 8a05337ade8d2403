package awssnssqs

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// SQS queue names are 1–80 characters of [A-Za-z0-9_-] (".fifo" aside).
const maxQueueNameLength = 80

// Lengths of the parts of a queue name; see QueueName.
const (
	queueTopicPartLength = 16
	queueHashLength      = 16 // hex digits: 64 bits of SHA-256
	// What is left for the subscription part: 80 - 16 - 1 - 1 - 16 = 46,
	// exactly the length of Herald's "herald-dc-<uuid>" names.
	queueSubPartLength = maxQueueNameLength - queueTopicPartLength - queueHashLength - 2
)

// topicNamePattern is the rule for a standard SNS topic name.
var topicNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// QueueName returns the SQS queue name that backs subscription sub of topic:
//
//	sanitize(topic)[:16] + "-" + sanitize(sub)[:46] + "-" + hex(sha256(topic NUL sub))[:16]
//
// where sanitize replaces every character outside [A-Za-z0-9_-] with '_'. The
// result is at most 80 characters, as SQS requires, and the same for every
// client, so any process can find a subscription's queue by name.
//
// The hash is always appended, not only when the name is too long: queue
// names are account-wide, so the topic is part of the key, and neither
// joining topic and sub with '-' nor sanitizing '.' to '_' is injective
// ("a-b"+"c" and "a"+"b-c"; "q.1" and "q_1"). The readable prefix lets
// operators and IAM policies recognise a deployment's queues
// ("arn:aws:sqs:*:*:<topic prefix>-*").
func QueueName(topic, sub string) string {
	sum := sha256.Sum256([]byte(topic + "\x00" + sub))
	return truncate(sanitize(topic), queueTopicPartLength) + "-" +
		truncate(sanitize(sub), queueSubPartLength) + "-" +
		hex.EncodeToString(sum[:])[:queueHashLength]
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// truncate cuts s to n bytes; s is ASCII after sanitize, so no character
// is split.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// tagValuePattern is what an SQS tag value may hold (a subset: no
// whitespace, which we never need). Tag values are at most 256 characters.
var tagValuePattern = regexp.MustCompile(`^[A-Za-z0-9_.:/=+\-@]{1,256}$`)
