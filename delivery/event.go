package delivery

import (
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/jsonappend"
	"github.com/heraldevents/herald/internal/strictjson"
)

// ConsumerEvent is the notifications API's consumer-side Event ("Consumer gRPC API",
// message Event; the SSE `event` frames carry its JSON form):
//
//	{"event_type":"myapp.user.created","principal_identity":"billing",
//	 "occurred_at":"2024-10-16T14:30:00Z","published_at":"2024-10-16T14:30:01Z",
//	 "message":{"user_id":"123"},"id":"8f4d2a1e-…","resource":{"resource_id":"/users/123"}}
//
// It is derived from the stored CloudEvent (see package cloudevent): type →
// event_type, principalidentity → principal_identity, time → occurred_at,
// publishedat → published_at, data → message, id → id, subject →
// resource.resource_id. Times are RFC 3339 in UTC.
//
// id and resource are Herald's additions to the published Event, as
// members the published schemas allow (additional properties; the gRPC
// Event's fields 100 and 101): delivery is at least once, and the id,
// the same on every delivery of an event, is what lets a consumer drop
// the duplicates.
type ConsumerEvent struct {
	EventType         string          `json:"event_type"`
	PrincipalIdentity string          `json:"principal_identity"`
	OccurredAt        time.Time       `json:"occurred_at"`
	PublishedAt       time.Time       `json:"published_at"`
	Message           json.RawMessage `json:"message"`
	// ID is the event's id, stamped at publish (a UUID); "" only for an
	// event stored without one.
	ID string `json:"id,omitempty"`
	// Resource is the event's resource; the zero Resource (left out of
	// the JSON form) when it was published without one.
	Resource EventResource `json:"resource,omitzero"`
	// scan is strictjson.ScanObject's result for Message (at
	// MaxMessageDepth) when the event was decoded in one pass, else zero.
	scan strictjson.Scan
}

// EventResource is the resource of a delivered event: the notifications
// API's EventResource.
type EventResource struct {
	// ResourceID is the path-like id the event was published with.
	ResourceID string `json:"resource_id"`
}

// MessageChecked reports that Message is one JSON object, nested at most
// MaxMessageDepth deep with nothing after it, that strictjson.ScanObject
// found sound while the event was decoded: a transport that re-encodes
// it (gRPC's Struct, structjson.WireChecked) need not check it again.
func (e *ConsumerEvent) MessageChecked() bool {
	return e.scan.Len > 0 && e.scan.Len == len(e.Message)
}

// storedEvent is the part of an encoded CloudEvent a consumer sees.
type storedEvent struct {
	ID                string          `json:"id"`
	Type              string          `json:"type"`
	Subject           string          `json:"subject"`
	Time              string          `json:"time"`
	PublishedAt       string          `json:"publishedat"`
	PrincipalIdentity string          `json:"principalidentity"`
	Data              json.RawMessage `json:"data"`
	scan              strictjson.Scan // parseStored's check of Data
}

// lenientStored decodes a stored event as encoding/json would (a repeated
// member: the last wins; invalid UTF-8 let through), with the faster
// decoder of go-json-experiment: on a delivered event's path it takes a
// quarter of encoding/json's time.
var lenientStored = []jsonv2.Options{jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)}

// DecodeConsumerEvent converts an encoded CloudEvent (as Publish stores it)
// into the consumer Event. A body that is not such an event is
// herr.Internal: only Herald writes what a queue holds.
func DecodeConsumerEvent(body []byte) (*ConsumerEvent, error) {
	s, ok := parseStored(body)
	if !ok {
		s = storedEvent{} // nothing of the one-pass reading, its scan least of all
		if err := jsonv2.Unmarshal(body, &s, lenientStored...); err != nil || s.Type == "" {
			return nil, herr.Wrap(herr.Internal, err, "a stored event is not a CloudEvent")
		}
	}
	out := &ConsumerEvent{
		EventType: s.Type, PrincipalIdentity: s.PrincipalIdentity,
		Message: s.Data, ID: s.ID, Resource: EventResource{ResourceID: s.Subject}, scan: s.scan,
	}
	if len(out.Message) == 0 || string(out.Message) == "null" {
		out.Message = json.RawMessage("{}")
	}
	var err error
	if out.OccurredAt, err = parseTime(s.Time); err != nil {
		return nil, herr.Wrap(herr.Internal, err, "a stored event has a bad time")
	}
	if out.PublishedAt, err = parseTime(s.PublishedAt); err != nil {
		return nil, herr.Wrap(herr.Internal, err, "a stored event has a bad publishedat")
	}
	return out, nil
}

// eventType returns the CloudEvent type of an encoded event, or "" when
// the body is not an event.
func eventType(body []byte) string {
	var s struct {
		Type string `json:"type"`
	}
	if jsonv2.Unmarshal(body, &s, lenientStored...) != nil {
		return ""
	}
	return s.Type
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err
}

// CheckText refuses, as herr.Malformed (HTTP 400) naming field, a value
// that is not valid UTF-8 or holds a control character (C0, DEL or C1:
// U+0000–U+001F, U+007F–U+009F). It guards the ids, worker ids and lease
// ids a client sends: none has a use for such characters, and in a log
// line or a store key they only hide or forge text. The value is never
// quoted back.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		return herr.New(herr.Malformed, "%s must be valid UTF-8 without control characters (U+0000–U+001F, U+007F–U+009F)", field)
	}
	return nil
}

// deliverable checks a decoded event's message against the publish rules
// every transport relies on (Event.Validate): a stored event that breaks
// them (written before they were enforced) is poison.
func (e *ConsumerEvent) deliverable() error {
	if len(e.Message) == 0 || string(e.Message) == "null" {
		return nil
	}
	// A message the decoding has scanned is not scanned again: the scan
	// is the one Validate runs.
	return (&Event{EventType: e.EventType, Message: e.Message}).ValidateScanned(e.scan)
}

// AppendJSON appends e's JSON form to dst: byte for byte what json.Marshal
// writes for it (TestConsumerEventAppendJSONMatchesMarshal), without
// json.Marshal's reflection and its second scan and compaction of the
// message. Streams write every delivered event with it. It fails only
// where json.Marshal does (a time outside years 0–9999).
func (e *ConsumerEvent) AppendJSON(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"event_type":`...)
	dst = jsonappend.String(dst, e.EventType)
	dst = append(dst, `,"principal_identity":`...)
	dst = jsonappend.String(dst, e.PrincipalIdentity)
	dst = append(dst, `,"occurred_at":`...)
	dst, ok := jsonappend.Time(dst, e.OccurredAt)
	if ok {
		dst = append(dst, `,"published_at":`...)
		dst, ok = jsonappend.Time(dst, e.PublishedAt)
	}
	if !ok {
		// json.Marshal's own path, and its error naming the problem.
		b, err := json.Marshal(e)
		if err != nil {
			return dst[:start], err
		}
		return append(dst[:start], b...), nil
	}
	dst = append(dst, `,"message":`...)
	dst = jsonappend.Raw(dst, e.Message)
	if e.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = jsonappend.String(dst, e.ID)
	}
	if e.Resource != (EventResource{}) {
		dst = append(dst, `,"resource":{"resource_id":`...)
		dst = jsonappend.String(dst, e.Resource.ResourceID)
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}
