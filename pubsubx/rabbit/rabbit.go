// Package rabbit is Herald's RabbitMQ broker: a *pubsubx.Broker over AMQP
// 0-9-1 with github.com/rabbitmq/amqp091-go.
//
// gocloud.dev/pubsub/rabbitpubsub is not used underneath: its topic
// publishes with the mandatory flag and reports an event that no queue
// wants as a failed send (Herald must accept it), it serializes all sends
// of a topic, and it has no API for queue or binding administration or for
// a bounded receive. Its configuration convention is kept (see # URLs).
//
// # URLs
//
//	rabbit://EXCHANGE?url=amqp://USER:PASS@HOST:5672/VHOST&ackdeadline=60s&prefetch=500&hold=1s&max_pending=100000&max_pending_bytes=268435456&overflow=reject-publish
//
// EXCHANGE names the deployment's topic exchange (1-200 letters, digits,
// '-', '_' or '.'); it is declared durable on first use. url is the AMQP
// server URL; when absent, the environment variable RABBIT_SERVER_URL is
// used, as gocloud's rabbitpubsub does, so credentials can stay out of the
// broker URL. ackdeadline (a Go duration, default 60s) is how long a
// received, unsettled message stays hidden before it is delivered again.
// prefetch (messages, 1-65535, default 500) and hold (a Go duration,
// default 1s) bound what a subscription's consumer keeps ahead of Receive
// (see # Delivery semantics). max_pending, max_pending_bytes and overflow bound each subscription's
// queue (see # Limits; pubsubx.QueryBounds). Other query parameters are
// refused.
//
// Publishing and receiving use separate connections, as RabbitMQ advises,
// so that flow control on publishers never blocks acks. Reads go through a
// 64 KiB buffer, and the publishing connection's writes made while the
// socket is busy leave together (amqp091 writes each message on its own):
// a batch's pipelined publishes take a few system calls, not one each.
//
// # Connections
//
// Opening does not dial. The first call starts one background goroutine
// per connection that dials (TCP, AMQP handshake and declaring the
// deployment exchange, within 10 s) and, whenever a dial fails or a live
// connection breaks, dials again after a backoff that doubles from 100 ms
// to 5 s, with jitter, until it succeeds or the Broker is closed. Callers
// never dial and no lock is held across network I/O: a call made while a
// dial is in flight waits for that dial only until its context ends; a
// call made while the loop backs off fails at once with herr.Unavailable
// and the last dial's error. So a black-holed server (one that accepts TCP
// and never answers) costs each call at most its own deadline, however
// many calls wait, and a broker opened while RabbitMQ is down works once
// it is back. Every AMQP round trip (opening a channel, a declare, a
// publisher confirm) also returns when the caller's context ends; the
// abandoned round trip finishes in the background, bounded by the
// connection's heartbeats, and its channel is pooled or closed then. Close
// aborts a dial in flight.
//
// # Delivery semantics
//
// At least once, in publish order. Each subscription is a durable classic
// queue, "EXCHANGE:NAME" (hashed when too long), so it survives broker
// restarts and is shared by every process that opens the same URL.
// Messages are persistent and Send waits for the publisher confirm: a nil
// error means RabbitMQ routed the message to every matching queue and
// stored it.
//
// Receive reads from the subscription's consumer: the first Receive on a
// subscription opens a channel for it and registers one consumer with
// basic.qos prefetch (per Broker, shared by all of its Receives on that
// subscription), and the consumer stays registered while Receives keep
// coming. RabbitMQ pushes messages to it as they arrive, up to prefetch
// unacked at once; Receive returns up to max of those it holds, in queue
// order, waiting up to its wait when it holds none. A burst still
// arriving (messages less than 10 ms apart) is gathered first, for at most
// 100 ms, so what is ready at once comes in one Receive. Acks of a
// reader's contiguous messages merge into one basic.ack with multiple set.
// A consumer kept this way costs RabbitMQ about a third less CPU per
// message than registering and cancelling one per Receive did
// (docs/benchmarks.md, "RabbitMQ under Herald's pull traffic").
//
// So, unlike the other drivers, a Broker may hold messages it has not
// returned, within two bounds (drivertest's Features.ReceiveHold): at most
// prefetch messages per subscription (held and received-unsettled
// together), and for at most hold after its last Receive on the
// subscription returned: then the consumer is cancelled, the held
// messages are nacked back to their original positions for any client,
// and the channel closes once what was handed out is settled. Another
// process receiving from the same subscription meanwhile gets what this
// one does not hold; RabbitMQ spreads new messages over both consumers.
// A process that is frozen (a Lambda between invocations, a throttled
// container) cannot release; RabbitMQ requeues what it held when the
// connection's heartbeats stop, about 20 s with amqp091's default of 10 s,
// as it does for received, unsettled messages. Where that is too long,
// give a small prefetch and hold.
//
// RabbitMQ has no per-message ack deadline. A timer per Receive nacks,
// with requeue, whatever of it is still unsettled when ackdeadline
// passes; they go back to the queue at their original positions. Because
// delivery tags belong to a channel of one connection, a message can only
// be acked or nacked through the Broker that received it; Herald's pull
// handler receives and settles in one request, so this holds. Settling a
// message whose deadline already passed is a no-op (it has been or will be
// redelivered), as is settling one twice.
//
// Nack keeps the messages in the Broker: they join the held ones in queue
// order, so the next Receive here returns them first, without a round
// trip or a redelivery by RabbitMQ (they stay within the prefetch and go
// back to the queue with the hold, or when the connection ends, like any
// held message). An expired ack deadline, and a Nack on a subscription
// whose hold is being released, use basic.nack with requeue instead, which
// puts the messages back at their original positions: the consumer is
// cancelled first and what it held is nacked with them (the next Receive
// registers it again), so nothing pushed meanwhile overtakes them. Either
// way a single receiver keeps seeing messages in publish order, nacked and
// expired ones included (Features.PublishOrder). Ack and Nack make a round
// trip on the message's channel, so when they return the server has
// applied them and the next Receive sees the result.
//
// # Filters
//
// The deployment exchange is a topic exchange and every message is
// published with its event type as routing key. Each subscription has a
// filter exchange of its own (a fanout exchange, auto-deleted with its
// queue), bound from the deployment exchange once per event type of its
// groups (or with "#" when it has no groups) and bound to the queue. The
// routing decision is made once, on the deployment exchange; a fanout
// passes what reaches it on without matching again, which costs RabbitMQ
// less per message than a second topic exchange (filter exchanges made by
// earlier versions are topic exchanges bound with "#", and route the same;
// the next update replaces them). Event types follow filter.EventTypePattern, so they never contain
// the topic wildcards '*' or '#' and a binding on a type matches exactly
// that type, '.' included; a group-less subscription's "#" matches every
// message. Resource-id filters cannot be expressed in AMQP bindings: only
// the event type is pushed down and the handler re-checks the rest.
//
// UpdateSubscription is lossless: the filter exchange alternates between
// two names ("QUEUE|a" and "QUEUE|b"); the new one is declared, bound and
// attached to the queue before the old one is deleted, which drops its
// bindings all at once (AMQP cannot list bindings). The queue and what it
// holds are untouched. Concurrent updates of one subscription end with one
// of their filters or, rarely, the union of both (a superset; the handler
// re-checks).
//
// # Errors
//
// One table (amqpCodes) maps AMQP reply codes: 404 NOT_FOUND is
// herr.NotFound, 406 PRECONDITION_FAILED and 405 RESOURCE_LOCKED are
// FailedPrecondition, 311 CONTENT_TOO_LARGE is InvalidArgument; refused
// connections, closed channels or connections, credential and permission
// failures are Unavailable. CreateSubscription of an existing queue is
// AlreadyExists; calls on a missing one are NotFound. A closed Broker
// answers herr.Unavailable.
//
// # Limits
//
//   - Backlog: each subscription's queue is declared with x-max-length
//     max_pending (default 100,000 messages), x-max-length-bytes
//     max_pending_bytes (default 256 MiB of bodies) and x-overflow
//     overflow, so that a subscription nobody reads cannot grow the
//     broker without limit. RabbitMQ counts the messages ready in the
//     queue, not those received and unsettled. At the bound, with
//     overflow=reject-publish (the default), RabbitMQ routes the message
//     to the queues with room and nacks the publish: Send fails with
//     herr.ResourceExhausted, and nothing a queue holds is lost; with
//     overflow=drop-head it drops the queue's oldest ready messages
//     instead (lost, not dead-lettered). The arguments are fixed when a
//     queue is declared: queues declared before Herald set them keep no
//     bound, and a RabbitMQ policy (max-length, max-length-bytes,
//     overflow on the queues "EXCHANGE:*") bounds them.
//   - Bodies up to RabbitMQ's max_message_size (128 MiB by default).
//   - Routing keys and header names are AMQP short strings: metadata keys
//     up to 255 bytes; a longer event type is routed by its first 255
//     bytes (routingKey).
//   - Each subscription being received from holds one channel of the
//     receiving connection until its hold passes and what it handed out is
//     settled or past its deadline; a connection has channel_max (2047 by
//     default) channels.
//   - A subscription's consumer holds at most prefetch messages, received
//     and unreceived together, so at most prefetch times the largest
//     message in memory; a Receive returns at most prefetch.
//   - ackdeadline must stay below the server's consumer_timeout (30 min by
//     default), or RabbitMQ closes the channel itself first (the messages
//     are then redelivered early, not lost).
//   - Creating one name from two processes at once may let both succeed;
//     they then share one queue.
package rabbit

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "rabbit"

