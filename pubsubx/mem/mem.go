// Package mem is Herald's in-process broker: the default of the local
// adapter and of tests.
//
// gocloud.dev/pubsub/mempubsub is not used underneath because it cannot
// serve Herald's contract: it delivers in map (random) order, cannot remove
// a subscription from its topic, and sleeps 250 ms in every empty receive.
// This driver keeps gocloud's semantics (ack deadlines, nack = available at
// once) and adds what Herald needs. It passes pubsubx/drivertest unchanged.
//
// # URLs
//
//	mem://NAME?ackdeadline=60s&max_pending=100000&max_pending_bytes=268435456&overflow=reject-publish
//
// NAME selects a topic shared by every client opened on the same NAME in
// this process, as handler instances share a real broker's topic. Each Open
// returns a client of its own: closing it fails that client's later calls
// and leaves the other clients working. When the last client of NAME
// closes, the topic and its subscriptions are dropped, and the next Open of
// NAME starts a new, empty one. ackdeadline (a Go duration, default 60s) is
// how long a message this client receives stays hidden, unsettled, before
// it is delivered again.
//
// # Bounds
//
// A subscription holds at most max_pending messages (default
// DefaultMaxPending, 100,000) whose bodies total at most
// max_pending_bytes (default DefaultMaxPendingBytes, 256 MiB), ready and
// in flight together, so that a subscription nobody reads cannot grow
// until the process runs out of memory. What a Send does for a full
// subscription is the overflow parameter (RabbitMQ's x-overflow names):
//
//   - reject-publish (RejectPublish, the default): the message is not
//     stored for that subscription and its Send result is a
//     *pubsubx.SubscriptionsFullError (herr.ResourceExhausted) naming the
//     full subscriptions; the subscriptions with room still get it.
//     Herald then puts the event in the dead-letter queue of each full
//     subscription's consumer (reason MAXLEN) and answers the publish a
//     success, so one consumer that does not keep up fails no publish
//     (package delivery); only when that fails is the publish result
//     success false, and a publisher that retries may deliver the event
//     twice to the others, which at-least-once delivery allows. Nothing a
//     subscription holds is ever lost to the bound.
//   - drop-head (DropHead): the Send succeeds and the oldest ready
//     messages of the full subscription are dropped to make room, as a
//     capped stream (Redis XADD MAXLEN); Dropped counts them. Messages in
//     flight (received, unsettled) are never dropped.
//
// Either way other subscriptions are not affected, and a message bigger
// than max_pending_bytes on its own is stored in an empty subscription.
// The bounds are the sending client's: each Send checks the
// subscriptions it adds to by its own URL's values.
//
// # Delivery semantics
//
// Publish order: a subscription delivers messages in the order they were
// sent (a batch in batch order, stored at once), and a nacked or expired message goes back to its place in that
// order. Filters are applied in full at send time. A message's Body and
// Metadata are stored and delivered as they were sent, not copied: they
// are immutable once sent (driver.Message), so one event costs one body
// however many subscriptions deliver it, and a receive copies nothing.
//
// Ack and Nack take the handle of the latest delivery of a message. An Ack
// with an older handle (the ack deadline passed and the message was
// delivered again) still removes the message, since its receiver took
// custody of it; a Nack with an older handle is ignored, so that it cannot
// put back a message another receiver holds. Settling a message twice is
// harmless.
//
// # Errors
//
// herr.NotFound for an unknown subscription, herr.AlreadyExists when
// creating one that exists, herr.Unavailable after Close, herr.InvalidArgument
// for max < 1 or a handle from another subscription. There is no size limit.
package mem

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "mem"

// DefaultAckDeadline is used when the URL gives none.
const DefaultAckDeadline = 60 * time.Second

// Default bounds of one subscription (see Bounds in the package doc).
const (
	// DefaultMaxPending is max_pending's default: 100,000 messages, about
	// 100 MiB of typical 1 KiB events.
	DefaultMaxPending = 100_000
	// DefaultMaxPendingBytes is max_pending_bytes's default: 256 MiB of
	// bodies, a thousand of Herald's largest events.
	DefaultMaxPendingBytes = 256 << 20
)

