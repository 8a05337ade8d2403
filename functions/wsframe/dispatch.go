package wsframe

import (
	"context"

	"github.com/heraldevents/herald/herr"
)

// Errors the bridges answer with, the same texts on both (docs/websocket.md).
var (
	// ErrAlreadyOpen refuses a second open frame: the stream already open
	// stays (non-fatal, 409).
	ErrAlreadyOpen = herr.New(herr.FailedPrecondition, "this connection already has a stream: one open frame per connection")
	// ErrNotOpen refuses demand, ack, nack, extend and actions frames before open
	// (non-fatal, 409).
	ErrNotOpen = herr.New(herr.FailedPrecondition, "send an open frame first")
	// ErrActionsNotTriage refuses an actions frame on an event stream
	// (non-fatal, 409).
	ErrActionsNotTriage = herr.New(herr.FailedPrecondition, "actions frames apply to a dead_letters stream only")
	// ErrBinary refuses a binary message (non-fatal, 400).
	ErrBinary = herr.New(herr.Malformed, "frames are JSON text messages, not binary")
)

// ErrNotSettleable refuses an ack, nack or extend frame (typ) on a stream of kind
// stream that is not durable (non-fatal, 409).
func ErrNotSettleable(typ, stream string) error {
	return herr.New(herr.FailedPrecondition, "only a durable stream's events are settled: %s frames do not apply to a %s stream", typ, stream)
}

// Conn is a bridge's side of one connection, as Dispatch drives it: one
// method per client frame type, called only for a frame Decode accepted
// and that fits the connection's state, and the two ways of answering a
// frame with an error frame.
type Conn interface {
	// Stream is the kind of the stream open on the connection
	// (StreamNonDurable, StreamDurable, StreamDeadLetters), "" before open.
	Stream() string
	// Open opens the stream an open frame names (none is open).
	Open(ctx context.Context, f *ClientFrame)
	// Demand answers a demand frame on an open stream.
	Demand(ctx context.Context, f *ClientFrame)
	// Settle answers an ack or nack frame on a durable stream.
	Settle(ctx context.Context, f *ClientFrame)
	// Extend answers an extend frame on a durable stream.
	Extend(ctx context.Context, f *ClientFrame)
	// Act answers an actions frame on a dead_letters stream.
	Act(ctx context.Context, f *ClientFrame)
	// Ping answers a ping frame (with Pong), whatever the state.
	Ping(ctx context.Context, f *ClientFrame)
	// Refuse sends a non-fatal error frame for err, echoing id.
	Refuse(ctx context.Context, id string, err error)
	// Fail sends a fatal error frame for err, echoing id, and ends the
	// connection.
	Fail(ctx context.Context, id string, err error)
}

// Dispatch routes one client frame, as Decode returned it (f, err), to c.
// The rules both bridges keep (docs/websocket.md, "Errors"):
//
//   - a second open frame, well-formed or not, is refused with
//     ErrAlreadyOpen and the open stream stays;
//   - an open frame Decode refuses is fatal (Fail): a stream that cannot
//     open ends the connection;
//   - any other frame Decode refuses is refused (Refuse) with Decode's
//     error, echoing the frame's id when it is valid;
//   - ping is answered whatever the state;
//   - demand, ack, nack, extend and actions before open are refused with
//     ErrNotOpen; ack, nack and extend on a stream that is not durable
//     with ErrNotSettleable; actions on an event stream with
//     ErrActionsNotTriage.
func Dispatch(ctx context.Context, c Conn, f *ClientFrame, err error) {
	stream := c.Stream()
	id := ""
	if f != nil {
		id = f.ID
	}
	switch {
	case f != nil && f.Type == TypeOpen && stream != "":
		c.Refuse(ctx, id, ErrAlreadyOpen)
	case f != nil && f.Type == TypeOpen && err != nil:
		c.Fail(ctx, id, err)
	case err != nil:
		c.Refuse(ctx, id, err) // Decode keeps the id whenever it is valid
	case f.Type == TypePing:
		c.Ping(ctx, f)
	case f.Type == TypeOpen:
		c.Open(ctx, f)
	case stream == "":
		c.Refuse(ctx, id, ErrNotOpen)
	case f.Type == TypeDemand:
		c.Demand(ctx, f)
	case f.Type == TypeAck || f.Type == TypeNack || f.Type == TypeExtend:
		if stream != StreamDurable {
			c.Refuse(ctx, id, ErrNotSettleable(f.Type, stream))
			return
		}
		if f.Type == TypeExtend {
			c.Extend(ctx, f)
			return
		}
		c.Settle(ctx, f)
	case f.Type == TypeActions:
		if stream != StreamDeadLetters {
			c.Refuse(ctx, id, ErrActionsNotTriage)
			return
		}
		c.Act(ctx, f)
	}
}