// DefaultAckDeadline is used when the URL gives none.
const DefaultAckDeadline = 60 * time.Second

// DefaultPrefetch is the prefetch of a subscription's consumer when the URL
// gives none: the most messages RabbitMQ delivers to one Broker's consumer
// ahead of their acks, those held for the next Receive and those received
// and not yet settled together (see # Delivery semantics).
const DefaultPrefetch = 500

// DefaultHold is how long a subscription's consumer stays registered, and
// keeps the messages pushed to it, after the last Receive on it returned,
// when the URL gives none.
const DefaultHold = time.Second

// ServerURLEnv is the environment variable read when the URL has no url
// parameter (the name gocloud's rabbitpubsub uses).
const ServerURLEnv = "RABBIT_SERVER_URL"

// maxPooledChannels bounds the idle channels kept for reuse per connection.
const maxPooledChannels = 32

func init() {
	pubsubx.Register(Scheme, openURL)
}

func openURL(_ context.Context, u *url.URL) (driver.Broker, error) {
	if err := pubsubx.CheckQuery(u, "url", "ackdeadline", "prefetch", "hold", "max_pending", "max_pending_bytes", "overflow"); err != nil {
		return nil, err
	}
	bounds, err := pubsubx.QueryBounds(u)
	if err != nil {
		return nil, err
	}
	exchange := u.Host + strings.TrimPrefix(u.Path, "/")
	q := u.Query()
	server := q.Get("url")
	if server == "" {
		server = os.Getenv(ServerURLEnv)
	}
	if server == "" {
		return nil, herr.New(herr.InvalidArgument, "rabbit URL: no server: give url=amqp://… or set %s", ServerURLEnv)
	}
	opts := Options{ServerURL: server, Exchange: exchange, Bounds: bounds}
	d, err := pubsubx.QueryDuration(u, "ackdeadline")
	if err != nil {
		return nil, err
	}
	opts.AckDeadline = d
	if opts.Hold, err = pubsubx.QueryDuration(u, "hold"); err != nil {
		return nil, err
	}
	if s := q.Get("prefetch"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPrefetch {
			return nil, herr.New(herr.InvalidArgument, "rabbit URL: prefetch %q is not a number of messages from 1 to %d", s, maxPrefetch)
		}
		opts.Prefetch = n
	}
	return open(opts)
}