// Overflow is what a Send does for a subscription at its bounds (the
// overflow query parameter; RabbitMQ's x-overflow names).
type Overflow string

const (
	// RejectPublish, the default: the message is not stored for a full
	// subscription, and its Send result is a herr.ResourceExhausted error
	// that says so (the other subscriptions still get it). Nothing a
	// subscription holds is lost; the publisher learns that a consumer is
	// not keeping up and may retry.
	RejectPublish Overflow = "reject-publish"
	// DropHead: the message is stored and the oldest ready messages of
	// the full subscription are dropped to make room, counted by Dropped
	// (a capped stream, as Redis XADD MAXLEN). Send succeeds; the dropped
	// events are lost.
	DropHead Overflow = "drop-head"
)

// Limits are a client's subscription bounds (see Bounds in the package
// doc); zero fields take their defaults.
type Limits struct {
	MaxPending      int      // messages
	MaxPendingBytes int      // bytes of bodies
	Overflow        Overflow // "" = RejectPublish
}

func (l Limits) withDefaults() Limits {
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	if l.MaxPendingBytes <= 0 {
		l.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if l.Overflow == "" {
		l.Overflow = RejectPublish
	}
	return l
}

func init() {
	pubsubx.Register(Scheme, openURL)
}

var (
	namedMu sync.Mutex
	named   = map[string]*topic{}
)

func openURL(_ context.Context, u *url.URL) (driver.Broker, error) {
	if err := pubsubx.CheckQuery(u, "ackdeadline", "max_pending", "max_pending_bytes", "overflow"); err != nil {
		return nil, err
	}
	var limits Limits
	switch o := Overflow(u.Query().Get("overflow")); o {
	case "", RejectPublish, DropHead:
		limits.Overflow = o
	default:
		return nil, herr.New(herr.InvalidArgument, "mem URL: overflow %q is not %s or %s", o, RejectPublish, DropHead)
	}
	for _, p := range []struct {
		key string
		dst *int
	}{{"max_pending", &limits.MaxPending}, {"max_pending_bytes", &limits.MaxPendingBytes}} {
		if s := u.Query().Get(p.key); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return nil, herr.New(herr.InvalidArgument, "mem URL: %s %q is not a positive integer", p.key, s)
			}
			*p.dst = n
		}
	}
	deadline, err := pubsubx.QueryDuration(u, "ackdeadline")
	if err != nil {
		return nil, err
	}
	if deadline == 0 {
		deadline = DefaultAckDeadline
	}
	name := u.Host + u.Path
	namedMu.Lock()
	defer namedMu.Unlock()
	t := named[name]
	if t == nil {
		t = newTopic(name)
		named[name] = t
	}
	return t.connect(deadline, limits), nil
}

// New returns a client of a fresh, unnamed topic whose unsettled messages
// are redelivered after ackDeadline (DefaultAckDeadline when zero).
func New(ackDeadline time.Duration) *pubsubx.Broker {
	return NewWithLimits(ackDeadline, Limits{})
}

// NewWithLimits is New with the subscription bounds of limits.
func NewWithLimits(ackDeadline time.Duration, limits Limits) *pubsubx.Broker {
	if ackDeadline <= 0 {
		ackDeadline = DefaultAckDeadline
	}
	return pubsubx.NewBroker(newTopic("").connect(ackDeadline, limits))
}

// topic is the state that clients of one NAME share.
type topic struct {
	name string // "" when unnamed (New)

	mu      sync.Mutex
	clients int // open clients; the topic is dropped at zero
	nextID  uint64
	subs    map[string]*subscription
}

// client is one Open: a driver.Broker with its own closed state, ack
// deadline and bounds.
type client struct {
	t           *topic
	ackDeadline time.Duration
	limits      Limits
	closed      bool // guarded by t.mu
}

type entry struct {
	id       uint64 // send order
	body     []byte // the sender's, shared by every subscription (see SendBatch)
	meta     map[string]string
	delivery uint64    // deliveries so far; a handle names one
	deadline time.Time // while in flight
	sent     time.Time // when its SendBatch stored it (Backlog's Oldest)
}

type subscription struct {
	groups   filter.Groups
	ready    []*entry // sorted by id
	inflight map[uint64]*entry
	bytes    int           // bodies held, ready and in flight
	dropped  int64         // messages dropped at the bounds
	wake     chan struct{} // closed and replaced when ready grows or state changes
	deleted  bool
}

