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
// messages and never holds back one it did not return (or, on RabbitMQ,
// holds a bounded few for a bounded time; see Broker.Receive).
//
// # URLs
//
// Brokers are opened by URL with Open, which returns the portable *Broker
// over the driver (package pubsubx/driver) that registered the URL's
// scheme:
//
//	mem://NAME    in-process broker (package pubsubx/mem); the same NAME in one
//	              process opens the same broker, so two handler stacks can share it.
//	awssnssqs://…, gcppubsub://…, rabbit://…, nats://…   (their packages)
//
// Unknown schemes and unknown query parameters are refused with a message
// naming them.
//
// # Portable layer and drivers
//
// As in gocloud.dev/pubsub, the portable type (Broker) does once what
// every broker needs: argument checks, herr.Unavailable after Close, the
// size limit, and batching (Broker.SendBatch hands the driver pieces of
// the size its batch API takes, in order); a driver (driver.Broker)
// implements only the broker's calls, and its SendBatch uses the
// broker's own batch API.
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
// (a 256 KiB message in its CloudEvents envelope) states its limit
// (driver.BatchOptions.MaxMessageBytes, read through
// Broker.MaxMessageBytes). Herald then stores an event whose encoding passes
// the limit in the lease store (a claim) and sends a small reference in its
// place, with the event's attributes plus AttrClaim; receivers resolve the
// reference before they hand the event out (package delivery, the
// claim-check). Drivers without a cap below that size state 0.
//
// # Backlog bounds
//
// A subscription nobody reads must not grow its broker without limit, so
// every driver bounds what one subscription holds: by count where the
// broker can count (the in-memory broker, RabbitMQ, NATS JetStream: the
// max_pending, max_pending_bytes and overflow URL parameters, see Bounds
// and QueryBounds), by retention time where it cannot (SQS, Pub/Sub). At a
// count bound a Send fails with herr.ResourceExhausted by default
// (overflow=reject-publish). Each driver's # Limits states its bound.
//
// # Errors
//
// Every method returns herr-coded errors: herr.NotFound for a subscription
// that does not exist, herr.AlreadyExists when creating one that does,
// herr.Unavailable when the broker is closed or unreachable (retryable; a
// message is never reported sent when it was not).
package pubsubx

// Attribute keys set on every message Herald publishes. Brokers that filter
// on attributes (SNS filter policies, Pub/Sub filters) filter on these.
const (
	AttrEventType  = "event_type"
	AttrResourceID = "resource_id"
	AttrEventID    = "event_id"
	// AttrClaim marks a claim-check reference (see Size limits): its value
	// is the id of the claim holding the encoded event, and the message's
	// Body is only a reference to it. Absent on ordinary messages.
	AttrClaim = "herald_claim"
)
