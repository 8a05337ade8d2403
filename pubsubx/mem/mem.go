// Package mem is Herald's in-process broker: the default of the local
// adapter and of tests.
//
// gocloud.dev/pubsub/mempubsub is not used underneath because it cannot
// serve Herald's contract: it delivers in map (random) order, cannot remove
// a subscription from its topic, and sleeps 250 ms in every empty receive.
// This driver keeps gocloud's semantics (ack deadlines, nack = available at
// once) and adds what Herald needs.
//
// # URLs
//
//	mem://NAME?ackdeadline=60s
//
// NAME selects a broker shared by every Open of the same NAME in this
// process (closing it closes it for all of them; the next Open makes a new
// one). ackdeadline (a Go duration, default 60s) is how long a received,
// unsettled message stays hidden before it is delivered again.
//
// # Delivery semantics
//
// Publish order: a subscription delivers messages in the order they were
// sent, and a nacked or expired message goes back to its place in that
// order. Filters are applied in full at send time.
package mem

import (
	"context"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// Scheme is the URL scheme this package registers.
const Scheme = "mem"

// DefaultAckDeadline is used when the URL gives none.
const DefaultAckDeadline = 60 * time.Second

func init() {
	pubsubx.Register(Scheme, openURL)
}

var (
	namedMu sync.Mutex
	named   = map[string]*broker{}
)

func openURL(_ context.Context, u *url.URL) (pubsubx.Broker, error) {
	if err := pubsubx.CheckQuery(u, "ackdeadline"); err != nil {
		return nil, err
	}
	deadline := DefaultAckDeadline
	if s := u.Query().Get("ackdeadline"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, herr.New(herr.InvalidArgument, "mem URL: ackdeadline %q is not a positive duration", s)
		}
		deadline = d
	}
	name := u.Host + u.Path
	namedMu.Lock()
	defer namedMu.Unlock()
	b := named[name]
	if b == nil || b.isClosed() {
		b = newBroker(deadline)
		named[name] = b
	}
	return b, nil
}

// New returns a fresh, unnamed broker whose unsettled messages are
// redelivered after ackDeadline (DefaultAckDeadline when zero).
func New(ackDeadline time.Duration) pubsubx.Broker {
	if ackDeadline <= 0 {
		ackDeadline = DefaultAckDeadline
	}
	return newBroker(ackDeadline)
}

type broker struct {
	ackDeadline time.Duration

	mu     sync.Mutex
	closed bool
	nextID uint64
	subs   map[string]*subscription
}

type entry struct {
	id       uint64 // send order
	msg      *pubsubx.Message
	deadline time.Time // zero while ready
}

type subscription struct {
	groups   filter.Groups
	ready    []*entry // sorted by id
	inflight map[uint64]*entry
	wake     chan struct{} // closed and replaced when ready grows
}

func newBroker(ackDeadline time.Duration) *broker {
	return &broker{ackDeadline: ackDeadline, subs: map[string]*subscription{}}
}

func (b *broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

var errClosed = herr.New(herr.Unavailable, "in-memory broker is closed")

func notFound(name string) error {
	return herr.New(herr.NotFound, "subscription %q does not exist", name)
}

func (b *broker) Send(ctx context.Context, m *pubsubx.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	b.nextID++
	sent := &pubsubx.Message{Body: m.Body, Metadata: m.Metadata}
	for _, s := range b.subs {
		if !s.groups.Match(sent.EventType(), sent.ResourceID()) {
			continue
		}
		// Each subscription gets its own entry: handles are per subscription.
		s.ready = append(s.ready, &entry{id: b.nextID, msg: sent})
		s.signal()
	}
	return nil
}

func (s *subscription) signal() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (b *broker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	if _, ok := b.subs[name]; ok {
		return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
	}
	b.subs[name] = &subscription{groups: groups, inflight: map[uint64]*entry{}, wake: make(chan struct{})}
	return nil
}

func (b *broker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	s, ok := b.subs[name]
	if !ok {
		return notFound(name)
	}
	s.groups = groups
	return nil
}

func (b *broker) DeleteSubscription(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	s, ok := b.subs[name]
	if !ok {
		return notFound(name)
	}
	delete(b.subs, name)
	s.signal() // wake receivers so they see it is gone
	return nil
}

func (b *broker) Receive(ctx context.Context, name string, max int, wait time.Duration) ([]*pubsubx.Message, error) {
	if max < 1 {
		return nil, herr.New(herr.InvalidArgument, "receive: max must be at least 1")
	}
	end := time.Now().Add(wait)
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, errClosed
		}
		s, ok := b.subs[name]
		if !ok {
			b.mu.Unlock()
			return nil, notFound(name)
		}
		now := time.Now()
		next := s.requeueExpired(now)
		if len(s.ready) > 0 {
			out := s.take(now, max, b.ackDeadline)
			b.mu.Unlock()
			return out, nil
		}
		wake := s.wake
		b.mu.Unlock()

		remaining := time.Until(end)
		if remaining <= 0 {
			return nil, nil
		}
		if !next.IsZero() && time.Until(next) < remaining {
			remaining = max0(time.Until(next))
		}
		t := time.NewTimer(remaining)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func max0(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// requeueExpired moves in-flight entries whose deadline passed back to
// ready, and returns the earliest remaining deadline (zero if none).
func (s *subscription) requeueExpired(now time.Time) time.Time {
	var next time.Time
	moved := false
	for id, e := range s.inflight {
		if !now.Before(e.deadline) {
			delete(s.inflight, id)
			e.deadline = time.Time{}
			s.ready = append(s.ready, e)
			moved = true
			continue
		}
		if next.IsZero() || e.deadline.Before(next) {
			next = e.deadline
		}
	}
	if moved {
		sort.Slice(s.ready, func(i, j int) bool { return s.ready[i].id < s.ready[j].id })
	}
	return next
}

func (s *subscription) take(now time.Time, max int, deadline time.Duration) []*pubsubx.Message {
	n := min(max, len(s.ready))
	out := make([]*pubsubx.Message, n)
	for i, e := range s.ready[:n] {
		e.deadline = now.Add(deadline)
		s.inflight[e.id] = e
		out[i] = &pubsubx.Message{Body: e.msg.Body, Metadata: e.msg.Metadata, Handle: e.id}
	}
	clear(s.ready[:n])
	s.ready = s.ready[n:]
	return out
}

func (b *broker) settle(ctx context.Context, name string, msgs []*pubsubx.Message, ack bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	s, ok := b.subs[name]
	if !ok {
		return notFound(name)
	}
	requeued := false
	for _, m := range msgs {
		id, ok := m.Handle.(uint64)
		if !ok {
			return herr.New(herr.InvalidArgument, "message was not received from this broker")
		}
		e, ok := s.inflight[id]
		if !ok {
			continue // already settled or redelivered: settling twice is harmless
		}
		delete(s.inflight, id)
		if !ack {
			e.deadline = time.Time{}
			s.ready = append(s.ready, e)
			requeued = true
		}
	}
	if requeued {
		sort.Slice(s.ready, func(i, j int) bool { return s.ready[i].id < s.ready[j].id })
		s.signal()
	}
	return nil
}

func (b *broker) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, true)
}

func (b *broker) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, false)
}

func (b *broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for _, s := range b.subs {
		s.signal()
	}
	return nil
}
