// Package cloudevent builds the CloudEvents 1.0 structured-JSON form in which
// Herald delivers events (the durable-consumer API, "200 response"), and formats the
// per-consumer `sequence` attribute.
//
// An event is encoded once, at publish time, by Encode, which appends the
// bytes the CloudEvents SDK (github.com/cloudevents/sdk-go/v2) would write
// at a fraction of its cost; the SDK is the reference a test and a fuzz
// target hold Encode to. Decode reads with the SDK. What travels through
// the broker and sits in a lease is that encoding. The `sequence` attribute depends on the consumer, so it is
// spliced in front of the encoded object at delivery with
// AppendWithSequence, without decoding and re-encoding the event.
//
// Attribute mapping (Herald publish request → CloudEvents attribute):
//
//	event_type              → type
//	resource.resource_id    → subject (omitted when empty)
//	occurred_at             → time
//	message                 → data (datacontenttype application/json)
//	server-generated UUID   → id
//	deployment source       → source
//	publish time            → publishedat (extension, RFC 3339 timestamp)
//	publishing principal    → principalidentity (extension, string)
//	consumer position       → sequence (extension, added at delivery)
package cloudevent

import (
	"encoding/json"
	"fmt"
	"strconv"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// Extension attribute names. CloudEvents extension names are lower-case
// letters and digits only, so the notifications API's snake_case names lose their '_'.
const (
	ExtPublishedAt       = "publishedat"
	ExtPrincipalIdentity = "principalidentity"
	ExtSequence          = "sequence"
	// ExtTraceParent and ExtTraceState are the CloudEvents
	// distributed-tracing extension: the publisher's W3C trace context.
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

// Decode parses an encoded event with the SDK. Tests and tools use it; the
// delivery path does not.
func Decode(b []byte) (*cloudevents.Event, error) {
	e := cloudevents.New()
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// SequenceEpoch is the leading field of every sequence this version of
// Herald issues.
const SequenceEpoch = "001"

// FormatSequence renders consumer position pos (1-based) as a sequence:
// "001." followed by pos in 20 zero-padded decimal digits, for example
// "001.00000000000000000042". Two sequences of one consumer compare as
// strings in the same order as their positions. The epoch in front leaves
// room for a future format that still sorts after this one.
func FormatSequence(pos int64) string {
	var b [24]byte
	copy(b[:], SequenceEpoch+".")
	for i := len(b) - 1; i >= 4; i-- {
		b[i] = byte('0' + pos%10)
		pos /= 10
	}
	return string(b[:])
}

// ParseSequence is the inverse of FormatSequence.
func ParseSequence(s string) (int64, error) {
	if len(s) != 24 || s[:4] != SequenceEpoch+"." {
		return 0, fmt.Errorf("sequence %q is not of the form %s.<20 digits>", s, SequenceEpoch)
	}
	// strconv alone would take a sign ("-000…42"): FormatSequence never
	// writes one, and a sequence that compares wrongly as a string must
	// not parse.
	for i := 4; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("sequence %q is not of the form %s.<20 digits>", s, SequenceEpoch)
		}
	}
	return strconv.ParseInt(s[4:], 10, 64)
}

// AppendWithSequence appends to dst the encoded event body with a
// "sequence" attribute for position pos inserted as its first member.
// body must be a JSON object as produced by Encode.
func AppendWithSequence(dst, body []byte, pos int64) []byte {
	dst = append(dst, `{"sequence":"`...)
	dst = append(dst, FormatSequence(pos)...)
	dst = append(dst, '"')
	if len(body) > 2 { // not "{}"
		dst = append(dst, ',')
	}
	return append(dst, body[1:]...)
}
