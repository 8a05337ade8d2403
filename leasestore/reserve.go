package leasestore

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// custodyTimeout bounds the writes that pass custody of received events to
// the store (a reservation): they run detached from the caller's context,
// so that a caller who gives up cannot leave a batch half-written, and end
// within this bound whatever the store does.
const custodyTimeout = 30 * time.Second

// reservation asks for Count new positions of a consumer and a block over
// them. Reservations of one consumer made at once in one Store go to the
// store together: one conditional write of the head (plus the new blocks,
// atomically), instead of one per puller racing the others for the head.
type reservation struct {
	incarnation string
	count       int64
	// block builds the new block at start; its leases are the caller's.
	block func(start int64) *blockDoc
	// extra are further records written atomically with the head (a
	// replay's payload, created so that a second replay finds it).
	extra []write
	// checkRoom makes the reservation keep the in-flight bound: the head's
	// Σ Held plus count may not pass MaxInFlight.
	checkRoom bool
	refresh   *refresh
	nowMs     int64
	// basis is the head the caller decided on: the reservation stands only
	// if nothing since changes that decision (see stillValid). worker, when
	// set, is a Pull's worker, whose live lease must come back instead of
	// new work.
	basis  *consumerDoc
	worker string
	// seen is the Store's head-write count of the consumer before basis
	// was read (headWrites).
	seen uint64

	start int64 // the first position given, once done
	ok    bool  // false: re-read and decide again (the head moved on, or no room)
	err   error
	done  chan struct{}
}

// reservations queues reservations per consumer (see reservation).
type reservations struct {
	mu sync.Mutex
	q  map[string]*resQueue
	// writes counts the head writes this Store made per consumer, so that
	// a lone reservation can tell whether the head its caller read is
	// still this Store's latest (see writeReservations).
	writes map[string]uint64
}

// headWrites returns how many head writes of consumer this Store has made
// (read before reading the head, it tells later whether the head read is
// still the latest this Store wrote).
func (s *Store) headWrites(consumer string) uint64 {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	return s.res.writes[consumer]
}

func (s *Store) wroteHead(consumer string) {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	if s.res.writes == nil {
		s.res.writes = map[string]uint64{}
	}
	if len(s.res.writes) > 10_000 {
		clear(s.res.writes)
	}
	s.res.writes[consumer]++
}

type resQueue struct {
	pending []*reservation
	running bool
}

// reserve runs r, batched with the other reservations of consumer that
// this Store makes at the same time, and returns when it is decided. The
// first caller leads: it writes every pending reservation, then the ones
// that queued meanwhile, until none is left. No lock is held across the
// store calls.
func (s *Store) reserve(ctx context.Context, consumer string, r *reservation) {
	r.done = make(chan struct{})
	s.res.mu.Lock()
	if s.res.q == nil {
		s.res.q = map[string]*resQueue{}
	}
	q := s.res.q[consumer]
	if q == nil {
		q = &resQueue{}
		s.res.q[consumer] = q
	}
	q.pending = append(q.pending, r)
	lead := !q.running
	q.running = true
	s.res.mu.Unlock()
	if lead {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), custodyTimeout)
		defer cancel()
		for {
			s.res.mu.Lock()
			batch := q.pending
			q.pending = nil
			if len(batch) == 0 {
				q.running = false
				delete(s.res.q, consumer)
				s.res.mu.Unlock()
				break
			}
			s.res.mu.Unlock()
			s.writeReservations(wctx, consumer, batch)
		}
	}
	// Wait whatever ctx says: the write may pass custody of r's events, and
	// it ends within custodyTimeout.
	<-r.done
}

// stillValid reports whether the decision r's caller made on its basis
// (hand out new work) still holds on head d, read since: no block was
// lowered (a lease became reclaimable, which goes before new work), no
// block added since holds a lease for r's worker or waits for redelivery.
// Blocks other pullers added since (new work of other workers) do not
// matter: this is why pullers of one consumer do not contend.
func (r *reservation) stillValid(d *consumerDoc, nowMs int64) bool {
	if r.basis == nil {
		return true
	}
	if reflect.DeepEqual(d.DocstoreRevision, r.basis.DocstoreRevision) {
		return true
	}
	for _, e := range d.Blocks {
		if e.Start >= r.basis.Next {
			if e.Until <= nowMs || (r.worker != "" && (e.Holder == 0 || e.Holder == holderCode(r.worker, false))) {
				return false
			}
			continue
		}
		if i := r.basis.Blocks.find(e.Start); i >= 0 && r.basis.Blocks[i].Stamp != e.Stamp {
			return false
		}
	}
	return true
}

