package publish

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/internal/strictjson"
)

// parseBatch decodes a batch body of the common shape in one pass:
// exactly {"events":[Event, …]} with at least one event, each event an
// object of the four documented members and idempotency_key at most once
// each, event_type, occurred_at, idempotency_key and resource_id strings without escapes or control
// characters, resource an object holding at most resource_id, and every
// message an object with none of CheckObject's problems (it is checked
// here, in the same pass that finds its end, and the event remembers
// the check: see WireEvent.scan). Messages are slices of body, not copies.
//
// ok is false for any other body, valid or not: the caller then decodes
// it as before (strictjson.Unmarshal), which gives the same events for
// every body parseBatch accepts (FuzzParseBatch holds them equal) and the
// exact error for the rest.
func parseBatch(body []byte) (events []WireEvent, ok bool) {
	p := batchParser{b: body}
	if !p.punct('{') || !p.name("events") || !p.punct('[') {
		return nil, false
	}
	// About a kilobyte of body per event in a typical batch; the slice
	// grows if not.
	events = make([]WireEvent, 0, min(delivery.MaxBatchEvents, len(body)/512+1))
	types := map[string]string{} // a batch repeats a few event types
	for {
		var e WireEvent
		if !p.event(&e, types) {
			return nil, false
		}
		events = append(events, e)
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		break
	}
	if !p.punct(']') || !p.punct('}') {
		return nil, false
	}
	p.space()
	return events, p.i == len(p.b)
}

// batchParser is parseBatch's cursor over the body.
type batchParser struct {
	b []byte
	i int
	// resources holds the events' WireResources, allocated 32 at a time
	// rather than one by one; a full chunk is left to the events that
	// point into it and a new one started, never grown.
	resources []WireResource
}

// newResource returns a WireResource of p's current chunk.
func (p *batchParser) newResource(id string) *WireResource {
	if len(p.resources) == cap(p.resources) {
		p.resources = make([]WireResource, 0, 32)
	}
	p.resources = append(p.resources, WireResource{ResourceID: id})
	return &p.resources[len(p.resources)-1]
}

func (p *batchParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
			continue
		}
		return
	}
}

// punct skips whitespace and then c.
func (p *batchParser) punct(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// name reads the member name want and its colon.
func (p *batchParser) name(want string) bool {
	s, ok := p.plain()
	return ok && string(s) == want && p.punct(':')
}

// plain skips whitespace and reads a string without escapes or control
// characters whose bytes are valid UTF-8, returning its contents.
func (p *batchParser) plain() ([]byte, bool) {
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			s := p.b[start:j]
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// Members of an event, for the repeat check.
const (
	hasType = 1 << iota
	hasMessage
	hasOccurredAt
	hasResource
	hasKey
)

func (p *batchParser) event(e *WireEvent, types map[string]string) bool {
	if !p.punct('{') {
		return false
	}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true
	}
	seen := 0
	for {
		name, ok := p.plain()
		if !ok || !p.punct(':') {
			return false
		}
		var bit int
		switch string(name) {
		case "event_type":
			bit = hasType
			s, ok := p.plain()
			if !ok {
				return false
			}
			t, known := types[string(s)]
			if !known {
				t = string(s)
				types[t] = t
			}
			e.EventType = t
		case "message":
			bit = hasMessage
			p.space()
			sc, ok := strictjson.ScanObject(p.b[p.i:], delivery.MaxMessageDepth)
			if !ok {
				return false
			}
			e.Message = json.RawMessage(p.b[p.i : p.i+sc.Len : p.i+sc.Len])
			e.scan = sc
			p.i += sc.Len
		case "occurred_at":
			bit = hasOccurredAt
			s, ok := p.plain()
			if !ok {
				return false
			}
			e.OccurredAt = string(s)
		case "idempotency_key":
			bit = hasKey
			s, ok := p.plain()
			if !ok {
				return false
			}
			k := string(s)
			e.IdempotencyKey = &k
		case "resource":
			bit = hasResource
			r, ok := p.resource()
			if !ok {
				return false
			}
			e.Resource = r
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

// resource reads {"resource_id": "…"} or {}.
func (p *batchParser) resource() (*WireResource, bool) {
	if !p.punct('{') {
		return nil, false
	}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return p.newResource(""), true
	}
	if !p.name("resource_id") {
		return nil, false
	}
	s, ok := p.plain()
	if !ok || !p.punct('}') {
		return nil, false
	}
	return p.newResource(string(s)), true
}