// Options configure Open.
type Options struct {
	// ServerURL is the AMQP URL, e.g. "amqp://guest:guest@127.0.0.1:5672/".
	ServerURL string
	// Exchange is the deployment's topic exchange.
	Exchange string
	// AckDeadline defaults to DefaultAckDeadline.
	AckDeadline time.Duration
	// Prefetch is the prefetch count of each subscription's consumer, in
	// messages, 1 to 65535; 0 means DefaultPrefetch.
	Prefetch int
	// Hold is how long a subscription's consumer stays registered after
	// the last Receive on it; 0 means DefaultHold.
	Hold time.Duration
	// Bounds bound each subscription's queue (see # Limits); zero fields
	// take pubsubx's defaults.
	Bounds pubsubx.Bounds
}

// Open returns a Broker on opts.Exchange. It validates opts but does not
// dial; see the package doc.
func Open(opts Options) (*pubsubx.Broker, error) {
	d, err := open(opts)
	if err != nil {
		return nil, err
	}
	return pubsubx.NewBroker(d), nil
}

// open is Open's driver.
func open(opts Options) (*broker, error) {
	if err := checkExchange(opts.Exchange); err != nil {
		return nil, err
	}
	if _, err := amqp.ParseURI(opts.ServerURL); err != nil {
		// The message omits the URL: it may hold a password.
		return nil, herr.New(herr.InvalidArgument, "rabbit URL: the server URL is not an amqp:// or amqps:// URL")
	}
	if opts.AckDeadline <= 0 {
		opts.AckDeadline = DefaultAckDeadline
	}
	if opts.Prefetch > maxPrefetch || opts.Prefetch < 0 {
		return nil, herr.New(herr.InvalidArgument, "rabbit: prefetch %d is not a number of messages from 1 to %d", opts.Prefetch, maxPrefetch)
	}
	if opts.Prefetch == 0 {
		opts.Prefetch = DefaultPrefetch
	}
	if opts.Hold <= 0 {
		opts.Hold = DefaultHold
	}
	if err := opts.Bounds.Validate(); err != nil {
		return nil, err
	}
	b := &broker{exchange: opts.Exchange, ackDeadline: opts.AckDeadline, prefetch: opts.Prefetch, hold: opts.Hold,
		bounds: opts.Bounds.WithDefaults(), feeds: map[string]*feed{}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.pub = newConn(b, opts.ServerURL, "publish")
	b.sub = newConn(b, opts.ServerURL, "receive")
	return b, nil
}

type broker struct {
	exchange    string
	ackDeadline time.Duration
	prefetch    int            // of each subscription's consumer
	hold        time.Duration  // a consumer's life after the last Receive
	bounds      pubsubx.Bounds // with defaults

	pub *conn // publishing: one confirm-mode channel
	sub *conn // receiving, settling and administration

	// ctx is cancelled by Close: it aborts dials in flight and stops the
	// reconnect loops.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	feeds  map[string]*feed // by queue: the subscriptions being received from
}

func (b *broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// BatchOptions implements driver.Broker: a batch goes whole to
// SendBatch, and order is kept (a channel keeps publish order into each queue).
func (b *broker) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{KeepsPublishOrder: true, CheapFilterUpdates: true}
}

// SendBatch implements driver.Broker with pipelined publisher
// confirms: every message is published on the one publishing channel in
// batch order (a channel keeps it, so each queue holds them in that
// order), and only then are the confirms awaited, so a batch costs about
// one round trip. Each message gets its own result: one that is refused
// (a bad header, a nack) fails alone. A message whose confirm has not
// come when ctx ends fails; it may or may not have been stored.
func (b *broker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	errs := make([]error, len(msgs))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if b.isClosed() {
		return fail(errClosed)
	}
	ch, err := b.pub.publisher(ctx)
	if err != nil {
		return fail(err)
	}
	confirms := make([]*amqp.DeferredConfirmation, len(msgs))
publish:
	for i, m := range msgs {
		headers := make(amqp.Table, len(m.Metadata))
		for k, v := range m.Metadata {
			if k == "" || len(k) > 255 {
				errs[i] = herr.New(herr.InvalidArgument, "metadata keys must be 1-255 bytes")
				continue publish
			}
			headers[k] = v
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, b.exchange, routingKey(m.Metadata[pubsubx.AttrEventType]), false, false, amqp.Publishing{
			Headers:      headers,
			Body:         m.Body,
			DeliveryMode: amqp.Persistent,
			MessageId:    m.Metadata[pubsubx.AttrEventID],
		})
		switch {
		case err != nil:
			errs[i] = wrap(err, "RabbitMQ did not accept the message")
		case dc == nil:
			errs[i] = herr.New(herr.Internal, "publishing channel is not in confirm mode")
		default:
			confirms[i] = dc
		}
	}
	for i, dc := range confirms {
		if dc == nil {
			continue
		}
		acked, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			errs[i] = wrap(err, "RabbitMQ did not confirm the message in time; it may or may not have been stored")
		case !acked:
			errs[i] = b.nacked()
		}
	}
	return errs
}

