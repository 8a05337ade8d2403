package delivery

import (
	"sync"
	"time"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/leasestore"
)

// hubEvent is one event the hub received, shared (read only) by every
// queue it matched: decoded once, however many streams it reaches.
type hubEvent struct {
	body      []byte
	event     *ConsumerEvent
	id        string    // the CloudEvent id, to deliver an event once across a hand-over
	published time.Time // publish time, for the queue's message TTL; zero when unknown
}

// hubEntry is an event waiting in a hub queue, with how often it was
// delivered from this queue before.
type hubEntry struct {
	ev    *hubEvent
	count int64
}

// queueState is where a hub queue's events go.
type queueState int

const (
	// stateLive: the queue is served here; events wait in memory for its
	// streams (or for a reconnect within the grace window).
	stateLive queueState = iota
	// stateLeaving: the queue was handed to another process; events still
	// arriving here are spilled to the store until leaveUntil, then the
	// queue is forgotten.
	stateLeaving
	// stateShared: streams on several processes read the queue from the
	// store; this process, its home, spills every event of it there.
	stateShared
)

// hubQueue is a non-durable queue held in this process's memory (see
// docs/streams-at-scale.md).
type hubQueue struct {
	hub *Hub
	id  string
	// consumer is the queue's record as this process last knew it (its
	// owner decides who may change its filters).
	consumer *leasestore.Consumer

	mu     sync.Mutex
	groups filter.Groups
	state  queueState
	buf    []hubEntry // waiting events, oldest first
	spill  []hubEntry // events to write to the store (leaving, shared)
	// overflow are events pushed out of buf by its limit, to go to the
	// dead-letter queue (MAXLEN) from the spill loop.
	overflow []hubEntry
	// streams are the queue's open streams here; detachedAt is when the
	// last one left (zero while one is open or none ever was).
	streams    map[*Stream]struct{}
	detachedAt time.Time
	createdAt  time.Time
	// claiming is set while a stream takes the queue over from another
	// process: the grace sweep leaves it alone.
	claiming bool
	// leaveUntil ends stateLeaving.
	leaveUntil time.Time
	// delivered remembers the ids of the last events handed to a stream
	// while spilled events of a hand-over may still arrive (from a claim
	// to the end of its settling window): an event in both is delivered
	// once. nil otherwise: a ring of 256 ids costs ~14 KB, more than the
	// rest of an idle stream's queue, and a queue that was never handed
	// over cannot receive an event twice.
	delivered *idRing
	// wake is closed (and replaced) when events arrive, so that streams
	// waiting in Next look again.
	wake chan struct{}
	// gone, once set, is the error every stream of the queue ends with.
	gone error
	// limit bounds buf; overflow drops the oldest.
	limit int
	// dropped counts events dropped for overflow or their delivery limit.
	dropped int64
}

func newHubQueue(h *Hub, c *leasestore.Consumer) *hubQueue {
	limit := h.cfg.QueueLimit
	if c.MaxLength > 0 {
		limit = min(limit, c.MaxLength)
	}
	return &hubQueue{
		hub: h, id: c.ID, consumer: c, groups: c.Filters, streams: map[*Stream]struct{}{},
		createdAt: c.CreatedAt, wake: make(chan struct{}), limit: limit,
	}
}

// push adds ev to the queue (the hub's dispatch), and reports whether it
// must be spilled (the spiller is then woken).
func (q *hubQueue) push(ev *hubEvent) (spill bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gone != nil {
		return false
	}
	e := hubEntry{ev: ev}
	if q.state != stateLive {
		q.spill = append(q.spill, e)
		return true
	}
	q.buf = append(q.buf, e)
	if over := len(q.buf) - q.limit; over > 0 {
		// Drop-head into the dead-letter queue, as the notifications API
		// has a queue's max-length overflow go: a client that went away
		// must not grow the process without bound.
		q.overflow = append(q.overflow, q.buf[:over]...)
		clear(q.buf[:over])
		q.buf = q.buf[over:]
		q.signal()
		return true
	}
	q.signal()
	return false
}

// signal wakes the streams waiting for events. Callers hold q.mu.
func (q *hubQueue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// putBack returns entries to the front of the queue (unsettled events of
// a stream that ended, or nacked ones), oldest first; in a spilling state
// they go to the store.
func (q *hubQueue) putBack(es []hubEntry) {
	if len(es) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gone != nil {
		return
	}
	if q.state != stateLive {
		q.spill = append(es, q.spill...)
		q.hub.wakeSpiller()
		return
	}
	q.buf = append(append(make([]hubEntry, 0, len(es)+len(q.buf)), es...), q.buf...)
	q.signal()
}

// takeAll empties buf and returns what it held. Callers hold q.mu.
func (q *hubQueue) takeAll() []hubEntry {
	es := q.buf
	q.buf = nil
	return es
}

// prepend puts events taken from the store (a hand-over) ahead of what
// the queue buffered meanwhile, leaving out those it already holds or
// delivered.
func (q *hubQueue) prepend(evs []*hubEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	held := make(map[string]bool, len(q.buf))
	for _, e := range q.buf {
		held[e.ev.id] = true
	}
	var es []hubEntry
	for _, ev := range evs {
		if ev.id != "" && (held[ev.id] || q.delivered.has(ev.id)) {
			continue
		}
		held[ev.id] = true
		es = append(es, hubEntry{ev: ev})
	}
	if len(es) == 0 {
		return
	}
	if q.state != stateLive {
		q.spill = append(es, q.spill...)
		q.hub.wakeSpiller()
		return
	}
	q.buf = append(es, q.buf...)
	q.signal()
}

// idRing remembers the last n ids added. It allocates on the first add.
// A nil ring remembers nothing.
type idRing struct {
	n    int
	ids  []string
	next int
	set  map[string]int
}

func newIDRing(n int) *idRing { return &idRing{n: n} }

func (r *idRing) add(id string) {
	if r == nil || id == "" {
		return
	}
	if r.ids == nil {
		r.ids, r.set = make([]string, r.n), make(map[string]int, r.n)
	}
	if old := r.ids[r.next]; old != "" {
		if r.set[old]--; r.set[old] <= 0 {
			delete(r.set, old)
		}
	}
	r.ids[r.next] = id
	r.set[id]++
	r.next = (r.next + 1) % len(r.ids)
}

func (r *idRing) has(id string) bool { return r != nil && r.set[id] > 0 }
