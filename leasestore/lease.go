package leasestore

import (
	"github.com/heraldevents/herald/leasestore/internal/headcfg"

	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Source is the broker side of a pull: where new work comes from.
type Source interface {
	// Receive returns up to max events in delivery order. They stay out of
	// circulation until Settle.
	Receive(ctx context.Context, max int) ([]Incoming, error)
	// Settle acks the first taken events (custody passed to a lease) and
	// nacks the rest, making them available again at once.
	Settle(ctx context.Context, in []Incoming, taken int) error
}

// Incoming is one received event: its encoded body and the source's handle.
type Incoming struct {
	Body   []byte
	Handle any
	// PublishedAt is when the event was published, if the source knows
	// (zero otherwise). Only PullEvents on a consumer with a MessageTTL
	// uses it, to age the event; when it is zero the event's CloudEvents
	// "publishedat" attribute is read from Body instead (one JSON scan of
	// the body), and an event with neither never expires.
	PublishedAt time.Time
}

// PullParams are the arguments of Pull (the durable-consumer API "Pull a batch") and of
// PullEvents.
type PullParams struct {
	Consumer string
	// Worker identifies the puller: for Pull a worker id ("" is the shared
	// identity); for PullEvents the id of an attached session.
	Worker     string
	Limit      int           // events; 1–100 for Pull, checked by the caller
	Visibility time.Duration // 1–600 s for Pull, checked by the caller
	Source     Source
	// SourceFor, used by Pull when Source is nil, returns the source of
	// the consumer's new events from the consumer as the pull read it, so
	// that a caller who checks the consumer (its type) and reads its
	// subscription and filters to make the source does not read the
	// consumer's head a second time (LookupConsumer and then Pull). It is
	// called once, after the head is read (so a missing consumer is
	// NotFound first) and before the paused check; an error it returns
	// ends the pull with that error, nothing written.
	SourceFor func(ConsumerIdentity) (Source, error)
	// Withhold, when set, reports whether an event (its body as stored)
	// must not be shown to the caller: the notifications API and the
	// durable-consumer API deliver an event only to a principal that may
	// read its type. Such an event is never handed to the caller, so its
	// delivery count, generation, due time and age stay as they were and
	// another caller that may read it gets it as if this one had never
	// pulled (see Pull and PullEvents). nil: every event may be shown. It
	// must be safe to call from any goroutine and must not block.
	Withhold func(event []byte) bool
}

// readable returns how many of events, from the front, p.Withhold lets
// the caller see.
func (p *PullParams) readable(events [][]byte) int {
	if p.Withhold == nil {
		return len(events)
	}
	for i, e := range events {
		if p.Withhold(e) {
			return i
		}
	}
	return len(events)
}

// WithheldError is Pull's error when the next event it would hand out is
// one the caller may not be shown (PullParams.Withhold). Nothing was
// handed out or written for it: the event and the ones behind it wait,
// with their delivery count, for a caller that may read it. Its code is
// herr.PermissionDenied; callers name the event's type in what they
// answer.
type WithheldError struct {
	// Event is the withheld event as stored.
	Event []byte
}

func (e *WithheldError) Error() string {
	return "the next event of this consumer is one the caller may not be shown; it waits for a caller that may"
}

// Unwrap lets herr.CodeOf see PermissionDenied.
func (e *WithheldError) Unwrap() error {
	return &herr.Error{Code: herr.PermissionDenied, Message: e.Error()}
}

// Lease is a leased batch. Events[i] has position Start+i.
type Lease struct {
	ID         string
	Generation int64
	// Attempt is the lifetime delivery count of the lease's events, this
	// delivery included (1 on the first delivery).
	Attempt   int64
	Start     int64
	Events    [][]byte
	ExpiresAt time.Time
}

// WindowFullError is returned by Pull when MaxInFlight events are leased and
// unacknowledged. Its code is herr.ResourceExhausted.
type WindowFullError struct {
	InFlight   int64
	RetryAfter time.Duration // until the earliest live lease expires (at least 1 s)
	// Committed is the consumer's cursor (0 = nothing committed) and
	// Dispatched the last position handed out, so the gap between them is
	// what holds the window (the durable-consumer API's 429 body).
	Committed  int64
	Dispatched int64
}

func (e *WindowFullError) Error() string {
	return fmt.Sprintf("%d events are leased and unacknowledged; the in-flight window of %d is full: acknowledge leases to free it", e.InFlight, MaxInFlight)
}

// Unwrap lets herr.CodeOf see ResourceExhausted and herr.RetryAfterOf
// see RetryAfter.
func (e *WindowFullError) Unwrap() error {
	// A caller is always told to wait: at least a second, as RetryAfter's
	// doc says.
	return &herr.Error{Code: herr.ResourceExhausted, Message: e.Error(), RetryAfter: max(e.RetryAfter, time.Second)}
}

// WindowState returns what holds the window: the events in flight, the
// committed cursor and the last position handed out. Transports read it
// through an interface (the durable-consumer API's 429 body), so they
// need not import this package.
func (e *WindowFullError) WindowState() (inFlight, committed, dispatched int64) {
	return e.InFlight, e.Committed, e.Dispatched
}

// Pull leases the next batch to p.Worker, following the durable-consumer API:
//
//  1. the worker's live lease, if it holds one, unchanged;
//  2. else the oldest expired or failed lease, with generation and attempt
//     one higher; a lease larger than p.Limit is split, and only its first
//     p.Limit events are handed out (they keep the lease id), while the rest
//     stays waiting for redelivery under a new lease id;
//  3. else, if MaxInFlight events are in flight, a *WindowFullError;
//  4. else up to p.Limit new events from p.Source in a new lease.
//
// A failed or expired lease whose redelivery would pass
// Options.DeliveryLimit is not handed out: its events go to the
// dead-letter queue (ReasonDeliveryLimit), the cursor moves past them, and
// the pull goes on to the next lease or to new work.
//
// With p.Withhold set, the batch of 1, 2 or 4 is cut before the first
// event the caller may not be shown: the lease handed out holds only the
// events before it (a lease being redelivered is split there, its rest
// waiting under a new lease id; new events behind it go back to the
// source at once, unleased). When that leaves nothing — the next event is
// withheld — the pull hands out and writes nothing for it and fails with
// a *WithheldError: a live lease stays with its holder, a waiting one
// keeps its generation, attempt and due time, and new events go back to
// the source. So a caller that keeps pulling events it may not read moves
// neither the cursor, nor the in-flight window, nor any delivery count.
//
// It returns (nil, nil) when the consumer is caught up.
func (s *Store) Pull(ctx context.Context, p PullParams) (*Lease, error) {
	ctx, op := telemetry.StartStore(ctx, "pull")
	l, err := s.pull(ctx, p)
	op.End(ctx, err)
	return l, err
}

func (s *Store) pull(ctx context.Context, p PullParams) (*Lease, error) {
	var (
		received []Incoming // custody held by this call until settled
		taken    int        // how many of received the payload holds
		pid      string     // the payload record written for them
		last     *reservation
		out      *Lease
		finished bool // whether this call already finished dying leases it found
	)
	release := func() { s.release(ctx, p.Consumer, p.Source, received, taken, pid, last) }

	err := s.retry(ctx, func() (bool, error) {
		out = nil
		seen := s.headWrites(p.Consumer)
		d, err := s.get(ctx, p.Consumer)
		if err != nil {
			return false, err
		}
		runTestHook(hookPullRead, p.Consumer)
		if p.Source == nil && p.SourceFor != nil {
			id, err := d.identity()
			if err != nil {
				return false, err
			}
			if p.Source, err = p.SourceFor(id); err != nil {
				return false, err
			}
		}
		if d.Paused {
			return false, herr.New(herr.FailedPrecondition, "consumer %q is paused", p.Consumer)
		}
		now := s.opts.Now()
		nowMs := now.UnixMilli()
		expires := now.Add(p.Visibility).UnixMilli()
		worker := workerKey(p.Worker)
		d.pruneSessions(nowMs)
		live := d.sessionLive(nowMs)
		blocks, err := s.readCandidates(ctx, d, worker, nowMs)
		if err != nil {
			return false, err
		}
		if !finished && s.finishAll(ctx, d, blocks) {
			// A dead-lettering was interrupted: finished it (or tried),
			// now read again. Leases still dying are nobody's.
			finished = true
			return false, nil
		}
		starts := sortedStarts(blocks)

		// 1. The worker's own live lease comes back unchanged.
		for _, st := range starts {
			b := blocks[st]
			if b == nil {
				continue
			}
			for i := range b.Leases {
				if l := &b.Leases[i]; l.Worker == worker && !l.Session && l.live(nowMs, live) {
					out, err = s.load(ctx, d.ID, b, l)
					if errors.Is(err, errPayloadGone) {
						return false, nil // settled meanwhile: re-read
					}
					if err == nil {
						if k := p.readable(out.Events); k < len(out.Events) {
							// Held under this worker id by a principal
							// that may read it: it stays that holder's.
							withheld := out.Events[k]
							out = nil
							return false, &WithheldError{Event: withheld}
						}
					}
					return err == nil, err
				}
			}
		}
		// 2. Expired and failed leases go before new work once due (see
		// redelivery.due), except those past the delivery limit, which are
		// dead-lettered.
		dirty := map[*blockDoc]bool{}
		rd := s.redelivery(d)
		for _, r := range reclaimOrder(blocks, nowMs, live, &rd) {
			b := r.b
			l := &b.Leases[r.i]
			if l.Attempt >= rd.limit {
				b.markDying(r.i, ReasonDeliveryLimit, nowMs)
				dirty[b] = true
				continue
			}
			// Read the events before taking the lease: reading after the
			// write could find them gone (see load).
			got, err := s.load(ctx, d.ID, b, l)
			if errors.Is(err, errPayloadGone) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			n := min(l.Count, int64(p.Limit))
			n = int64(p.readable(got.Events[:n]))
			if n == 0 {
				// The next event is withheld from the caller: leave the
				// lease as it is (only the dead-letterings decided on the
				// way are written).
				withheld := got.Events[0]
				if len(dirty) > 0 {
					if ok, err := s.commitBlocks(ctx, d, dirty); !ok || err != nil {
						return false, err
					}
					s.finishMarked(ctx, d, dirty, nil)
				}
				return false, &WithheldError{Event: withheld}
			}
			if l.Count > n {
				b.split(r.i, n)
				l = &b.Leases[r.i]
				got.Events = got.Events[:n:n]
			}
			l.Worker, l.Requeued, l.Delayed, l.Session = worker, false, false, false
			l.Generation++
			l.Attempt++
			l.Expires, l.Life = expires, lifeSecs(nowMs, expires)
			dirty[b] = true
			if ok, err := s.commitBlocks(ctx, d, dirty); !ok || err != nil {
				return false, err
			}
			runTestHook(hookPullReclaimed, p.Consumer)
			s.finishMarked(ctx, d, dirty, b)
			got.Generation, got.Attempt, got.ExpiresAt = l.Generation, l.Attempt, time.UnixMilli(l.Expires)
			out = got
			return true, nil
		}
		if len(dirty) > 0 {
			if ok, err := s.commitBlocks(ctx, d, dirty); !ok || err != nil {
				return false, err
			}
			s.finishMarked(ctx, d, dirty, nil)
			return false, nil // read again: the cursor and window moved
		}
		// 3. The in-flight window.
		holding, err := s.holding(ctx, d, blocks)
		if err != nil {
			return false, err
		}
		room := MaxInFlight - holding
		if room <= 0 {
			return false, s.windowFull(ctx, d, blocks, holding, nowMs, live)
		}
		// 4. New work. Received events survive a lost race: the next try
		// reserves positions for them again.
		if received == nil {
			received, err = p.Source.Receive(ctx, int(min(int64(p.Limit), room)))
			if err != nil {
				return false, err
			}
			if len(received) == 0 {
				received = nil
				return true, nil // caught up
			}
		}
		n := min(s.fit(received), int(room))
		if p.Withhold != nil {
			// Events the caller may not be shown, and those behind them,
			// go back to the source unleased (release, settleSource).
			bodies := make([][]byte, n)
			for i := range n {
				bodies[i] = received[i].Body
			}
			if n = p.readable(bodies); n == 0 {
				return false, &WithheldError{Event: received[0].Body}
			}
		}
		if n != taken {
			if pid == "" {
				pid = uuid.NewString()
			}
			if err := s.putPayload(ctx, d.ID, pid, received[:n], nil); err != nil {
				return false, err
			}
			taken = n
		}
		lease := leaseRec{Count: int64(n), Tag: newTag(), Worker: worker, Attempt: 1, Expires: expires, Life: lifeSecs(nowMs, expires)}
		last = &reservation{
			incarnation: d.Incarnation, count: int64(n), checkRoom: true, nowMs: nowMs,
			refresh: newRefresh(d, blocks), basis: d, worker: worker, seen: seen,
			block: func(start int64) *blockDoc {
				l := lease
				l.Start = start
				return &blockDoc{
					Key: blockKey(d.ID, d.Incarnation, start), Kind: kindBlock, Consumer: d.ID,
					Start: start, Count: int64(n), Payload: pid, Leases: blockLeases{l},
				}
			},
		}
		s.reserve(ctx, d.ID, last)
		if last.err != nil || !last.ok {
			return false, last.err
		}
		lease.Start = last.start
		events := make([][]byte, n)
		for i := range n {
			events[i] = received[i].Body
		}
		out = &Lease{ID: leaseID(last.start, &lease), Attempt: 1, Start: last.start, Events: events, ExpiresAt: time.UnixMilli(expires)}
		// Custody has passed to the lease: only now ack at the broker. A
		// failed ack means a duplicate later, which at-least-once allows.
		s.settleSource(ctx, p.Source, received, n)
		received = nil
		return true, nil
	})
	release() // a no-op when the received events went into a lease
	return out, err
}

// release hands back received events a pull holds when it ends without
// putting them in a lease: after an error, or after a lost race whose
// retry found other work. If the last reservation failed ambiguously (say
// a timeout after the store applied it), the block it would have written
// is read: if it exists, custody has passed after all and the events are
// acked at the source; if it cannot be read, the payload is kept (an
// orphan is harmless, a block without its payload is not).
func (s *Store) release(ctx context.Context, consumer string, src Source, received []Incoming, taken int, pid string, last *reservation) {
	if len(received) == 0 {
		return
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), custodyTimeout)
	defer cancel()
	if pid != "" {
		keep := false
		if last != nil && last.err != nil && last.start > 0 {
			d := &consumerDoc{Config: headcfg.Config{ID: consumer, Incarnation: last.incarnation}}
			bs, err := s.getBlocks(bg, d, []int64{last.start})
			switch b := bs[last.start]; {
			case err != nil:
				keep = true
			case b != nil && b.Payload == pid:
				_ = src.Settle(bg, received, taken)
				return
			}
		}
		if !keep {
			s.deletePayload(bg, consumer, pid)
		}
	}
	_ = src.Settle(bg, received, 0)
}

