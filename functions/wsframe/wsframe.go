// Package wsframe defines Herald's WebSocket frame protocol: the JSON text
// frames a client and the WebSocket bridge exchange to carry the notifications API's
// streams (ConsumeNonDurableEvents, ConsumeDurableEventsWithAcks and
// ManageDeadLetteredEvents) over one WebSocket. Both bridges speak it: the
// gorilla/websocket loop of the local adapter and Cloud Run (package
// functions/wsbridge) and the API Gateway WebSocket Lambda (package
// functions/wslambda). docs/websocket.md is the user's reference, with
// examples; this package is the one definition of the shapes and limits.
//
// Every frame is one JSON object in one text message with a "type" member.
// A client frame may carry "id" (1–64 printable ASCII characters; an empty
// id counts as none), which the server copies into the frames that answer
// it (connected, settled, outcome, pong, error — an error frame too when
// the frame was refused, unless its id was the problem), so a client can
// correlate without counting.
//
// Client frames: open, demand, ack, nack, extend, actions, ping.
// Server frames: connected, event, dead_lettered_event, settled, extended,
// outcome, idle, pong, error.
//
// Flow control is by demand: the server sends an event (or a dead-lettered
// event) only against credit a demand frame gave; credit adds up to
// MaxCredit. Independently, a durable stream never holds more than the
// session's unsettled limit (delivery.StreamConfig.MaxUnsettled, default
// delivery.DefaultMaxUnsettled = 100) of delivered, unsettled events.
package wsframe

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
	"github.com/heraldevents/herald/leasestore"
)

// Subprotocol is the WebSocket subprotocol name of this protocol. A client
// may offer it in Sec-WebSocket-Protocol; the server then selects it.
const Subprotocol = "herald.v1"

// Limits of the protocol (docs/websocket.md, "Limits").
const (
	// MaxFrameBytes is the largest client frame, in bytes. A larger one
	// closes the connection with 1009 (message too big).
	MaxFrameBytes = 64 << 10
	// MaxDemand is the largest n of one demand frame; n must be 1–MaxDemand.
	MaxDemand = 1000
	// MaxCredit is the most credit a connection may hold: a demand frame
	// that would pass it is refused (422) and changes nothing.
	MaxCredit = 10000
	// MaxTags is the most delivery tags of one ack, nack or extend frame.
	MaxTags = 1000
	// MaxExtendSeconds is the largest seconds of an extend frame; seconds
	// must be 1–MaxExtendSeconds, as the durable-consumer API's extend
	// visibility (leasestore.MaxLeaseVisibility).
	MaxExtendSeconds = int64(leasestore.MaxLeaseVisibility / time.Second)
	// MaxNackDelaySeconds is the largest delay of a nack frame (0–43,200
	// s, 12 hours), as a failed acknowledgement's retryAfter
	// (delivery.MaxNackDelay).
	MaxNackDelaySeconds = int64(delivery.MaxNackDelay / time.Second)
	// MaxActions is the most actions of one actions frame
	// (delivery.MaxDeadLetterActions).
	MaxActions = delivery.MaxDeadLetterActions
	// MaxIDLength is the longest correlation id.
	MaxIDLength = 64
)

// Client frame types.
const (
	TypeOpen    = "open"
	TypeDemand  = "demand"
	TypeAck     = "ack"
	TypeNack    = "nack"
	TypeExtend  = "extend"
	TypeActions = "actions"
	TypePing    = "ping"
)

// Server frame types.
const (
	TypeConnected         = "connected"
	TypeEvent             = "event"
	TypeDeadLetteredEvent = "dead_lettered_event"
	TypeSettled           = "settled"
	TypeExtended          = "extended"
	TypeOutcome           = "outcome"
	TypeIdle              = "idle"
	TypePong              = "pong"
	TypeError             = "error"
)

// Stream kinds an open frame names.
const (
	// StreamNonDurable is ConsumeNonDurableEvents: a fresh non-durable queue
	// with filter_groups, or the one reconnect_token names. Events are
	// acknowledged once sent; ack and nack frames do not apply.
	StreamNonDurable = "non_durable"
	// StreamDurable is ConsumeDurableEventsWithAcks on queue_id: every
	// event carries a delivery tag to ack or nack.
	StreamDurable = "durable"
	// StreamDeadLetters is ManageDeadLetteredEvents: every dead letter is
	// shown with a delivery tag that actions frames name. Needs
	// inspect-and-replay-all-dlq.
	StreamDeadLetters = "dead_letters"
)