// nacked is the Send result of a message RabbitMQ refused (basic.nack).
// With overflow=reject-publish that is, but for an internal error of the
// broker, a subscription's queue at its bounds (RabbitMQ routed the
// message to the queues with room and refused it for the full one):
// herr.ResourceExhausted, naming the bounds but no queue, since a
// publisher need not learn what another principal's consumers are called.
func (b *broker) nacked() error {
	if b.bounds.Overflow == pubsubx.RejectPublish {
		return herr.New(herr.ResourceExhausted, "RabbitMQ did not store the event for a consumer that is not keeping up: its subscription holds max_pending=%d messages or max_pending_bytes=%d bytes; consume or delete it, or raise the bounds in the broker URL",
			b.bounds.MaxPending, b.bounds.MaxPendingBytes)
	}
	return herr.New(herr.Unavailable, "RabbitMQ did not confirm the message; it may not have been stored")
}

// queueArgs are the arguments a subscription's queue is declared with:
// its bounds (see # Limits).
func (b *broker) queueArgs() amqp.Table {
	return amqp.Table{
		"x-max-length":       b.bounds.MaxPending,
		"x-max-length-bytes": b.bounds.MaxPendingBytes,
		"x-overflow":         string(b.bounds.Overflow),
	}
}

// maxRoutingKey is the AMQP short-string limit of a routing key, in bytes.
const maxRoutingKey = 255

