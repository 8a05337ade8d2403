package publish

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/heraldevents/herald/internal/strictjson"
)

// appendResults appends the batch answer {"results":[Result…]} to dst:
// the bytes json.Marshal writes for it, without json.Marshal's reflection
// and its second scan and compaction of every echoed message (a tenth of a
// batch publish's CPU). Strings and messages that need escaping or
// compacting take json.Marshal's own path, so the output stays byte for
// byte what it was (TestAppendResultsMatchesMarshal).
func appendResults(dst []byte, results []Result) []byte {
	dst = append(dst, `{"results":[`...)
	for i := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendResult(dst, &results[i])
	}
	return append(dst, "]}"...)
}

// appendSingle appends the single answer {"result":Result} to dst.
func appendSingle(dst []byte, r *Result) []byte {
	dst = append(dst, `{"result":`...)
	dst = appendResult(dst, r)
	return append(dst, '}')
}

func appendResult(dst []byte, r *Result) []byte {
	dst = append(dst, `{"event":`...)
	if r.Event == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendEvent(dst, r.Event)
	}
	dst = append(dst, `,"success":`...)
	dst = strconv.AppendBool(dst, r.Success)
	if r.FailureReason != "" {
		dst = append(dst, `,"failure_reason":`...)
		dst = appendString(dst, r.FailureReason)
	}
	return append(dst, '}')
}

func appendEvent(dst []byte, e *WireEvent) []byte {
	dst = append(dst, `{"event_type":`...)
	dst = appendString(dst, e.EventType)
	if len(e.Message) > 0 {
		dst = append(dst, `,"message":`...)
		dst = appendMessage(dst, e.Message)
	}
	if e.OccurredAt != "" {
		dst = append(dst, `,"occurred_at":`...)
		dst = appendString(dst, e.OccurredAt)
	}
	if e.Resource != nil {
		dst = append(dst, `,"resource":{"resource_id":`...)
		dst = appendString(dst, e.Resource.ResourceID)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendString appends s as json.Marshal writes a string. Printable ASCII
// other than '"', '\\' and the HTML characters '<', '>' and '&' (which
// json.Marshal escapes) is copied; anything else goes through
// json.Marshal.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendMessage appends a message (valid JSON: it was decoded as a
// json.RawMessage) as json.Marshal writes a json.RawMessage: compacted,
// with '<', '>', '&', U+2028 and U+2029 escaped. A message that is
// already compact and holds none of those (0xE2 starts U+2028 and
// U+2029) is copied as it is; any other goes through json.Marshal.
func appendMessage(dst []byte, m json.RawMessage) []byte {
	// One vectorized pass per byte value rather than a loop over bytes.
	if bytes.IndexByte(m, '<') >= 0 || bytes.IndexByte(m, '>') >= 0 || bytes.IndexByte(m, '&') >= 0 ||
		bytes.IndexByte(m, 0xE2) >= 0 || strictjson.SpaceBetweenTokens(m) {
		return appendMarshaled(dst, m)
	}
	return append(dst, m...)
}

func appendMarshaled(dst []byte, m json.RawMessage) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		// Not reachable for a decoded message; keep the answer JSON.
		return append(dst, "{}"...)
	}
	return append(dst, b...)
}
