package cloudevent

import (
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
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
	// TraceParent and TraceState are the W3C trace context of the
	// publisher's span, written as the CloudEvents distributed-tracing
	// extension attributes traceparent and tracestate; "" writes none.
	TraceParent string
	TraceState  string
}

// Encode returns the structured JSON encoding of in, built and validated
// with the CloudEvents SDK. Data is embedded byte for byte: the caller has
// validated that it is a JSON object. Times are written in UTC.
//
// It calls the SDK's own writer (Event.MarshalJSON) rather than
// json.Marshal, which would re-scan, compact and HTML-escape the whole
// output a second time on the publish hot path.
func Encode(in Input) ([]byte, error) {
	if in.Time.IsZero() {
		return nil, fmt.Errorf("cloudevent: time is required")
	}
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(in.ID)
	e.SetSource(in.Source)
	e.SetType(in.Type)
	if in.Subject != "" {
		e.SetSubject(in.Subject)
	}
	e.SetTime(in.Time.UTC())
	e.SetExtension(ExtPublishedAt, in.PublishedAt.UTC())
	if in.PrincipalIdentity != "" {
		e.SetExtension(ExtPrincipalIdentity, in.PrincipalIdentity)
	}
	if in.TraceParent != "" {
		e.SetExtension(ExtTraceParent, in.TraceParent)
		if in.TraceState != "" {
			e.SetExtension(ExtTraceState, in.TraceState)
		}
	}
	e.SetDataContentType(cloudevents.ApplicationJSON)
	// Set the encoded data directly: SetData would base64 a []byte and
	// re-encode a json.RawMessage.
	e.DataEncoded = in.Data
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("cloudevent: %w", err)
	}
	return e.MarshalJSON()
}
