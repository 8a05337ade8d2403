package grpcapi

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/internal/structjson"
)

// publishCodec is the publisher service's "proto" codec (gRPC, gRPC-Web
// and the Connect protocol's binary form): the protobuf codec connect
// uses by default, except that the events of a publish request keep each
// message as its encoding (structjson.Lazy) instead of a decoded
// google.protobuf.Struct. A publish turns each message into JSON
// (structjson.Encode reads it straight from those bytes) and echoes it
// in its result (proto.Marshal writes the bytes as they came); decoding
// a Struct per event, a Go map and a Value per member, and encoding it
// again was three quarters of a gRPC publish's CPU.
//
// Only a request in the form every encoder writes takes that path (see
// lazyEvent and structjson.Lazy); any other is decoded by proto.Unmarshal,
// so what is taken, refused and how stays protobuf's own.
type publishCodec struct{}

var _ connect.Codec = publishCodec{}

// Name is the codec's content subtype: it stands in for connect's own.
func (publishCodec) Name() string { return "proto" }

// IsBinary marks the codec as binary for the Connect protocol's GET
// requests and error details, as connect's protobuf codec is.
func (publishCodec) IsBinary() bool { return true }

// Marshal is proto.Marshal.
func (publishCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, errNotProto(m)
	}
	return proto.Marshal(pm)
}

// MarshalAppend appends m's encoding to dst.
func (publishCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, errNotProto(m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

// Unmarshal decodes a publish request with its messages left encoded
// when it can, and any message with proto.Unmarshal.
func (publishCodec) Unmarshal(data []byte, m any) error {
	switch req := m.(type) {
	case *pb.BatchPublishEventsRequest:
		if events, ok := lazyEvents(data); ok {
			req.Events = events
			return nil
		}
	case *pb.PublishEventRequest:
		if events, ok := lazyEvents(data); ok && len(events) <= 1 {
			if len(events) == 1 {
				req.Event = events[0]
			}
			return nil
		}
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return errNotProto(m)
	}
	proto.Reset(pm)
	if err := proto.Unmarshal(data, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func errNotProto(m any) error {
	return fmt.Errorf("%T is not a protobuf message", m)
}

// lazyEvents reads the repeated Event field (number 1) that makes up both
// publish requests. data is copied once: connect reuses the buffer it
// reads a request into, and every message of the request points into it.
func lazyEvents(data []byte) ([]*pb.Event, bool) {
	data = bytes.Clone(data)
	var events []*pb.Event
	for len(data) > 0 {
		body, rest, ok := bytesField(data, 1)
		if !ok {
			return nil, false
		}
		data = rest
		ev, ok := lazyEvent(body)
		if !ok {
			return nil, false
		}
		events = append(events, ev)
	}
	return events, true
}

// lazyEvent decodes an Event whose fields each appear once, as every
// encoder writes them: event_type (valid UTF-8), message (kept encoded,
// if structjson.Lazy takes it), occurred_at and resource (decoded by
// proto.Unmarshal). Anything else, an unknown field included, is off the
// path.
func lazyEvent(b []byte) (*pb.Event, bool) {
	ev := &pb.Event{}
	var seen [5]bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || num < 1 || num > 4 || seen[num] {
			return nil, false
		}
		seen[num] = true
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, false
		}
		b = b[n+m:]
		switch num {
		case 1:
			if !utf8.Valid(v) {
				return nil, false
			}
			ev.EventType = string(v)
		case 2:
			s, ok := structjson.Lazy(v)
			if !ok {
				return nil, false
			}
			ev.Message = s
		case 3:
			ts := &timestamppb.Timestamp{}
			if proto.Unmarshal(v, ts) != nil {
				return nil, false
			}
			ev.OccurredAt = ts
		case 4:
			r := &pb.EventResource{}
			if proto.Unmarshal(v, r) != nil {
				return nil, false
			}
			ev.Resource = r
		}
	}
	return ev, true
}

// bytesField reads one length-delimited field numbered num from the
// start of b: its contents and what follows it.
func bytesField(b []byte, num protowire.Number) (body, rest []byte, ok bool) {
	got, typ, n := protowire.ConsumeTag(b)
	if n < 0 || got != num || typ != protowire.BytesType {
		return nil, nil, false
	}
	body, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		return nil, nil, false
	}
	return body, b[n+m:], true
}
