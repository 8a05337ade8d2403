// Package pubsubx is Herald's broker seam: one topic per deployment, and
// subscriptions that are created, re-filtered and deleted at run time, each
// read with a bounded receive.
//
// gocloud.dev/pubsub gives portable publishing and receiving, but it has no
// portable way to create or delete a subscription, and its Subscription
// prefetches in the background, so a short-lived handler (a Lambda, a Cloud
// Run request) strands messages it never handed out until their ack
// deadline. pubsubx adds what Herald needs on top: Broker.CreateSubscription
// and DeleteSubscription, with the consumer's filter groups pushed down where
// the broker can filter, and Broker.Receive, which returns at most max
// messages and never holds back one it did not return.
//
// # URLs
//
// Brokers are opened by URL with Open. Each driver registers its scheme:
//
//	mem://NAME    in-process broker (package pubsubx/mem); the same NAME in one
//	              process opens the same broker, so two handler stacks can share it.
//
// Unknown schemes and unknown query parameters are refused with a message
// naming them.
//
// # Delivery semantics
//
// At least once. A received message is hidden from other receivers of the
// same subscription until it is acked, nacked, or its ack deadline passes;
// then it is delivered again. A nacked message is available again at once.
// Each driver documents its order guarantee.
//
// # Size limits
//
// A driver whose broker caps a message below Herald's largest encoded event
// (a 256 KiB message in its CloudEvents envelope)
// implements SizeLimited. Herald then stores an event whose encoding passes
// the limit in the lease store (a claim) and sends a small reference in its
// place, with the event's attributes plus AttrClaim; receivers resolve the
// reference before they hand the event out (package delivery, the
// claim-check). Drivers without a cap below that size do not implement it.
//
// # Errors
//
// Every method returns herr-coded errors: herr.NotFound for a subscription
// that does not exist, herr.AlreadyExists when creating one that does,
// herr.Unavailable when the broker is closed or unreachable (retryable; a
// message is never reported sent when it was not).
package pubsubx

import (
	"context"
	"time"

	"github.com/heraldevents/herald/filter"
)

// Attribute keys set on every message Herald publishes. Brokers that filter
// on attributes (SNS filter policies, Pub/Sub filters) filter on these.
const (
	AttrEventType  = "event_type"
	AttrResourceID = "resource_id"
	AttrEventID    = "event_id"
	// AttrClaim marks a claim-check reference (see SizeLimited): its value
	// is the id of the claim holding the encoded event, and the message's
	// Body is only a reference to it. Absent on ordinary messages.
	AttrClaim = "herald_claim"
)

// SizeLimited is implemented by a Broker whose messages are capped below
// Herald's largest encoded event. MaxMessageBytes is the largest Body, in
// bytes, that Send always accepts with Herald's attributes (AttrEventType,
// AttrResourceID, AttrEventID and AttrClaim at their longest); a publisher
// sends anything bigger as a claim-check reference instead. The value is
// fixed for the life of the Broker.
type SizeLimited interface {
	MaxMessageBytes() int
}

// Pinger is implemented by a Broker that can tell, cheaply and within
// ctx's deadline, whether it can reach its broker right now. Readiness
// checks (GET /health/ready, gRPC health) call it; a nil error means a
// Send issued now would be attempted against a live connection. Ping never
// dials more than once per call and never blocks past ctx. A Broker without
// it is taken as reachable.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Message is one event in flight. Body is the encoded CloudEvent; Metadata
// carries the Attr* attributes. Handle is the driver's receipt for Ack and
// Nack; it is nil on messages being sent.
type Message struct {
	Body     []byte
	Metadata map[string]string
	Handle   any
}

// EventType returns the event_type attribute.
func (m *Message) EventType() string { return m.Metadata[AttrEventType] }

// ResourceID returns the resource_id attribute ("" when the event has none).
func (m *Message) ResourceID() string { return m.Metadata[AttrResourceID] }

// Broker is one deployment's topic and its subscriptions. Implementations
// are safe for concurrent use, and two Brokers opened on the same URL (in
// one process or several) see the same topic and subscriptions.
type Broker interface {
	// Send publishes m to the topic. A nil error means the broker accepted
	// it: every subscription that existed at that moment and whose filter
	// it passes will deliver it.
	Send(ctx context.Context, m *Message) error

	// CreateSubscription creates subscription name, positioned at the head
	// of the topic: only messages sent after it returns are delivered.
	// groups is pushed down as far as the broker can filter.
	CreateSubscription(ctx context.Context, name string, groups filter.Groups) error

	// UpdateSubscription replaces the filter of an existing subscription
	// without losing messages it already holds.
	UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error

	// DeleteSubscription deletes name and whatever it still holds.
	DeleteSubscription(ctx context.Context, name string) error

	// Receive returns up to max messages from subscription name. It returns
	// as soon as at least one is available, with whatever else is available
	// at once (up to max), or with none when wait passes first. It never
	// keeps a message it did not return: the rest stay available to the
	// next Receive, here or in another process, immediately.
	Receive(ctx context.Context, name string, max int, wait time.Duration) ([]*Message, error)

	// Ack removes received messages from the subscription for good.
	Ack(ctx context.Context, name string, msgs []*Message) error

	// Nack makes received messages available again at once.
	Nack(ctx context.Context, name string, msgs []*Message) error

	// Close releases the broker's resources. Later calls fail with
	// herr.Unavailable.
	Close() error
}