// settleSource acks the first n of received at the source (custody has
// passed to a lease) and hands the rest back. It runs detached from ctx,
// within custodyTimeout: a caller that gave up meanwhile must not leave
// events it did not take outstanding at the broker until its ack deadline.
// A failure only means duplicates later, which at-least-once allows.
func (s *Store) settleSource(ctx context.Context, src Source, received []Incoming, n int) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), custodyTimeout)
	defer cancel()
	_ = src.Settle(bg, received, n)
}

// readCandidates reads the blocks a pull by worker must look at (see
// blockEntry): those whose hints say a lease may be reclaimable, held by
// worker, or held by a session that is gone. Blocks found gone are noted.
func (s *Store) readCandidates(ctx context.Context, d *consumerDoc, worker string, nowMs int64) (map[int64]*blockDoc, error) {
	liveCodes := map[uint16]bool{}
	for _, e := range d.Sessions {
		if !e.Tombstone && e.Expires > nowMs {
			liveCodes[holderCode(e.Key, true)] = true
		}
	}
	done := s.notes.done(d) // blocks this Store saw emptied: nothing to find there
	var starts []int64
	for _, e := range d.Blocks {
		if done[e.Start] {
			continue
		}
		if e.Until <= nowMs || e.Holder == 0 || e.Holder == holderCode(worker, false) || e.Holder == holderCode(worker, true) ||
			(sessionCode(e.Holder) && !liveCodes[e.Holder]) {
			starts = append(starts, e.Start)
		}
	}
	blocks, err := s.getBlocks(ctx, d, starts)
	if err != nil {
		return nil, err
	}
	for st, b := range blocks {
		if b == nil {
			s.notes.note(d, st, 0)
		}
	}
	return blocks, nil
}