// routingKey is the routing key of an event type: the type itself, cut to
// maxRoutingKey bytes. Event types may be 256 characters (the
// notifications API's limit), one more than a routing key holds; types that
// share their first 255 bytes then share a key, which the binding of either
// matches: a superset, which the handler's re-check makes exact.
func routingKey(eventType string) string {
	if len(eventType) > maxRoutingKey {
		return eventType[:maxRoutingKey]
	}
	return eventType
}

// bindingKeys lists the routing keys that push groups down: each distinct
// event type's routing key, or "#" (every key) when there are no groups.
func bindingKeys(groups filter.Groups) []string {
	if len(groups) == 0 {
		return []string{"#"}
	}
	seen := map[string]bool{}
	var keys []string
	for _, g := range groups {
		if k := routingKey(g.EventType); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// queueExists reports whether queue exists, with a passive declare.
func (b *broker) queueExists(ctx context.Context, queue string) (bool, error) {
	var exists bool
	err := b.sub.do(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if isNotFound(err) {
			return nil
		}
		exists = err == nil
		return err
	})
	return exists, wrap(err, "cannot look up the subscription's queue")
}

// exchangeExists reports whether exchange exists, with a passive declare.
func (b *broker) exchangeExists(ctx context.Context, exchange string) (bool, error) {
	var exists bool
	err := b.sub.do(ctx, func(ch *amqp.Channel) error {
		err := ch.ExchangeDeclarePassive(exchange, amqp.ExchangeTopic, true, true, false, false, nil)
		if isNotFound(err) {
			return nil
		}
		exists = err == nil
		return err
	})
	return exists, wrap(err, "cannot look up the subscription's filter exchange")
}

func notFound(name string) error {
	return herr.New(herr.NotFound, "subscription %q does not exist", name)
}

func (b *broker) prepare(ctx context.Context, name string, groups filter.Groups) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if b.isClosed() {
		return "", errClosed
	}
	if err := checkSubscription(name); err != nil {
		return "", err
	}
	if err := groups.Validate("filter_groups"); err != nil {
		return "", err
	}
	return queueName(b.exchange, name), nil
}

