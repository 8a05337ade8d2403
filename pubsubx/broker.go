package pubsubx

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Message is one event in flight (driver.Message). Body is the encoded
// CloudEvent; Metadata carries the Attr* attributes. Handle is the
// driver's receipt for Ack and Nack; it is nil on messages being sent.
type Message = driver.Message

// ReceiveParams bound one Receive (driver.ReceiveParams): Max, at least
// 1, is the most messages returned; Wait is how long to wait for a first
// one (0: answer at once).
type ReceiveParams = driver.ReceiveParams

// Broker is one deployment's topic and its subscriptions: the portable
// type over a driver (package pubsubx/driver), in the manner of
// gocloud.dev/pubsub's Topic over its driver.Topic. It checks arguments,
// answers herr.Unavailable once closed, splits and overlaps batches and
// enforces the driver's size limit, the same for every driver. It is
// safe for concurrent use, and two Brokers opened on the same URL (in one
// process or several) see the same topic and subscriptions.
type Broker struct {
	d      driver.Broker
	opts   driver.BatchOptions
	closed atomic.Bool
	once   sync.Once
	err    error // of the driver's Close
}

// NewBroker returns the portable Broker over d. Drivers call it from
// their constructors; middleware (telemetry, tests) wraps a Broker's
// Driver and calls it again.
func NewBroker(d driver.Broker) *Broker {
	return &Broker{d: d, opts: d.BatchOptions()}
}

// Driver returns b's driver, for middleware that wraps it (then
// NewBroker on the wrapper). Calls on it bypass b's checks.
func (b *Broker) Driver() driver.Broker { return b.d }

var errClosed = herr.New(herr.Unavailable, "pubsubx: the broker is closed")

// check fails a call on a closed broker or with a done ctx.
func (b *Broker) check(ctx context.Context) error {
	if b.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}

func checkName(name string) error {
	if name == "" {
		return herr.New(herr.InvalidArgument, "pubsubx: subscription name is empty")
	}
	return nil
}

// MaxMessageBytes is the largest Body, in bytes, that Send accepts with
// Herald's attributes (AttrEventType, AttrResourceID, AttrEventID and
// AttrClaim at their longest), or 0 when the broker carries Herald's
// largest encoded event (a 256 KiB message in its CloudEvents envelope).
// A publisher sends anything bigger as a claim-check reference (AttrClaim;
// package delivery). Fixed for the life of b.
func (b *Broker) MaxMessageBytes() int { return b.opts.MaxMessageBytes }

// KeepsPublishOrder reports whether a single receiver of a subscription
// sees messages in the order they were sent (each driver documents it).
func (b *Broker) KeepsPublishOrder() bool { return b.opts.KeepsPublishOrder }

// CheapFilterUpdates reports whether UpdateSubscription is one quick call
// that takes effect at once on this broker (driver.BatchOptions).
func (b *Broker) CheapFilterUpdates() bool { return b.opts.CheapFilterUpdates }

// Send publishes m to the topic. A nil error means the broker accepted
// it: every subscription that existed at that moment and whose filter it
// passes will deliver it. A Body over MaxMessageBytes is
// herr.InvalidArgument, and is not sent.
//
// Send takes ownership of m's Body and Metadata, as grpc-go's SendMsg
// does of its message: the caller must not change them afterwards (an
// in-process driver keeps them as they are, rather than copying every
// message).
func (b *Broker) Send(ctx context.Context, m *Message) error {
	return b.SendBatch(ctx, []*Message{m})[0]
}

// SendBatch sends msgs in slice order through the driver's batch API
// (SNS PublishBatch, Pub/Sub's batched Publish, JetStream async publish,
// RabbitMQ pipelined publisher confirms, …): on a broker that keeps
// publish order, a single receiver sees them in that order. It returns
// one error per message, len(msgs) long, index for index; a nil entry
// means the broker accepted that message, exactly as a nil error from
// Send does. One message failing (nil, over MaxMessageBytes, refused by
// the broker) does not stop the others; once ctx ends, the messages not
// yet accepted fail with ctx's error. The round trips overlap: a batch
// costs about one round trip, not one per message. A batch bigger than
// the driver takes at once is split into pieces, sent one after the
// other where the broker keeps order and concurrently where it does not.
// It takes ownership of the messages' Body and Metadata, as Send does.
func (b *Broker) SendBatch(ctx context.Context, msgs []*Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	if err := b.check(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	send := make([]*Message, 0, len(msgs))
	index := make([]int, 0, len(msgs)) // send[k] is msgs[index[k]]
	for i, m := range msgs {
		switch {
		case m == nil:
			errs[i] = herr.New(herr.InvalidArgument, "pubsubx: message %d of the batch is nil", i)
		case b.opts.MaxMessageBytes > 0 && len(m.Body) > b.opts.MaxMessageBytes:
			errs[i] = herr.New(herr.InvalidArgument, "pubsubx: message body of %d bytes exceeds the broker's limit of %d bytes", len(m.Body), b.opts.MaxMessageBytes)
		default:
			send = append(send, m)
			index = append(index, i)
		}
	}
	if len(send) == 0 {
		return errs
	}
	piece := b.opts.MaxMessages
	if piece <= 0 || piece > len(send) {
		piece = len(send)
	}
	sendPiece := func(from int) {
		to := min(from+piece, len(send))
		res := b.d.SendBatch(ctx, send[from:to])
		for k := from; k < to; k++ {
			var err error
			if len(res) != to-from {
				err = herr.New(herr.Internal, "pubsubx: the driver returned %d results for %d messages", len(res), to-from)
			} else {
				err = res[k-from]
			}
			errs[index[k]] = err
		}
	}
	if piece == len(send) {
		sendPiece(0)
		return errs
	}
	if b.opts.KeepsPublishOrder {
		for from := 0; from < len(send); from += piece {
			if err := ctx.Err(); err != nil {
				for k := from; k < len(send); k++ {
					errs[index[k]] = err
				}
				break
			}
			sendPiece(from)
		}
		return errs
	}
	sem := make(chan struct{}, max(b.opts.MaxHandlers, 1))
	var wg sync.WaitGroup
	for from := 0; from < len(send); from += piece {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sendPiece(from)
		}()
	}
	wg.Wait()
	return errs
}