// leaseRef is a lease of a loaded block.
type leaseRef struct {
	b *blockDoc
	i int
}

// reclaimOrder returns the reclaimable leases of blocks (not live, not
// dying, and due by rd; with rd nil, every waiting lease), lowest start
// first.
func reclaimOrder(blocks map[int64]*blockDoc, nowMs int64, live func(string) bool, rd *redelivery) []leaseRef {
	var out []leaseRef
	for _, b := range blocks {
		if b == nil {
			continue
		}
		for i := range b.Leases {
			if l := &b.Leases[i]; l.waiting(nowMs, live) && (rd == nil || rd.due(l, nowMs, live) <= nowMs) {
				out = append(out, leaseRef{b, i})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].b.Leases[out[i].i].Start < out[j].b.Leases[out[j].i].Start })
	return out
}

// commitBlocks writes the dirty blocks (atomically when several).
func (s *Store) commitBlocks(ctx context.Context, d *consumerDoc, dirty map[*blockDoc]bool) (bool, error) {
	ws := make([]write, 0, len(dirty))
	for b := range dirty {
		ws = append(ws, blockWrite(b))
	}
	ok, err := s.commit(ctx, d.ID, ws...)
	if ok {
		for b := range dirty {
			s.notes.noteBlock(d, b)
			s.dropIfEmpty(ctx, d, b)
		}
	}
	return ok, err
}