// handle is the receipt of one delivery of one message.
type handle struct {
	sub      *subscription
	id       uint64
	delivery uint64
}

func newTopic(name string) *topic {
	return &topic{name: name, subs: map[string]*subscription{}}
}

// connect returns a new client of t.
func (t *topic) connect(ackDeadline time.Duration, limits Limits) *client {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clients++
	return &client{t: t, ackDeadline: ackDeadline, limits: limits.withDefaults()}
}

var errClosed = herr.New(herr.Unavailable, "in-memory broker is closed")

func notFound(name string) error {
	return herr.New(herr.NotFound, "subscription %q does not exist", name)
}

// lock locks the topic for a call on c, failing when ctx is done or c is
// closed. On success the caller unlocks c.t.mu.
func (c *client) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.t.mu.Lock()
	if c.closed {
		c.t.mu.Unlock()
		return errClosed
	}
	return nil
}

// BatchOptions implements driver.Broker: the whole batch is stored at
// once, in order, and there is no size limit.
func (c *client) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{KeepsPublishOrder: true, CheapFilterUpdates: true}
}

// SendBatch implements driver.Broker: the whole batch is stored under one
// lock, in order, so no other send interleaves with it, each message in
// every subscription whose filter it passes (the Body and Metadata the
// sender handed over, shared). A message's result is nil, the error of a
// done ctx or a closed client (every message alike), or, under
// RejectPublish, the ResourceExhausted error of a subscription it found
// full.
func (c *client) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	errs := make([]error, len(msgs))
	if err := c.lock(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer c.t.mu.Unlock()
	woken := map[*subscription]bool{}
	now := time.Now()
	for i, m := range msgs {
		c.t.nextID++
		var full []string
		for name, s := range c.t.subs {
			if !s.groups.Match(m.EventType(), m.ResourceID()) {
				continue
			}
			if c.limits.Overflow == RejectPublish && s.full(len(m.Body), c.limits) {
				full = append(full, name)
				continue
			}
			s.add(&entry{id: c.t.nextID, body: m.Body, meta: m.Metadata, sent: now}, c.limits)
			woken[s] = true
		}
		if full != nil {
			errs[i] = &pubsubx.SubscriptionsFullError{Subscriptions: full, Err: c.fullError()}
		}
	}
	for s := range woken {
		s.signal()
	}
	return errs
}

// full reports whether s, holding what it holds, has no room for one more
// message of size bytes under limits. An empty subscription always has
// room, so a message bigger than max_pending_bytes on its own is stored.
func (s *subscription) full(size int, limits Limits) bool {
	held := len(s.ready) + len(s.inflight)
	return held > 0 && (held >= limits.MaxPending || s.bytes+size > limits.MaxPendingBytes)
}

// fullError is the Send result of a message a full subscription refused.
// It does not name the subscription: a publisher need not learn what
// another principal's consumers are called.
func (c *client) fullError() error {
	return herr.New(herr.ResourceExhausted, "the in-memory broker did not store the event for a consumer that is not keeping up: its subscription holds max_pending=%d messages or max_pending_bytes=%d bytes; consume or delete it, or raise the bounds in the broker URL",
		c.limits.MaxPending, c.limits.MaxPendingBytes)
}

// add appends e to ready and then drops the oldest ready messages while s
// holds more than limits allow (see Bounds in the package doc); e itself,
// the newest, always stays. Under RejectPublish, SendBatch checks full
// first, so nothing is dropped.
func (s *subscription) add(e *entry, limits Limits) {
	s.ready = append(s.ready, e)
	s.bytes += len(e.body)
	n := 0
	for n < len(s.ready)-1 && (len(s.ready)-n+len(s.inflight) > limits.MaxPending || s.bytes > limits.MaxPendingBytes) {
		s.bytes -= len(s.ready[n].body)
		n++
	}
	if n > 0 {
		clear(s.ready[:n])
		s.ready = s.ready[n:]
		s.dropped += int64(n)
	}
}

