// Package jsonappend appends JSON values to a byte slice exactly as
// encoding/json's Marshal writes them, without its reflection and without
// its second scan and compaction of every json.RawMessage. Herald's hot
// answers and frames (the publish answer, SSE and WebSocket events) are
// written with it; their tests compare them byte for byte with
// json.Marshal. A value that needs escaping or compacting takes
// json.Marshal's own path, so the output never differs.
package jsonappend

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/heraldevents/herald/internal/strictjson"
)

// String appends s as json.Marshal writes a string. Printable ASCII other
// than '"', '\\' and the HTML characters '<', '>' and '&' (which
// json.Marshal escapes) is copied; anything else goes through
// json.Marshal.
func String(dst []byte, s string) []byte {
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

// Raw appends m, which must be valid JSON (it was decoded as a
// json.RawMessage or checked by strictjson), as json.Marshal writes a
// json.RawMessage: compacted, with '<', '>', '&', U+2028 and U+2029
// escaped. A value that is already compact and holds none of those (0xE2
// starts U+2028 and U+2029) is copied as it is; any other goes through
// json.Marshal. A nil m is written as null, as json.Marshal does; an
// empty one, which json.Marshal refuses, as {}.
func Raw(dst []byte, m json.RawMessage) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	// One vectorized pass per byte value rather than a loop over bytes.
	if bytes.IndexByte(m, '<') >= 0 || bytes.IndexByte(m, '>') >= 0 || bytes.IndexByte(m, '&') >= 0 ||
		bytes.IndexByte(m, 0xE2) >= 0 || strictjson.SpaceBetweenTokens(m) {
		b, err := json.Marshal(m)
		if err != nil {
			// Not reachable for valid JSON; keep the output JSON.
			return append(dst, "{}"...)
		}
		return append(dst, b...)
	}
	return append(dst, m...)
}

// Time appends t as json.Marshal writes a time.Time: RFC 3339 with
// nanoseconds, quoted. ok is false, and dst unchanged, for a time
// json.Marshal refuses (a year outside 0–9999, an odd zone offset).
func Time(dst []byte, t time.Time) (out []byte, ok bool) {
	if t.Location() != time.UTC {
		b, err := t.MarshalJSON()
		if err != nil {
			return dst, false
		}
		return append(dst, b...), true
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}