// Close codes the server ends a connection with. 1000 is a normal close
// (the client closed, or the server after a client's close); 1001 the
// server is going away (shutdown); 1009 a client frame over MaxFrameBytes.
// A fatal error frame is followed by a close with CloseCode(status).
const (
	CloseNormal      = 1000
	CloseGoingAway   = 1001
	CloseTooBig      = 1009
	closeStatusBase  = 4000
	maxPrintableASCI = 0x7e
)

// CloseCode returns the close code that follows a fatal error frame of an
// HTTP status: 4000 + status (4401, 4403, 4404, 4422, 4500, …), in the
// range RFC 6455 §7.4.2 leaves to applications.
func CloseCode(status int) int { return closeStatusBase + status }

// ClientFrame is any frame a client sends; Type says which members apply.
type ClientFrame struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`

	// open
	Stream               string        `json:"stream,omitempty"`
	QueueID              string        `json:"queue_id,omitempty"`
	ReconnectToken       *string       `json:"reconnect_token,omitempty"`
	FilterGroups         filter.Groups `json:"filter_groups,omitempty"`
	PreviousFilterGroups filter.Groups `json:"previous_filter_groups,omitempty"`

	// demand
	N int `json:"n,omitempty"`

	// ack, nack, extend
	DeliveryTags []int64 `json:"delivery_tags,omitempty"`
	// nack: how long the nacked events wait before they are delivered
	// again, in seconds (0–MaxNackDelaySeconds); absent = the queue's
	// retry policy (at once without one).
	Delay *int64 `json:"delay,omitempty"`
	// extend: how long from now the events stay with the stream, in
	// seconds (1–MaxExtendSeconds); required.
	Seconds *int64 `json:"seconds,omitempty"`

	// actions
	Actions []Action `json:"actions,omitempty"`
}

// Action is one triage action of an actions frame: REPLAY, DISCARD or
// LEAVE (also spelled ACTION_REPLAY, … as in the notifications API's enum) for the dead
// letter this connection showed with DeliveryTag.
type Action struct {
	DeliveryTag int64  `json:"delivery_tag"`
	Action      string `json:"action"`
}

// Decode parses and checks one client frame. Errors are
// herr.Malformed (HTTP 400) for text that is not one JSON object of the
// documented members and types, else herr.InvalidArgument (422), with a
// message naming the member and the rule; the frame is then not acted on.
//
// With an error, the frame returned is nil when the frame's id is itself
// invalid; otherwise it carries only the id (so that the error frame can
// echo it, docs/websocket.md) and, when the text was a well-formed frame
// that broke a rule, its type (a bridge treats a bad open as fatal).
//
// Decode does not know the connection's state: whether the frame fits it
// (open twice, ack before open) is the bridge's check.
func Decode(data []byte) (*ClientFrame, error) {
	f, err := decode(data)
	if err == nil {
		return f, nil
	}
	if f == nil {
		// Not well-formed: look for a usable id all the same.
		var probe struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(data, &probe) != nil || checkID(probe.ID) != nil {
			return nil, err
		}
		return &ClientFrame{ID: probe.ID}, err
	}
	if checkID(f.ID) != nil {
		return nil, err
	}
	return &ClientFrame{Type: f.Type, ID: f.ID}, err
}

// decode returns (nil, err) for text that is not a well-formed frame, and
// the frame with err when it breaks a rule.
func decode(data []byte) (*ClientFrame, error) {
	var f ClientFrame
	// One value, then nothing: a second object is its own mistake.
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadValue(); err == nil {
		if _, err := dec.ReadToken(); err != io.EOF {
			return nil, herr.New(herr.Malformed, "a frame must be exactly one JSON object")
		}
	}
	if err := strictjson.Unmarshal(data, &f); err != nil {
		if herr.CodeOf(err) != herr.Malformed {
			return nil, err // a member's own rule (a filter type, say), or invalid UTF-8
		}
		return nil, herr.New(herr.Malformed, "a frame must be one JSON object of the documented members: %s", herr.MessageOf(err))
	}
	if err := checkID(f.ID); err != nil {
		return &f, err
	}
	// Members of another frame type are refused, not ignored: a delay on
	// an ack (or seconds on a nack) would otherwise do something else than
	// the client meant.
	if f.Delay != nil && f.Type != TypeNack {
		return &f, herr.New(herr.InvalidArgument, "delay applies to nack frames only")
	}
	if f.Seconds != nil && f.Type != TypeExtend {
		return &f, herr.New(herr.InvalidArgument, "seconds applies to extend frames only")
	}
	switch f.Type {
	case TypeOpen:
		return &f, f.checkOpen()
	case TypeDemand:
		if f.N < 1 || f.N > MaxDemand {
			return &f, herr.New(herr.InvalidArgument, "n must be an integer from 1 to %d", MaxDemand)
		}
	case TypeAck, TypeNack, TypeExtend:
		if len(f.DeliveryTags) == 0 || len(f.DeliveryTags) > MaxTags {
			return &f, herr.New(herr.InvalidArgument, "delivery_tags must hold 1 to %d tags", MaxTags)
		}
		if f.Delay != nil && (*f.Delay < 0 || *f.Delay > MaxNackDelaySeconds) {
			return &f, herr.New(herr.InvalidArgument, "delay must be an integer from 0 to %d seconds", MaxNackDelaySeconds)
		}
		if f.Type == TypeExtend && (f.Seconds == nil || *f.Seconds < 1 || *f.Seconds > MaxExtendSeconds) {
			return &f, herr.New(herr.InvalidArgument, "seconds must be an integer from 1 to %d", MaxExtendSeconds)
		}
	case TypeActions:
		if len(f.Actions) == 0 || len(f.Actions) > MaxActions {
			return &f, herr.New(herr.InvalidArgument, "actions must hold 1 to %d actions", MaxActions)
		}
		for i, a := range f.Actions {
			if _, err := delivery.ParseDeadLetterAction(a.Action); err != nil {
				return &f, herr.New(herr.InvalidArgument, "actions[%d].action must be REPLAY, DISCARD or LEAVE", i)
			}
		}
	case TypePing:
	case "":
		return &f, herr.New(herr.InvalidArgument, "type is required: open, demand, ack, nack, extend, actions or ping")
	default:
		return &f, herr.New(herr.InvalidArgument, "type must be open, demand, ack, nack, extend, actions or ping")
	}
	return &f, nil
}

func (f *ClientFrame) checkOpen() error {
	// Members of another stream kind are refused, not ignored: a durable
	// queue's filters are its own, changed with UpdateDurableQueue or
	// PATCH /api/v1beta/queues/durable.
	for _, m := range []struct {
		name    string
		present bool
		allowed bool
	}{
		{"queue_id", f.QueueID != "", f.Stream == StreamDurable},
		{"reconnect_token", f.ReconnectToken != nil, f.Stream == StreamNonDurable},
		{"filter_groups", f.FilterGroups != nil, f.Stream == StreamNonDurable},
		{"previous_filter_groups", f.PreviousFilterGroups != nil, f.Stream == StreamNonDurable},
	} {
		if m.present && !m.allowed && f.Stream != "" {
			return herr.New(herr.InvalidArgument, "%s does not apply to a %s stream", m.name, f.Stream)
		}
	}
	switch f.Stream {
	case StreamNonDurable:
		if f.ReconnectToken != nil {
			if err := delivery.ValidateReconnectToken("reconnect_token", *f.ReconnectToken); err != nil {
				return err
			}
		}
		if err := f.FilterGroups.Validate("filter_groups"); err != nil {
			return err
		}
		return f.PreviousFilterGroups.Validate("previous_filter_groups")
	case StreamDurable:
		return delivery.ValidateQueueID(f.QueueID)
	case StreamDeadLetters:
		return nil
	case "":
		return herr.New(herr.InvalidArgument, "stream is required: non_durable, durable or dead_letters")
	}
	return herr.New(herr.InvalidArgument, "stream must be non_durable, durable or dead_letters")
}

// StreamRequest returns the delivery request an open frame of stream
// non_durable or durable makes. Without a reconnect token, a non-durable
// open starts a fresh queue with filter_groups; with one, it resumes that
// queue, and previous_filter_groups (when given) moves its filters from
// previous_filter_groups to filter_groups.
func (f *ClientFrame) StreamRequest() delivery.StreamRequest {
	if f.Stream == StreamDurable {
		return delivery.StreamRequest{Kind: delivery.Durable, QueueID: f.QueueID}
	}
	r := delivery.StreamRequest{Kind: delivery.NonDurable, FilterGroups: f.FilterGroups}
	if f.ReconnectToken != nil {
		r.ReconnectToken, r.TokenField = *f.ReconnectToken, "reconnect_token"
		if f.PreviousFilterGroups != nil {
			r.FilterUpdate, r.PreviousFilterGroups = true, f.PreviousFilterGroups
		}
	}
	return r
}

// Settlement returns the tags an ack frame acknowledges (acks) or a nack
// frame hands back (nacks); the other is nil.
func (f *ClientFrame) Settlement() (acks, nacks []int64) {
	if f.Type == TypeAck {
		return f.DeliveryTags, nil
	}
	return nil, f.DeliveryTags
}

// NackDelay returns a nack frame's delay, nil when it has none (the
// queue's retry policy applies).
func (f *ClientFrame) NackDelay() *time.Duration {
	if f.Type != TypeNack || f.Delay == nil {
		return nil
	}
	d := time.Duration(*f.Delay) * time.Second
	return &d
}

// ExtendBy returns an extend frame's seconds as a duration.
func (f *ClientFrame) ExtendBy() time.Duration {
	if f.Seconds == nil {
		return 0
	}
	return time.Duration(*f.Seconds) * time.Second
}

// TriageActions returns an actions frame's actions for delivery.Triage.Act
// or delivery.TriageState.Plan, in order. Decode checked every action.
func (f *ClientFrame) TriageActions() []delivery.TriageAction {
	in := make([]delivery.TriageAction, len(f.Actions))
	for i, a := range f.Actions {
		action, _ := delivery.ParseDeadLetterAction(a.Action)
		in[i] = delivery.TriageAction{DeliveryTag: a.DeliveryTag, Action: action}
	}
	return in
}

func checkID(id string) error {
	if len(id) > MaxIDLength {
		return herr.New(herr.InvalidArgument, "id must be 1 to %d printable ASCII characters", MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > maxPrintableASCI {
			return herr.New(herr.InvalidArgument, "id must be 1 to %d printable ASCII characters", MaxIDLength)
		}
	}
	return nil
}

// ServerFrame is any frame the server sends; Type says which members
// apply. Zero members are omitted.
type ServerFrame struct {
	Type string `json:"type"`
	// ID copies the id of the client frame this one answers.
	ID string `json:"id,omitempty"`

	// connected
	Stream         string `json:"stream,omitempty"`
	ReconnectToken string `json:"reconnect_token,omitempty"`
	QueueID        string `json:"queue_id,omitempty"`
	Message        string `json:"message,omitempty"`

	// event, dead_lettered_event, outcome: the session-scoped delivery tag
	// (1, 2, 3, …; absent on non-durable events, which need no settling).
	DeliveryTag int64 `json:"delivery_tag,omitempty"`
	// DeliveryCount: event — how often it has been delivered, this time
	// included; dead_lettered_event — deliveries before it was
	// dead-lettered.
	DeliveryCount int64                   `json:"delivery_count,omitempty"`
	Event         *delivery.ConsumerEvent `json:"event,omitempty"`

	// dead_lettered_event
	Reason         string     `json:"reason,omitempty"`
	OriginQueue    string     `json:"origin_queue,omitempty"`
	ResourceID     string     `json:"resource_id,omitempty"`
	DeadLetteredAt *time.Time `json:"dead_lettered_at,omitempty"`

	// settled, extended (Skipped is both's)
	Acked   *int `json:"acked,omitempty"`
	Nacked  *int `json:"nacked,omitempty"`
	Skipped *int `json:"skipped,omitempty"`
	// extended: Extended counts the tags whose events stay with the
	// stream the seconds asked; Capped the tags left as they were because
	// that would keep an event past delivery.MaxExtendedLife (12 h) after
	// its delivery.
	Extended *int `json:"extended,omitempty"`
	Capped   *int `json:"capped,omitempty"`

	// outcome: REPLAYED, DISCARDED, LEFT, ORIGIN_QUEUE_DELETED or
	// REPLAY_FAILED, with Detail saying why when useful.
	Outcome string `json:"outcome,omitempty"`
	Detail  string `json:"detail,omitempty"`

	// idle: the demand this connection still holds that the server could
	// not meet now (API Gateway bridge only; see docs/websocket.md).
	Unmet *int `json:"unmet,omitempty"`

	// error: StatusCode is the HTTP status of the failure, Code herr's
	// name for it; Fatal says the server closes the connection next, with
	// CloseCode(StatusCode).
	StatusCode int    `json:"status_code,omitempty"`
	Code       string `json:"code,omitempty"`
	Fatal      bool   `json:"fatal,omitempty"`
}

// Connected is the first frame of an open stream. token is the reconnect
// token (non_durable) or the queue id (durable); "" for dead_letters.
func Connected(id, stream, token string) *ServerFrame {
	f := &ServerFrame{Type: TypeConnected, ID: id, Stream: stream, Message: "Connection established"}
	switch stream {
	case StreamNonDurable:
		f.ReconnectToken = token
	case StreamDurable:
		f.QueueID = token
	}
	return f
}

// Event is an event frame; tag 0 (non-durable) is omitted.
func Event(d delivery.Delivery, tag int64) *ServerFrame {
	return &ServerFrame{Type: TypeEvent, DeliveryTag: tag, DeliveryCount: d.DeliveryCount, Event: d.Event}
}

// DeadLettered is a dead_lettered_event frame showing d with its
// session-scoped tag (delivery.Triage.Show). A body that is not a
// CloudEvent is shown all the same, with just its event type, so that it
// can be discarded.
func DeadLettered(d *leasestore.DeadLetter, tag int64) *ServerFrame {
	f := &ServerFrame{
		Type: TypeDeadLetteredEvent, DeliveryTag: tag, DeliveryCount: d.DeliveryCount,
		Reason: d.Reason, OriginQueue: d.OriginQueue, ResourceID: d.ResourceID,
	}
	if !d.DeadLetteredAt.IsZero() {
		at := d.DeadLetteredAt
		f.DeadLetteredAt = &at
	}
	ev, err := delivery.DecodeConsumerEvent(d.Body)
	if err != nil {
		ev = &delivery.ConsumerEvent{EventType: d.EventType}
	}
	f.Event = ev
	return f
}

// Outcome answers one action of the actions frame id (delivery.Triage.Act
// gives one outcome per action, in order).
func Outcome(id string, o delivery.TriageOutcome) *ServerFrame {
	return &ServerFrame{Type: TypeOutcome, ID: id, DeliveryTag: o.DeliveryTag, Outcome: string(o.Outcome), Detail: o.Detail}
}

// Settled answers an ack or nack frame.
func Settled(id string, r delivery.SettleReport) *ServerFrame {
	return &ServerFrame{Type: TypeSettled, ID: id, Acked: &r.Acked, Nacked: &r.Nacked, Skipped: &r.Skipped}
}

// Extended answers an extend frame (docs/websocket.md, "extended").
func Extended(id string, r delivery.ExtendReport) *ServerFrame {
	return &ServerFrame{Type: TypeExtended, ID: id, Extended: &r.Extended, Skipped: &r.Skipped, Capped: &r.Capped}
}

// Idle says that unmet of the connection's demand could not be met now.
func Idle(unmet int) *ServerFrame { return &ServerFrame{Type: TypeIdle, Unmet: &unmet} }

// Pong answers a ping frame.
func Pong(id string) *ServerFrame { return &ServerFrame{Type: TypePong, ID: id} }

// Error is an error frame for err: its HTTP status (httpx.Status, the one
// map from herr codes), herr's name for the code and its caller-safe
// message (herr.MessageOf: a cause is never sent, nor a token). A fatal
// error is followed by a close with CloseCode(StatusCode).
func Error(id string, err error, fatal bool) *ServerFrame {
	code := herr.CodeOf(err)
	return &ServerFrame{
		Type: TypeError, ID: id, StatusCode: httpx.Status(code), Code: code.String(),
		Message: herr.MessageOf(err), Fatal: fatal,
	}
}

// Encode returns f as one JSON text frame.
func (f *ServerFrame) Encode() []byte {
	if b, ok := f.appendEvent(nil); ok {
		return b
	}
	b, err := json.Marshal(f)
	if err != nil {
		// Only an event's message could fail, and it was decoded from
		// JSON; fall back to an error frame rather than send nothing.
		b, _ = json.Marshal(&ServerFrame{Type: TypeError, StatusCode: 500, Code: herr.Internal.String(), Message: "an event could not be encoded"})
	}
	return b
}

// appendEvent appends an event frame (type, delivery tag and count, event;
// every other field zero), the frame a stream sends most, as json.Marshal
// writes it, without its reflection and its second pass over the message
// (TestEncodeEventFrameMatchesMarshal). ok is false for any other frame.
func (f *ServerFrame) appendEvent(dst []byte) (out []byte, ok bool) {
	if f.Type != TypeEvent || f.Event == nil || *f != (ServerFrame{Type: f.Type, DeliveryTag: f.DeliveryTag, DeliveryCount: f.DeliveryCount, Event: f.Event}) {
		return dst, false
	}
	dst = append(dst, `{"type":"event"`...)
	if f.DeliveryTag != 0 {
		dst = append(dst, `,"delivery_tag":`...)
		dst = strconv.AppendInt(dst, f.DeliveryTag, 10)
	}
	if f.DeliveryCount != 0 {
		dst = append(dst, `,"delivery_count":`...)
		dst = strconv.AppendInt(dst, f.DeliveryCount, 10)
	}
	dst = append(dst, `,"event":`...)
	dst, err := f.Event.AppendJSON(dst)
	if err != nil {
		return dst, false
	}
	return append(dst, '}'), true
}