// finishMarked finishes the dead-lettering of the dirty blocks that hold
// dying leases (except skip, whose new state another write owns), best
// effort: a block left dying gets its hint lowered, so whoever reads it
// next finishes the move, and nobody is handed those leases meanwhile.
func (s *Store) finishMarked(ctx context.Context, d *consumerDoc, dirty map[*blockDoc]bool, skip *blockDoc) {
	var stuck []int64
	for b := range dirty {
		if !b.hasDying() {
			continue
		}
		if b == skip {
			stuck = append(stuck, b.Start)
			continue
		}
		if err := s.finishDying(ctx, d, b); err != nil {
			stuck = append(stuck, b.Start)
		}
	}
	_ = s.lowerHints(ctx, d.ID, stuck...)
}

// finishAll finishes interrupted dead-letterings found in blocks and
// reports whether there were any.
func (s *Store) finishAll(ctx context.Context, d *consumerDoc, blocks map[int64]*blockDoc) bool {
	any := false
	for _, b := range blocks {
		if b != nil && b.hasDying() {
			any = true
			_ = s.finishDying(ctx, d, b)
		}
	}
	return any
}

// holding returns the events held in flight (leased or waiting, not being
// dead-lettered) by d: exact for the loaded blocks, the head's bounds for
// the others; when the bounds leave no room, the others are read too
// (and blocks is extended with them).
func (s *Store) holding(ctx context.Context, d *consumerDoc, blocks map[int64]*blockDoc) (int64, error) {
	done := s.notes.done(d) // emptied, as this Store saw
	count := func() (n int64, unread []int64) {
		for _, e := range d.Blocks {
			b, ok := blocks[e.Start]
			switch {
			case done[e.Start]:
			case !ok:
				n += e.Held
				if e.Held > 0 {
					unread = append(unread, e.Start)
				}
			case b != nil:
				n += b.held()
			}
		}
		return n, unread
	}
	n, unread := count()
	if n < MaxInFlight || len(unread) == 0 {
		return n, nil
	}
	more, err := s.getBlocks(ctx, d, unread)
	if err != nil {
		return 0, err
	}
	for st, b := range more {
		blocks[st] = b
		if b == nil {
			s.notes.note(d, st, 0)
		} else {
			s.notes.noteBlock(d, b)
		}
	}
	n, _ = count()
	return n, nil
}