// CreateSubscription declares the queue and its filter exchange; see the
// package doc, "Filters".
func (b *broker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	queue, err := b.prepare(ctx, name, groups)
	if err != nil {
		return err
	}
	exists, err := b.queueExists(ctx, queue)
	if err != nil {
		return err
	}
	if exists {
		return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
	}
	fx := filterExchanges(queue)
	err = b.sub.do(ctx, func(ch *amqp.Channel) error {
		// Leftovers of an interrupted create or delete would add bindings.
		for _, x := range fx {
			if err := ch.ExchangeDelete(x, false, false); err != nil {
				return err
			}
		}
		if _, err := ch.QueueDeclare(queue, true, false, false, false, b.queueArgs()); err != nil {
			return err
		}
		return b.attach(ch, queue, fx[0], groups)
	})
	return wrap(err, "cannot create the subscription")
}

// attach declares filter exchange fx, binds it from the deployment
// exchange for groups, and binds it to queue.
func (b *broker) attach(ch *amqp.Channel, queue, fx string, groups filter.Groups) error {
	if err := ch.ExchangeDeclare(fx, amqp.ExchangeFanout, true, true, false, false, nil); err != nil {
		return err
	}
	for _, key := range bindingKeys(groups) {
		if err := ch.ExchangeBind(fx, key, b.exchange, false, nil); err != nil {
			return err
		}
	}
	return ch.QueueBind(queue, "", fx, false, nil)
}

// UpdateSubscription binds a fresh filter exchange before deleting the old
// one, so nothing that passes both filters is missed in between.
func (b *broker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	queue, err := b.prepare(ctx, name, groups)
	if err != nil {
		return err
	}
	exists, err := b.queueExists(ctx, queue)
	if err != nil {
		return err
	}
	if !exists {
		return notFound(name)
	}
	fx := filterExchanges(queue)
	cur, next := fx[0], fx[1]
	aExists, err := b.exchangeExists(ctx, fx[0])
	if err != nil {
		return err
	}
	if !aExists {
		cur, next = fx[1], fx[0]
	}
	err = b.sub.do(ctx, func(ch *amqp.Channel) error {
		// next may be a leftover of an interrupted update: start it clean.
		if err := ch.ExchangeDelete(next, false, false); err != nil {
			return err
		}
		if err := b.attach(ch, queue, next, groups); err != nil {
			return err
		}
		return ch.ExchangeDelete(cur, false, false)
	})
	if isNotFound(err) {
		return notFound(name) // deleted meanwhile
	}
	return wrap(err, "cannot update the subscription")
}

// DeleteSubscription deletes the queue (and with it its messages and, by
// auto-delete, its filter exchange).
func (b *broker) DeleteSubscription(ctx context.Context, name string) error {
	queue, err := b.prepare(ctx, name, nil)
	if err != nil {
		return err
	}
	// queue.delete of a missing queue succeeds, so look first.
	exists, err := b.queueExists(ctx, queue)
	if err != nil {
		return err
	}
	if !exists {
		return notFound(name)
	}
	err = b.sub.do(ctx, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
			return err
		}
		// Auto-delete removes the filter exchange with its last binding;
		// delete both names anyway in case one was never bound.
		for _, x := range filterExchanges(queue) {
			if err := ch.ExchangeDelete(x, false, false); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(err, "cannot delete the subscription")
}

// Close closes both connections; RabbitMQ returns every unsettled message
// to its queue.
func (b *broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	err1 := b.pub.close()
	err2 := b.sub.close()
	if err1 != nil {
		return wrap(err1, "closing the publishing connection")
	}
	return wrap(err2, "closing the receiving connection")
}

// Ping implements driver.Broker: a passive declare of the deployment
// exchange on the publishing connection, one round trip. It never dials:
// with no connection it waits for the background dial in flight (or
// answers the last failure at once while that loop backs off), until ctx
// ends. Errors are herr.Unavailable (or DeadlineExceeded, Canceled from
// ctx); a missing exchange is herr.NotFound.
func (b *broker) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "ping")
	}
	err := b.pub.do(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(b.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	})
	return wrap(err, "RabbitMQ did not answer a ping")
}
