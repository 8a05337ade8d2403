package cloudevent

import (
	"encoding/json"
	"errors"
	"net/url"
	"time"
	"unicode/utf8"
)

// Input is a validated event as published.
type Input struct {
	ID                string          // unique event id (a UUID)
	Source            string          // URI-reference naming the deployment
	Type              string          // event_type
	Subject           string          // resource id; "" for none
	Time              time.Time       // occurred_at
	PublishedAt       time.Time       // stamped by the publish handler
	PrincipalIdentity string          // who published
	Data              json.RawMessage // message: a JSON object, already validated
}

// Encode returns the structured JSON encoding of in. Data is embedded byte
// for byte: the caller has validated that it is a JSON object.
//
// The output is what the SDK's event.WriteJson produces for the same event
// (attribute order included), written straight into one buffer of the right
// size. Building an SDK event and marshalling it cost a URL parse, a map of
// extensions, a growing stream buffer and a copy into a second growing
// buffer for every published event; this is the publish hot path.
func Encode(in Input) ([]byte, error) {
	if in.ID == "" || in.Type == "" || in.Source == "" {
		return nil, errors.New("cloudevent: id, source and type are required")
	}
	if _, err := url.Parse(in.Source); err != nil {
		return nil, errors.New("cloudevent: source is not a URI-reference")
	}
	if in.Time.IsZero() {
		return nil, errors.New("cloudevent: time is required")
	}
	b := make([]byte, 0, 256+len(in.ID)+len(in.Source)+len(in.Type)+len(in.Subject)+len(in.PrincipalIdentity)+len(in.Data))
	b = append(b, `{"specversion":"1.0","id":`...)
	b = appendString(b, in.ID)
	b = append(b, `,"source":`...)
	b = appendString(b, in.Source)
	b = append(b, `,"type":`...)
	b = appendString(b, in.Type)
	if in.Subject != "" {
		b = append(b, `,"subject":`...)
		b = appendString(b, in.Subject)
	}
	b = append(b, `,"datacontenttype":"application/json","time":`...)
	b = appendTime(b, in.Time)
	if len(in.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, in.Data...)
	}
	// Extensions, in the SDK's (sorted) order.
	if in.PrincipalIdentity != "" {
		b = append(b, `,"`+ExtPrincipalIdentity+`":`...)
		b = appendString(b, in.PrincipalIdentity)
	}
	b = append(b, `,"`+ExtPublishedAt+`":`...)
	b = appendTime(b, in.PublishedAt)
	return append(b, '}'), nil
}

// appendTime appends t as a JSON string in the SDK's timestamp form (RFC
// 3339 in UTC, with as many fractional digits as needed).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendString appends s as a JSON string. It escapes what JSON requires
// (quote, backslash, control characters) and replaces invalid UTF-8 with
// U+FFFD, as encoding/json does; unlike encoding/json it leaves <, > and &
// alone, as the SDK does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
