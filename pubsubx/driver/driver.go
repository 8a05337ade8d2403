// Package driver is the interface a pubsubx broker driver implements, in
// the manner of gocloud.dev/pubsub/driver. Applications use the portable
// type, *pubsubx.Broker, which checks arguments, reports a closed broker,
// splits and overlaps batches and enforces the size limit once for every
// driver; a driver implements only what differs between brokers.
//
// The portable layer calls a Broker only with valid arguments: names are
// non-empty, SendBatch gets at least one message, none nil and none over
// MaxMessageBytes, never more than BatchOptions.MaxMessages of them,
// Receive's Max is at least 1, Ack and Nack get at least one message, and
// no call follows Close on the same *pubsubx.Broker. A driver still checks
// what only it knows (a handle from another subscription, an attribute its
// broker refuses) and answers a call that races with Close with
// herr.Unavailable.
package driver

import (
	"context"
	"time"

	"github.com/heraldevents/herald/filter"
)

// Message is one event in flight. Body is the encoded CloudEvent; Metadata
// carries the pubsubx.Attr* attributes. Handle is the driver's receipt for
// Ack and Nack; it is nil on messages being sent.
//
// Body and Metadata are immutable once sent: a sender hands them over
// (it must not change them after the send), and a receiver must not
// change those of a message it received, which an in-process driver
// shares with the message's other deliveries. Replacing a received
// Message's fields (a resolved claim-check Body, say) is fine: each
// delivery is a Message of its own.
type Message struct {
	Body     []byte
	Metadata map[string]string
	Handle   any
}

// Metadata keys the accessors below read; pubsubx.AttrEventType and
// pubsubx.AttrResourceID are these.
const (
	keyEventType  = "event_type"
	keyResourceID = "resource_id"
)

// EventType returns the event_type attribute.
func (m *Message) EventType() string { return m.Metadata[keyEventType] }

// ResourceID returns the resource_id attribute ("" when the event has none).
func (m *Message) ResourceID() string { return m.Metadata[keyResourceID] }

// ReceiveParams bound one Receive.
type ReceiveParams struct {
	// Max is the most messages to return, at least 1.
	Max int
	// Wait is how long to wait for a first message when none is ready; 0
	// returns at once.
	Wait time.Duration
}

// BatchOptions say how the portable layer hands a driver a batch.
type BatchOptions struct {
	// MaxMessages is the most messages one SendBatch call gets (SNS
	// PublishBatch: 10); 0 means no limit. The portable layer splits a
	// bigger batch into pieces of this size, in order.
	MaxMessages int
	// KeepsPublishOrder reports whether a single receiver of a
	// subscription sees messages in the order they were sent. When false,
	// the portable layer sends the pieces of a split batch concurrently
	// (up to MaxHandlers at a time), since order cannot be observed
	// anyway; when true, one piece after the other.
	KeepsPublishOrder bool
	// MaxHandlers bounds the pieces in flight at once when order is not
	// kept; 0 means 1.
	MaxHandlers int
	// MaxMessageBytes is the largest Body, in bytes, the broker always
	// accepts with Herald's attributes at their longest; 0 means no limit
	// below Herald's largest event. The portable layer fails a bigger
	// message with herr.InvalidArgument without sending it, and a
	// publisher sends it as a claim-check reference instead
	// (*pubsubx.Broker.MaxMessageBytes).
	MaxMessageBytes int
	// CheapFilterUpdates reports that UpdateSubscription is one quick
	// call that takes effect for the next messages (a JetStream consumer
	// update, RabbitMQ bindings, the in-memory broker), rather than an
	// administrative operation that is rate-limited or propagates slowly
	// (Pub/Sub's immutable filters, SNS filter policies). Herald's stream
	// hub keeps its subscription narrowed to the event types its streams
	// read only where filter updates are cheap, and takes every event
	// elsewhere.
	CheapFilterUpdates bool
}

// Broker is one deployment's topic and its subscriptions, as a driver
// implements it. Implementations are safe for concurrent use. Every error
// is herr-coded (see package pubsubx, Errors).
type Broker interface {
	// BatchOptions is called once, when the portable Broker is made.
	BatchOptions() BatchOptions

	// SendBatch publishes msgs in slice order and returns one error per
	// message, len(msgs) long, index for index; a nil entry means the
	// broker accepted that message. One message failing does not stop the
	// others; the round trips of one call overlap where the broker's
	// protocol allows (a batch API, pipelining), without reordering.
	SendBatch(ctx context.Context, msgs []*Message) []error

	// CreateSubscription creates subscription name at the head of the
	// topic, with groups pushed down as far as the broker can filter.
	CreateSubscription(ctx context.Context, name string, groups filter.Groups) error

	// UpdateSubscription replaces the filter of an existing subscription
	// without losing messages it already holds.
	UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error

	// DeleteSubscription deletes name and whatever it still holds.
	DeleteSubscription(ctx context.Context, name string) error

	// Receive returns up to p.Max messages from name, as soon as one is
	// available, or none once p.Wait passes; it never keeps a message it
	// did not return.
	Receive(ctx context.Context, name string, p ReceiveParams) ([]*Message, error)

	// Ack removes received messages for good.
	Ack(ctx context.Context, name string, msgs []*Message) error

	// Nack makes received messages available again at once.
	Nack(ctx context.Context, name string, msgs []*Message) error

	// Ping tells, within ctx's deadline and with at most one dial,
	// whether the broker is reachable now.
	Ping(ctx context.Context) error

	// Close releases the driver's resources; calls in flight fail with
	// herr.Unavailable. The portable layer calls it once.
	Close() error
}
