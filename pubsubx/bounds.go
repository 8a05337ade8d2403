package pubsubx

import (
	"net/url"
	"strconv"

	"github.com/heraldevents/herald/herr"
)

// Backlog bounds. A subscription that nobody reads must not grow its
// broker without limit, so every driver bounds what one subscription
// holds (see each driver's # Limits). Drivers whose broker can count a
// backlog (the in-memory broker, RabbitMQ, NATS JetStream) take the same
// three URL parameters, read by QueryBounds:
//
//	max_pending=100000          messages
//	max_pending_bytes=268435456 bytes of bodies
//	overflow=reject-publish     or drop-head
//
// The names of overflow are RabbitMQ's x-overflow values. Drivers whose
// broker cannot count one (Amazon SQS, Google Pub/Sub) bound it by time:
// a message nobody receives within the subscription's retention is
// dropped by the broker.
const (
	// DefaultMaxPending is max_pending's default: 100,000 messages, about
	// 100 MiB of typical 1 KiB events.
	DefaultMaxPending = 100_000
	// DefaultMaxPendingBytes is max_pending_bytes's default: 256 MiB of
	// bodies, a thousand of Herald's largest events.
	DefaultMaxPendingBytes = 256 << 20
)

// Overflow is what a broker does with a publish that finds a subscription
// at its bounds (RabbitMQ's x-overflow names).
type Overflow string

const (
	// RejectPublish, the default: the message is not stored for the full
	// subscription and its Send result is a herr.ResourceExhausted error,
	// so the publisher learns that a consumer is not keeping up (Herald
	// answers that event with success false). Nothing a subscription
	// holds is lost to the bound.
	RejectPublish Overflow = "reject-publish"
	// DropHead: the message is stored and the oldest messages of the full
	// subscription that nobody has received are dropped to make room, as
	// a capped stream does. The dropped events are lost.
	DropHead Overflow = "drop-head"
)

// Bounds bound the backlog of each subscription of a broker.
type Bounds struct {
	// MaxPending is the most messages a subscription holds; 0 means
	// DefaultMaxPending.
	MaxPending int64
	// MaxPendingBytes is the most bytes of bodies a subscription holds;
	// 0 means DefaultMaxPendingBytes.
	MaxPendingBytes int64
	// Overflow is what a publish does at the bounds; "" means
	// RejectPublish.
	Overflow Overflow
}

// WithDefaults returns b with its zero fields set to the defaults.
func (b Bounds) WithDefaults() Bounds {
	if b.MaxPending <= 0 {
		b.MaxPending = DefaultMaxPending
	}
	if b.MaxPendingBytes <= 0 {
		b.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if b.Overflow == "" {
		b.Overflow = RejectPublish
	}
	return b
}

// Validate reports a herr.InvalidArgument error for a negative bound or
// an unknown overflow, naming the URL parameter.
func (b Bounds) Validate() error {
	switch {
	case b.MaxPending < 0:
		return herr.New(herr.InvalidArgument, "max_pending must be a positive number of messages, got %d", b.MaxPending)
	case b.MaxPendingBytes < 0:
		return herr.New(herr.InvalidArgument, "max_pending_bytes must be a positive number of bytes, got %d", b.MaxPendingBytes)
	}
	switch b.Overflow {
	case "", RejectPublish, DropHead:
		return nil
	}
	return herr.New(herr.InvalidArgument, "overflow %q is not %s or %s", b.Overflow, RejectPublish, DropHead)
}

// QueryBounds reads max_pending, max_pending_bytes and overflow from u's
// query; absent ones are zero (their defaults). A value that is not a
// positive integer, or an unknown overflow, is herr.InvalidArgument naming
// u's scheme and the parameter. Drivers list the three names in their
// CheckQuery call.
func QueryBounds(u *url.URL) (Bounds, error) {
	q := u.Query()
	var b Bounds
	for _, p := range []struct {
		key string
		dst *int64
	}{{"max_pending", &b.MaxPending}, {"max_pending_bytes", &b.MaxPendingBytes}} {
		s := q.Get(p.key)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return Bounds{}, herr.New(herr.InvalidArgument, "%s URL: %s %q is not a positive integer", u.Scheme, p.key, s)
		}
		*p.dst = n
	}
	b.Overflow = Overflow(q.Get("overflow"))
	if err := b.Validate(); err != nil {
		return Bounds{}, herr.New(herr.InvalidArgument, "%s URL: %s", u.Scheme, herr.MessageOf(err))
	}
	return b, nil
}