func (s *subscription) signal() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// cloneGroups deep-copies groups, so a caller reusing its slices cannot
// change a subscription's filter behind its back.
func cloneGroups(groups filter.Groups) filter.Groups {
	if groups == nil {
		return nil
	}
	out := make(filter.Groups, len(groups))
	for i, g := range groups {
		out[i] = filter.Group{EventType: g.EventType, Filters: slices.Clone(g.Filters)}
	}
	return out
}

// CreateSubscription implements driver.Broker.CreateSubscription.
func (c *client) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.t.mu.Unlock()
	if _, ok := c.t.subs[name]; ok {
		return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
	}
	c.t.subs[name] = &subscription{groups: cloneGroups(groups), inflight: map[uint64]*entry{}, wake: make(chan struct{})}
	return nil
}

// UpdateSubscription implements driver.Broker.UpdateSubscription: the new
// filter applies to messages sent from now on; held ones stay.
func (c *client) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.t.mu.Unlock()
	s, ok := c.t.subs[name]
	if !ok {
		return notFound(name)
	}
	s.groups = cloneGroups(groups)
	return nil
}

// DeleteSubscription implements driver.Broker.DeleteSubscription.
func (c *client) DeleteSubscription(ctx context.Context, name string) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.t.mu.Unlock()
	s, ok := c.t.subs[name]
	if !ok {
		return notFound(name)
	}
	delete(c.t.subs, name)
	s.deleted = true
	s.ready, s.inflight = nil, nil
	s.signal() // wake receivers so they see it is gone
	return nil
}

// Receive implements driver.Broker.Receive. It never holds messages back:
// what it does not return stays ready for the next Receive of any client.
func (c *client) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	limit := p.Max
	end := time.Now().Add(p.Wait)
	for {
		if err := c.lock(ctx); err != nil {
			return nil, err
		}
		s, ok := c.t.subs[name]
		if !ok {
			c.t.mu.Unlock()
			return nil, notFound(name)
		}
		now := time.Now()
		next := s.requeueExpired(now)
		if len(s.ready) > 0 {
			out := s.take(now, limit, c.ackDeadline)
			c.t.mu.Unlock()
			return out, nil
		}
		wake := s.wake
		c.t.mu.Unlock()

		remaining := time.Until(end)
		if remaining <= 0 {
			return nil, nil
		}
		if !next.IsZero() {
			remaining = min(remaining, max(time.Until(next), 0))
		}
		timer := time.NewTimer(remaining)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// requeueExpired moves in-flight entries whose deadline passed back to
// their place in ready, and returns the earliest remaining deadline (zero
// if none).
func (s *subscription) requeueExpired(now time.Time) time.Time {
	var next time.Time
	for id, e := range s.inflight {
		if !now.Before(e.deadline) {
			delete(s.inflight, id)
			s.requeue(e)
			continue
		}
		if next.IsZero() || e.deadline.Before(next) {
			next = e.deadline
		}
	}
	return next
}

// requeue puts e back into ready at its place in send order.
func (s *subscription) requeue(e *entry) {
	e.deadline = time.Time{}
	i, _ := slices.BinarySearchFunc(s.ready, e.id, func(r *entry, id uint64) int { return cmpUint(r.id, id) })
	s.ready = slices.Insert(s.ready, i, e)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// take moves up to limit ready entries in flight and returns their
// messages, each a Message of its own with the handle of this delivery
// (Body and Metadata shared: they are immutable once sent).
func (s *subscription) take(now time.Time, limit int, deadline time.Duration) []*pubsubx.Message {
	n := min(limit, len(s.ready))
	out := make([]*pubsubx.Message, n)
	// The messages and their handles of one receive come from one
	// allocation each (a handle boxed in Message.Handle was another per
	// message).
	msgs := make([]pubsubx.Message, n)
	handles := make([]handle, n)
	for i, e := range s.ready[:n] {
		e.delivery++
		e.deadline = now.Add(deadline)
		s.inflight[e.id] = e
		handles[i] = handle{sub: s, id: e.id, delivery: e.delivery}
		msgs[i] = pubsubx.Message{Body: e.body, Metadata: e.meta, Handle: &handles[i]}
		out[i] = &msgs[i]
	}
	clear(s.ready[:n])
	s.ready = s.ready[n:]
	return out
}

func (c *client) settle(ctx context.Context, name string, msgs []*pubsubx.Message, ack bool) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.t.mu.Unlock()
	s, ok := c.t.subs[name]
	if !ok {
		return notFound(name)
	}
	// Check every handle before changing anything: a bad one fails the
	// whole call, not half of it.
	for _, m := range msgs {
		h, ok := m.Handle.(*handle)
		if !ok || (h.sub != s && !h.sub.deleted) {
			return herr.New(herr.InvalidArgument, "message was not received from subscription %q of this broker", name)
		}
	}
	requeued := false
	for _, m := range msgs {
		h := m.Handle.(*handle)
		if h.sub != s {
			continue // from a deleted subscription of the same name: gone already
		}
		if ack {
			s.remove(h.id)
			continue
		}
		e, ok := s.inflight[h.id]
		if !ok || e.delivery != h.delivery {
			continue // settled, expired or delivered again since: not this receiver's to put back
		}
		delete(s.inflight, h.id)
		s.requeue(e)
		requeued = true
	}
	if requeued {
		s.signal()
	}
	return nil
}

// remove drops message id from s, in flight or ready (an ack after the
// ack deadline passed); it is a no-op when id is already gone.
func (s *subscription) remove(id uint64) {
	if e, ok := s.inflight[id]; ok {
		delete(s.inflight, id)
		s.bytes -= len(e.body)
		return
	}
	if i, found := slices.BinarySearchFunc(s.ready, id, func(r *entry, id uint64) int { return cmpUint(r.id, id) }); found {
		s.bytes -= len(s.ready[i].body)
		s.ready = slices.Delete(s.ready, i, i+1)
	}
}

// Ack implements driver.Broker.Ack.
func (c *client) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return c.settle(ctx, name, msgs, true)
}