// writeReservations writes batch: it reads the head, gives each
// reservation (in order) its positions while the window allows, and writes
// the head with the new blocks in one atomic group; a lost race re-reads
// and tries again a few times before handing the decision back.
func (s *Store) writeReservations(ctx context.Context, consumer string, batch []*reservation) {
	// Kept blocks the written head forgot are deleted last, after the
	// callers have their answer (deferred calls run last in, first out).
	var forgotten *consumerDoc
	var gone []int64
	defer func() {
		if forgotten != nil {
			s.forgetBlocks(ctx, forgotten, gone)
		}
	}()
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	for attempt := 0; ; attempt++ {
		var d *consumerDoc
		if r := batch[0]; attempt == 0 && len(batch) == 1 && r.basis != nil && s.headWrites(consumer) == r.seen {
			// A lone reservation over a head this Store has not written
			// since its caller read it: write over that head (the write is
			// conditional on its revision) and save a read. With company,
			// or after this Store's own writes, read it fresh: another
			// caller's basis is likely behind.
			d = r.basis.clone()
		} else {
			var err error
			if d, err = s.get(ctx, consumer); err != nil {
				for _, r := range batch {
					r.err = err
				}
				return
			}
		}
		nt := s.notes.take(d)
		nowMs := s.nowMs()
		// Notes first: they come from writes that happened. The callers'
		// reads come after, and only from the callers whose reservations go
		// in this write: a caller's blocks may hold changes that only this
		// write makes real (its extra writes).
		rd := s.redelivery(d)
		d.apply(nil, nt, nowMs, rd)
		var held int64
		for _, e := range d.Blocks {
			held += e.Held
		}
		var ws []write
		var taken []*reservation
		keys := map[string]bool{}
		for _, r := range batch {
			r.ok = false
			if r.incarnation != d.Incarnation || d.Paused || !r.stillValid(d, nowMs) {
				continue
			}
			// Two callers may have changed the same block, each from its own
			// read: one atomic group must not write a key twice (the second
			// would silently undo the first). The later caller re-reads.
			clash := false
			for _, w := range r.extra {
				clash = clash || keys[docKey(w.doc)]
			}
			if clash {
				continue
			}
			if r.checkRoom && held+r.count > MaxInFlight {
				continue
			}
			for _, w := range r.extra {
				keys[docKey(w.doc)] = true
			}
			held += r.count
			taken = append(taken, r)
		}
		var ref *refresh
		for _, r := range taken {
			if r.refresh == nil {
				continue
			}
			if ref == nil {
				ref = &refresh{blocks: map[int64]*blockDoc{}, stamps: map[int64]uint64{}}
			}
			for st, b := range r.refresh.blocks {
				if old, seen := ref.stamps[st]; !seen || r.refresh.stamps[st] > old {
					ref.blocks[st], ref.stamps[st] = b, r.refresh.stamps[st]
				}
			}
		}
		if ref != nil {
			d.apply(ref, nil, nowMs, rd)
		}
		for _, r := range taken {
			r.start = d.Next
			b := r.block(d.Next)
			d.Next += r.count
			e := blockEntry{Start: b.Start, Count: b.Count}
			e.Held, e.Until, e.Holder = b.hints(nowMs, d.sessionLive(nowMs), rd)
			d.Blocks = append(d.Blocks, e)
			ws = append(ws, write{doc: b, create: true})
			ws = append(ws, r.extra...)
		}
		if len(taken) == 0 {
			s.notes.giveBack(d, nt)
			return
		}
		forget := d.forget(nowMs)
		ok, err := false, faults.Check(faults.Reserve, consumer)
		if err == nil {
			ok, err = s.commit(ctx, consumer, append([]write{{doc: d}}, ws...)...)
		}
		if ok {
			s.wroteHead(consumer)
			forgotten, gone = d, forget
		}
		if err != nil || ok {
			for _, r := range taken {
				r.ok, r.err = ok, err
			}
			if err != nil {
				s.notes.giveBack(d, nt)
			}
			return
		}
		s.notes.giveBack(d, nt)
		telemetry.StoreConflict(ctx)
		if attempt >= 3 {
			return // hand the decision back: the callers re-read
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			for _, r := range batch {
				r.err = herr.Wrap(herr.Unavailable, err, "lease store: reservation timed out")
			}
			return
		}
	}
}

// docKey returns the key of a record this package writes.
func docKey(doc any) string {
	switch d := doc.(type) {
	case *blockDoc:
		return d.Key
	case *payloadDoc:
		return d.Key
	case *consumerDoc:
		return d.Key
	}
	return ""
}

// clone returns a copy of d whose index and sessions can change without
// changing d's.
func (d *consumerDoc) clone() *consumerDoc {
	c := *d
	c.Blocks = append(blockIndex(nil), d.Blocks...)
	c.Sessions = append(sessionList(nil), d.Sessions...)
	c.Kept = append(keptList(nil), d.Kept...)
	return &c
}
