package delivery

import (
	"encoding/json"
	"time"

	"github.com/heraldevents/herald/herr"
)

// ConsumerEvent is seed 002's consumer-side Event ("Consumer gRPC API",
// message Event; the SSE `event` frames carry its JSON form):
//
//	{"event_type":"myapp.user.created","principal_identity":"billing",
//	 "occurred_at":"2024-10-16T14:30:00Z","published_at":"2024-10-16T14:30:01Z",
//	 "message":{"user_id":"123"}}
//
// It is derived from the stored CloudEvent (see package cloudevent): type →
// event_type, principalidentity → principal_identity, time → occurred_at,
// publishedat → published_at, data → message. Times are RFC 3339 in UTC.
// ResourceID (the CloudEvent subject) is not part of seed 002's Event; it is
// kept for the dead-letter items, which carry it beside the event.
type ConsumerEvent struct {
	EventType         string          `json:"event_type"`
	PrincipalIdentity string          `json:"principal_identity"`
	OccurredAt        time.Time       `json:"occurred_at"`
	PublishedAt       time.Time       `json:"published_at"`
	Message           json.RawMessage `json:"message"`
	ResourceID        string          `json:"-"`
}

// storedEvent is the part of an encoded CloudEvent a consumer sees.
type storedEvent struct {
	Type              string          `json:"type"`
	Subject           string          `json:"subject"`
	Time              string          `json:"time"`
	PublishedAt       string          `json:"publishedat"`
	PrincipalIdentity string          `json:"principalidentity"`
	Data              json.RawMessage `json:"data"`
}

// DecodeConsumerEvent converts an encoded CloudEvent (as Publish stores it)
// into the consumer Event. A body that is not such an event is
// herr.Internal: only Herald writes what a queue holds.
func DecodeConsumerEvent(body []byte) (*ConsumerEvent, error) {
	var s storedEvent
	if err := json.Unmarshal(body, &s); err != nil || s.Type == "" {
		return nil, herr.Wrap(herr.Internal, err, "a stored event is not a CloudEvent")
	}
	out := &ConsumerEvent{
		EventType: s.Type, PrincipalIdentity: s.PrincipalIdentity,
		Message: s.Data, ResourceID: s.Subject,
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
	if json.Unmarshal(body, &s) != nil {
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