// windowFull returns the *WindowFullError of a full window.
func (s *Store) windowFull(ctx context.Context, d *consumerDoc, blocks map[int64]*blockDoc, holding, nowMs int64, live func(string) bool) error {
	retryAfter := time.Second
	var earliest int64
	for _, b := range blocks {
		if b == nil {
			continue
		}
		for i := range b.Leases {
			if l := &b.Leases[i]; l.live(nowMs, live) && (earliest == 0 || l.Expires < earliest) {
				earliest = l.Expires
			}
		}
	}
	if earliest > 0 {
		retryAfter = max(retryAfter, time.Duration(earliest-nowMs)*time.Millisecond)
	}
	committed, err := s.cursor(ctx, d, blocks)
	if err != nil {
		committed = d.Committed
	}
	return &WindowFullError{InFlight: holding, RetryAfter: retryAfter, Committed: committed, Dispatched: max(d.Next-1, 0)}
}

// fit returns how many of in, from the front, fit in one payload record
// (at least one, at most maxBlockEvents).
func (s *Store) fit(in []Incoming) int {
	total := 0
	for i, e := range in {
		total += len(e.Body) + 16 // per-element overhead of the stored list
		if (total > s.opts.MaxPayloadBytes || i >= maxBlockEvents) && i > 0 {
			return i
		}
	}
	return len(in)
}

