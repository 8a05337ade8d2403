package delivery

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/heraldevents/herald/internal/strictjson"
)

// parseStored reads a stored event the way Publish writes it
// (cloudevent.Encode): one object of string members without escapes and
// a data object, each member at most once. It gives what the lenient
// decoder gives for such an event in one pass over it, the data checked
// by strictjson.ScanObject and kept as a slice of body; ok is false for
// any other body (one with escapes, say), which the decoder then reads.
// Every stream transport decodes every event it delivers, so this is on
// their hot path; FuzzParseStored holds it to the decoder.
func parseStored(body []byte) (s storedEvent, ok bool) {
	p := storedParser{b: body}
	if !p.byte('{') {
		return s, false
	}
	seen := 0
	for {
		name, ok := p.plain()
		if !ok || !p.byte(':') {
			return s, false
		}
		bit := 0
		switch string(name) {
		case "data":
			bit = 1
			if p.i >= len(p.b) || p.b[p.i] == 'n' {
				return s, false
			}
			sc, ok := strictjson.ScanObject(p.b[p.i:], MaxMessageDepth)
			if !ok {
				return s, false
			}
			s.Data = json.RawMessage(p.b[p.i : p.i+sc.Len : p.i+sc.Len])
			s.scan = sc
			p.i += sc.Len
		default:
			v, ok := p.plain()
			if !ok {
				return s, false
			}
			switch string(name) {
			case "type":
				bit, s.Type = 2, string(v)
			case "subject":
				bit, s.Subject = 4, string(v)
			case "time":
				bit, s.Time = 8, string(v)
			case "publishedat":
				bit, s.PublishedAt = 16, string(v)
			case "principalidentity":
				bit, s.PrincipalIdentity = 32, string(v)
			case "id":
				bit, s.ID = 64, string(v)
			}
		}
		if seen&bit != 0 {
			return s, false // repeated: the decoder says which wins
		}
		seen |= bit
		if p.byte('}') {
			return s, p.i == len(p.b) && s.Type != ""
		}
		if !p.byte(',') {
			return s, false
		}
	}
}

// storedParser is parseStored's cursor. Publish writes no whitespace, so
// none is skipped: a body with some is left to the decoder.
type storedParser struct {
	b []byte
	i int
}

func (p *storedParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plain reads a string without escapes or control characters whose bytes
// are UTF-8, and returns its contents.
func (p *storedParser) plain() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			v := p.b[start:p.i]
			p.i++
			return v, utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}