// CreateSubscription creates subscription name, positioned at the head
// of the topic: only messages sent after it returns are delivered.
// groups is pushed down as far as the broker can filter.
//
// It never answers herr.NotFound: the subscription is what it creates, so
// a NotFound from the driver names a broker resource under it (a topic,
// an exchange, a stream) that is missing or still being made by a
// concurrent caller, which is herr.Unavailable (retry) and must not reach
// a client as a 404.
func (b *Broker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	err := b.d.CreateSubscription(ctx, name, groups)
	if herr.CodeOf(err) == herr.NotFound {
		return herr.Wrap(herr.Unavailable, err, "pubsubx: the broker could not create the subscription yet: a resource it needs is missing or being created; retry")
	}
	return err
}

// UpdateSubscription replaces the filter of an existing subscription
// without losing messages it already holds.
func (b *Broker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	return b.d.UpdateSubscription(ctx, name, groups)
}

// DeleteSubscription deletes name and whatever it still holds.
func (b *Broker) DeleteSubscription(ctx context.Context, name string) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	return b.d.DeleteSubscription(ctx, name)
}

// Receive returns up to p.Max messages from subscription name. It
// returns as soon as at least one is available, with whatever else is
// available at once (up to p.Max), or with none when p.Wait passes first.
// It never keeps a message it did not return: the rest stay available to
// the next Receive, here or in another process, immediately; except on a
// driver that documents a bounded hold (RabbitMQ keeps its subscription's
// consumer between Receives: at most its prefetch, for at most its hold
// after the last Receive; drivertest's Features.ReceiveHold). p.Max below
// 1 is herr.InvalidArgument.
func (b *Broker) Receive(ctx context.Context, name string, p ReceiveParams) ([]*Message, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if p.Max < 1 {
		return nil, herr.New(herr.InvalidArgument, "pubsubx: receive: max must be at least 1, got %d", p.Max)
	}
	if p.Wait < 0 {
		p.Wait = 0
	}
	return b.d.Receive(ctx, name, p)
}

// Ack removes received messages from the subscription for good.
func (b *Broker) Ack(ctx context.Context, name string, msgs []*Message) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := checkName(name); err != nil || len(msgs) == 0 {
		return err
	}
	return b.d.Ack(ctx, name, msgs)
}

// Nack makes received messages available again at once.
func (b *Broker) Nack(ctx context.Context, name string, msgs []*Message) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := checkName(name); err != nil || len(msgs) == 0 {
		return err
	}
	return b.d.Nack(ctx, name, msgs)
}

// Ping tells, cheaply and within ctx's deadline, whether b can reach its
// broker right now. Readiness checks (GET /health/ready, gRPC health)
// call it; a nil error means a Send issued now would be attempted against
// a live connection. Ping never dials more than once per call and never
// blocks past ctx.
func (b *Broker) Ping(ctx context.Context) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	return b.d.Ping(ctx)
}

// Close releases the broker's resources. Later calls fail with
// herr.Unavailable; closing twice is harmless (the second returns nil).
func (b *Broker) Close() error {
	first := false
	b.once.Do(func() {
		first = true
		b.closed.Store(true)
		b.err = b.d.Close()
	})
	if !first {
		return nil
	}
	return b.err
}

// Backlog is a subscription's backlog (driver.Backlog).
type Backlog = driver.Backlog

// ErrNoBacklog is Backlog's error on a driver that cannot tell a
// subscription's backlog without receiving from it (driver.BacklogReporter).
var ErrNoBacklog = herr.New(herr.Unimplemented, "pubsubx: this broker does not report a subscription's backlog")

// Backlog returns what subscription name holds ready for delivery, from
// one call to the broker; ErrNoBacklog when the driver cannot tell.
func (b *Broker) Backlog(ctx context.Context, name string) (Backlog, error) {
	if err := b.check(ctx); err != nil {
		return Backlog{}, err
	}
	if err := checkName(name); err != nil {
		return Backlog{}, err
	}
	r, ok := b.d.(driver.BacklogReporter)
	if !ok {
		return Backlog{}, ErrNoBacklog
	}
	return r.Backlog(ctx, name)
}