// Nack implements driver.Broker.Nack.
func (c *client) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return c.settle(ctx, name, msgs, false)
}

// Backlog implements driver.BacklogReporter: the ready messages of
// subscription name (with those whose ack deadline has passed), and when
// the oldest of them was sent.
func (c *client) Backlog(ctx context.Context, name string) (driver.Backlog, error) {
	if err := c.lock(ctx); err != nil {
		return driver.Backlog{}, err
	}
	defer c.t.mu.Unlock()
	s, ok := c.t.subs[name]
	if !ok {
		return driver.Backlog{}, notFound(name)
	}
	var b driver.Backlog
	count := func(e *entry) {
		b.Messages++
		if b.Oldest.IsZero() || e.sent.Before(b.Oldest) {
			b.Oldest = e.sent
		}
	}
	for _, e := range s.ready {
		count(e)
	}
	now := time.Now()
	for _, e := range s.inflight {
		if !now.Before(e.deadline) { // expired: ready again at the next Receive
			count(e)
		}
	}
	return b, nil
}

// Ping implements driver.Broker.Ping: the in-memory broker is reachable while
// this client is open.
func (c *client) Ping(ctx context.Context) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	c.t.mu.Unlock()
	return nil
}

// Close implements driver.Broker.Close for this client; other clients of
// the topic keep working. Closing twice is harmless.
func (c *client) Close() error {
	namedMu.Lock()
	defer namedMu.Unlock()
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.t.clients--
	if c.t.clients == 0 && c.t.name != "" && named[c.t.name] == c.t {
		delete(named, c.t.name)
	}
	for _, s := range c.t.subs {
		s.signal() // wake this client's receivers so they see it is closed
	}
	return nil
}

// Dropped returns how many messages subscription name of b's topic has
// dropped at its bounds (see Bounds in the package doc) since it was
// created. b must come from this package (Open with mem://, or New);
// otherwise, or for an unknown subscription, it fails with
// herr.InvalidArgument or herr.NotFound.
func Dropped(b *pubsubx.Broker, name string) (int64, error) {
	c, ok := b.Driver().(*client)
	if !ok {
		return 0, herr.New(herr.InvalidArgument, "mem.Dropped: not an in-memory broker")
	}
	if err := c.lock(context.Background()); err != nil {
		return 0, err
	}
	defer c.t.mu.Unlock()
	s, ok := c.t.subs[name]
	if !ok {
		return 0, notFound(name)
	}
	return s.dropped, nil
}