// putPayload writes consumer's payload record id with the bodies of in
// and their enqueue times (nil: unknown).
func (s *Store) putPayload(ctx context.Context, consumer, id string, in []Incoming, published []int64) error {
	pd := &payloadDoc{Key: payloadKey(consumer, id), Kind: kindPayload, Consumer: consumer}
	events := make([][]byte, len(in))
	for i := range in {
		events[i] = in[i].Body
	}
	if s.opts.Uncompressed {
		pd.Events, pd.Published = events, published
	} else {
		pd.Batch = eventBatch{Events: events, Published: published}
	}
	if err := s.coll.Put(ctx, pd); err != nil {
		return storeErr(err)
	}
	return nil
}

// errPayloadGone is load's error for a payload record that does not exist.
var errPayloadGone = herr.New(herr.Aborted, "the lease was settled meanwhile; retry")

// Test hooks: points in Pull where tests run code to race it.
const (
	hookPullRead      = "pull-read"      // right after each read of the consumer record
	hookPullReclaimed = "pull-reclaimed" // right after a reclaim is written
)

// testHook, when set, runs at each hook point with the point and the
// consumer id. Production code never sets it.
var testHook atomic.Pointer[func(point, consumer string)]

func runTestHook(point, consumer string) {
	if h := testHook.Load(); h != nil {
		(*h)(point, consumer)
	}
}

// getPayload reads consumer's payload record id; errPayloadGone when it
// does not exist.
func (s *Store) getPayload(ctx context.Context, consumer, id string) (*payloadDoc, error) {
	pd := &payloadDoc{Key: payloadKey(consumer, id)}
	if err := s.coll.Get(ctx, pd); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, errPayloadGone
		}
		return nil, storeErr(err)
	}
	return pd, nil
}

// events returns lease l's events (of block b) from b's payload pd.
func (pd *payloadDoc) events(b *blockDoc, l *leaseRec) ([][]byte, error) {
	evs, _ := pd.all()
	off := l.Start - b.Start
	if off < 0 || off+l.Count > int64(len(evs)) {
		return nil, herr.New(herr.Internal, "a lease refers to events %d–%d of a payload of %d", off, off+l.Count-1, len(evs))
	}
	return evs[off : off+l.Count : off+l.Count], nil
}

// load returns lease l of block b with its events. A lease read from a
// block whose payload is gone was settled since (the payload goes with the
// block's last lease): errPayloadGone.
func (s *Store) load(ctx context.Context, consumer string, b *blockDoc, l *leaseRec) (*Lease, error) {
	pd, err := s.getPayload(ctx, consumer, b.Payload)
	if err != nil {
		return nil, err
	}
	events, err := pd.events(b, l)
	if err != nil {
		return nil, err
	}
	return &Lease{
		ID: leaseID(b.Start, l), Generation: l.Generation, Attempt: l.Attempt, Start: l.Start,
		Events: events, ExpiresAt: time.UnixMilli(l.Expires),
	}, nil
}
