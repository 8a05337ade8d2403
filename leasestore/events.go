package leasestore

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// PullEvents is Pull for streams (the notifications API, ConsumeDurableEventsWithAcks
// and the other consume streams): it hands session p.Worker up to p.Limit
// leases of one event each, for p.Visibility. Events waiting for
// redelivery (nacked, expired, left by a session that went, replayed) go
// first, lowest position first, each with Attempt (its lifetime delivery
// count) one higher; then new events from p.Source, with Attempt 1. New
// events received together share one payload record, each lease referring
// to its event by offset; a larger lease being redelivered is split into
// single events the same way. Each returned Lease holds exactly one event.
// It returns (nil, nil) when there is nothing to hand out.
//
// With p.Withhold set, an event the session may not be shown is never
// handed to it: one waiting for redelivery is passed over and left as it
// is (its delivery count, generation, due time and age unchanged, and not
// aged out by MessageTTL on the session's behalf), and a new one is taken
// into the queue waiting for redelivery, with delivery count 0, for a
// session that may read it. The events after it are handed out as usual.
//
// p.Worker must be a session attached with Attach; PullEvents does not
// refresh it. A session that was removed (detached, evicted, lapsed) gets
// herr.FailedPrecondition ("consumer cancelled", see Attach), and so does
// an id that never attached. A session's leases stay its own until it is
// removed, their visibility passes, or they are settled; a session that
// pulls again is handed more events, not its unsettled ones again.
//
// Dead-lettering happens here, before anything is handed out, and moves
// the cursor past the events it takes (see DeadLetter):
//
//   - ReasonDeliveryLimit: an event waiting for redelivery whose delivery
//     count has reached Options.DeliveryLimit.
//   - ReasonExpired (consumers with a MessageTTL): an event that would be
//     handed out, or that arrives from the source, at least MessageTTL
//     after it was enqueued (its publish time: Incoming.PublishedAt, else
//     the CloudEvent's "publishedat"; a replayed event's replay time). An
//     event of unknown publish time never expires. Events leased to a
//     session are not aged: TTL applies to events on their way out.
//   - ReasonMaxLen (consumers with a MaxLength): the queue's length is the
//     number of events Herald holds for it, leased plus waiting for
//     redelivery (Consumer.InFlight, less those being dead-lettered). The
//     broker's backlog counts once it is taken in: Intake does that for a
//     queue no session pulls (the caller runs it), and a pull on such a
//     queue takes in up to p.Limit new events whenever
//     the leased events leave room under MaxLength, even when it has
//     redeliveries to hand out (the ones it does not hand out wait, with
//     delivery count 0); when the length would then pass MaxLength, the
//     oldest events waiting for redelivery are dead-lettered until it does
//     not. So a slow or absent consumer loses the oldest waiting events
//     first, as with a broker's drop-head overflow, and a queue never holds
//     more than MaxLength events. Such a pull asks the source for new
//     events even when it has redeliveries to hand out: a source that waits
//     for events when there are none delays those pulls by its wait.
//
// Errors: herr.InvalidArgument for a limit below 1 or a visibility under a
// millisecond; herr.NotFound for an
// unknown consumer; herr.FailedPrecondition for a paused consumer or a
// session that is not attached; *WindowFullError when MaxInFlight events
// are held and none can be handed out; the source's errors.
func (s *Store) PullEvents(ctx context.Context, p PullParams) ([]*Lease, error) {
	ctx, op := telemetry.StartStore(ctx, "pull_events")
	ls, err := s.pullEvents(ctx, p)
	op.End(ctx, err)
	return ls, err
}

func (s *Store) pullEvents(ctx context.Context, p PullParams) ([]*Lease, error) {
	if p.Limit < 1 {
		return nil, herr.New(herr.InvalidArgument, "limit must be at least 1")
	}
	if p.Visibility < time.Millisecond {
		return nil, herr.New(herr.InvalidArgument, "visibility must be at least a millisecond")
	}
	key := workerKey(p.Worker)
	var (
		received  []Incoming // custody held by this call until settled
		published []int64    // enqueue times of received (Unix ms)
		taken     int        // how many of received the payload holds
		pid       string
		last      *reservation
		out       []*Lease
		finished  bool
	)
	release := func() { s.release(ctx, p.Consumer, p.Source, received, taken, pid, last) }

	err := s.retry(ctx, func() (bool, error) {
		out = nil
		seen := s.headWrites(p.Consumer)
		d, err := s.get(ctx, p.Consumer)
		if err != nil {
			return false, err
		}
		if d.Paused {
			return false, herr.New(herr.FailedPrecondition, "consumer %q is paused", p.Consumer)
		}
		now := s.opts.Now()
		nowMs := now.UnixMilli()
		expires := now.Add(p.Visibility).UnixMilli()
		d.pruneSessions(nowMs)
		if !d.liveSession(key, nowMs) {
			if d.session(key) >= 0 {
				return false, errCancelled(p.Consumer)
			}
			return false, herr.New(herr.FailedPrecondition, "the session is not attached to %q: attach it first", p.Consumer)
		}
		live := d.sessionLive(nowMs)
		var blocks map[int64]*blockDoc
		if d.MaxLength > 0 {
			// The queue's length counts every held event: read them all.
			blocks, err = s.getBlocks(ctx, d, d.allStarts())
		} else {
			blocks, err = s.readCandidates(ctx, d, key, nowMs)
		}
		if err != nil {
			return false, err
		}
		if !finished && s.finishAll(ctx, d, blocks) {
			finished = true
			return false, nil // see Pull
		}
		limit := p.Limit
		ttl := d.MessageTTL
		expired := func(publishedMs int64) bool {
			return ttl > 0 && publishedMs > 0 && nowMs-publishedMs >= ttl
		}
		dirty := map[*blockDoc]bool{}
		mark := func(r leaseRef, reason string) {
			r.b.markDying(r.i, reason, nowMs)
			dirty[r.b] = true
		}

		// a. The delivery limit.
		rd := s.redelivery(d)
		for _, r := range reclaimOrder(blocks, nowMs, live, &rd) {
			if r.b.Leases[r.i].Attempt >= rd.limit {
				mark(r, ReasonDeliveryLimit)
			}
		}
		holding, err := s.holding(ctx, d, blocks)
		if err != nil {
			return false, err
		}
		room := MaxInFlight - holding

		// take decides how many received events go into leases, receiving
		// up to want if this call holds none yet.
		n := 0
		take := func(want int64) error {
			if want <= 0 {
				return nil
			}
			if received == nil {
				in, err := p.Source.Receive(ctx, int(want))
				if err != nil {
					return err
				}
				if len(in) == 0 {
					return nil
				}
				received, published = in, make([]int64, len(in))
				for i := range in {
					if ttl > 0 {
						published[i] = publishedMs(in[i])
					} else if !in[i].PublishedAt.IsZero() {
						published[i] = in[i].PublishedAt.UnixMilli()
					}
				}
			}
			n = int(min(int64(s.fit(received)), want))
			return nil
		}

		// b. MaxLength: intake first, then evict the oldest waiting events.
		if maxLen := d.MaxLength; maxLen > 0 {
			var leased, waiting int64
			for _, b := range blocks {
				if b == nil {
					continue
				}
				for i := range b.Leases {
					switch l := &b.Leases[i]; {
					case l.Dying != "":
					case l.live(nowMs, live):
						leased += l.Count
					default:
						waiting += l.Count
					}
				}
			}
			if err := take(min(int64(limit), room, maxLen-leased)); err != nil {
				return false, err
			}
			over := leased + waiting + int64(n) - maxLen
			for _, r := range reclaimOrder(blocks, nowMs, live, nil) {
				if over <= 0 {
					break
				}
				if r.b.Leases[r.i].Count > over {
					r.b.split(r.i, over)
				}
				over -= r.b.Leases[r.i].Count
				mark(r, ReasonMaxLen)
			}
		}

		// c. Redeliveries, oldest first, one event per lease.
		work := reclaimOrder(blocks, nowMs, live, &rd)
		payloads := map[string]*payloadDoc{}
		for len(work) > 0 && len(out) < limit {
			r := work[0]
			work = work[1:]
			if r.b.Leases[r.i].Count > 1 {
				work = append([]leaseRef{{r.b, r.b.split(r.i, 1)}}, work...)
			}
			l := &r.b.Leases[r.i]
			pd, ok := payloads[r.b.Payload]
			if !ok {
				// Read before taking the lease (see Pull).
				if pd, err = s.getPayload(ctx, d.ID, r.b.Payload); err != nil {
					if errors.Is(err, errPayloadGone) {
						return false, nil // settled since the read: re-read
					}
					return false, err
				}
				payloads[r.b.Payload] = pd
			}
			events, err := pd.events(r.b, l)
			if err != nil {
				return false, err
			}
			if p.Withhold != nil && p.Withhold(events[0]) {
				continue // not this session's to see: left as it is
			}
			if expired(pd.publishedAt(l.Start - r.b.Start)) {
				mark(r, ReasonExpired)
				continue
			}
			l.Worker, l.Requeued, l.Delayed, l.Session = key, false, false, true
			l.Generation++
			l.Attempt++
			l.Expires, l.Life = expires, lifeSecs(nowMs, expires)
			dirty[r.b] = true
			out = append(out, &Lease{
				ID: leaseID(r.b.Start, l), Generation: l.Generation, Attempt: l.Attempt, Start: l.Start,
				Events: events, ExpiresAt: time.UnixMilli(expires),
			})
		}

		// d. New work.
		if d.MaxLength == 0 {
			if err := take(min(int64(limit-len(out)), room)); err != nil {
				return false, err
			}
		}
		if len(out) == 0 && n == 0 && len(dirty) == 0 {
			if room <= 0 {
				return false, s.windowFull(ctx, d, blocks, holding, nowMs, live)
			}
			return true, nil // nothing to hand out
		}
		if n == 0 {
			ok, err := s.commitBlocks(ctx, d, dirty)
			if !ok || err != nil {
				return false, err
			}
			s.finishMarked(ctx, d, dirty, nil)
			return true, nil
		}
		if n != taken {
			if pid == "" {
				pid = uuid.NewString()
			}
			if err := s.putPayload(ctx, d.ID, pid, received[:n], published[:n:n]); err != nil {
				return false, err
			}
			taken = n
		}
		var extra []write
		for b := range dirty {
			extra = append(extra, blockWrite(b))
		}
		// Decided here, not in the block builder, which may run in another
		// caller's goroutine (reserve).
		withheld := make([]bool, n)
		if p.Withhold != nil {
			for j := range n {
				withheld[j] = p.Withhold(received[j].Body)
			}
		}
		handed := len(out)
		var nb *blockDoc
		last = &reservation{
			incarnation: d.Incarnation, count: int64(n), checkRoom: true, nowMs: nowMs,
			refresh: newRefresh(d, blocks), extra: extra, basis: d, seen: seen,
			block: func(start int64) *blockDoc {
				nb = &blockDoc{
					Key: blockKey(d.ID, d.Incarnation, start), Kind: kindBlock, Consumer: d.ID,
					Start: start, Count: int64(n), Payload: pid, Leases: make(blockLeases, 0, n),
				}
				given := handed
				for j := range n {
					l := leaseRec{Start: start + int64(j), Count: 1, Tag: newTag()}
					switch {
					case expired(published[j]):
						l.Dying, l.Expires = ReasonExpired, nowMs
					case withheld[j]:
						l.Requeued = true // never delivered: waits for a session that may read it
					case given < limit:
						l.Worker, l.Session, l.Attempt, l.Expires, l.Life = key, true, 1, expires, lifeSecs(nowMs, expires)
						given++
					default:
						l.Requeued = true // taken in under MaxLength, waiting
					}
					nb.Leases = append(nb.Leases, l)
				}
				return nb
			},
		}
		s.reserve(ctx, d.ID, last)
		if last.err != nil || !last.ok {
			return false, last.err
		}
		for j := range nb.Leases {
			if l := &nb.Leases[j]; l.Session {
				out = append(out, &Lease{
					ID: leaseID(nb.Start, l), Attempt: 1, Start: l.Start, Events: [][]byte{received[j].Body},
					ExpiresAt: time.UnixMilli(expires),
				})
			}
		}
		// Custody of the first n has passed to leases: only now ack them
		// at the broker. A failed ack means a duplicate later, which
		// at-least-once allows.
		s.settleSource(ctx, p.Source, received, n)
		received = nil
		for b := range dirty {
			s.notes.noteBlock(d, b)
		}
		if nb.hasDying() {
			dirty[nb] = true
		}
		s.finishMarked(ctx, d, dirty, nil)
		return true, nil
	})
	release()
	return out, err
}

// EventRef names a single-event lease that PullEvents handed out: its id
// and the generation it was handed out with.
type EventRef struct {
	LeaseID    string
	Generation int64
}

// SettleResult is what Settle did.
type SettleResult struct {
	// Acked and Nacked count the refs acknowledged and requeued.
	Acked, Nacked int
	// Skipped counts the refs that changed nothing: unknown, already
	// settled (acknowledged, or nacked and not handed out since), of an
	// older generation, being dead-lettered, or repeated.
	Skipped int
	// Committed is the consumer's cursor after the settlement.
	Committed int64
}

// Settle settles leases of consumer with one conditional write per block
// they belong to (the notifications API, ConsumeDurableEventsWithAcks): acks first, then nacks, so a ref in both
// is acknowledged.
//
//   - An ack of a lease's current generation commits it, as Acknowledge
//     does with "ok" (also after its visibility passed or its session
//     left, as long as nobody has been handed it since), and the cursor
//     advances over the contiguous run of acknowledged events.
//   - A nack of the current generation requeues it for redelivery ahead of
//     new work: at once, or after the backoff of the queue's retry policy
//     (Policies.RetryPolicy) when it has one; its delivery count grows by
//     one when it is delivered again.
//   - Anything else is skipped and counted (see SettleResult).
//
// Settling is allowed while the consumer is paused and does not check the
// settling session. A call whose refs change nothing writes nothing. It
// fails with herr.NotFound for an unknown consumer.
func (s *Store) Settle(ctx context.Context, consumer string, acks, nacks []EventRef) (SettleResult, error) {
	return s.SettleWith(ctx, consumer, SettleParams{Acks: acks, Nacks: nacks})
}

// SettleParams are the arguments of SettleWith.
type SettleParams struct {
	// Acks and Nacks are the refs to acknowledge and to hand back, as
	// Settle's.
	Acks, Nacks []EventRef
	// NackDelay, when set, is how long the nacked events wait before they
	// are handed out again (0–MaxRetryAfter; 0 is at once), in place of
	// the queue's retry policy: the WebSocket nack frame's delay, as a
	// failed acknowledgement's retryAfter. Other events flow meanwhile.
	NackDelay *time.Duration
}

// SettleWith is Settle with a delay for the nacks (p.NackDelay): a nacked
// event is not handed out again before the delay has passed, counted from
// the settlement; then it goes ahead of new work as any nacked event. A
// delay outside 0–MaxRetryAfter is herr.OutOfRange and settles nothing.
func (s *Store) SettleWith(ctx context.Context, consumer string, p SettleParams) (SettleResult, error) {
	ctx, op := telemetry.StartStore(ctx, "settle")
	res, err := s.settle(ctx, consumer, p)
	op.End(ctx, err)
	return res, err
}

func (s *Store) settle(ctx context.Context, consumer string, p SettleParams) (SettleResult, error) {
	if p.NackDelay != nil && (*p.NackDelay < 0 || *p.NackDelay > MaxRetryAfter) {
		return SettleResult{}, herr.New(herr.OutOfRange, "delay must be between 0 and %d seconds", int(MaxRetryAfter/time.Second))
	}
	acks, nacks := p.Acks, p.Nacks
	d, err := s.get(ctx, consumer)
	if err != nil {
		return SettleResult{}, err
	}
	type refs struct{ acks, nacks []EventRef }
	byBlock := map[int64]*refs{}
	var res SettleResult
	group := func(rs []EventRef, nack bool) {
		for _, r := range rs {
			bst, _, _, ok := parseLeaseID(r.LeaseID)
			if !ok {
				res.Skipped++
				continue
			}
			g := byBlock[bst]
			if g == nil {
				g = &refs{}
				byBlock[bst] = g
			}
			if nack {
				g.nacks = append(g.nacks, r)
			} else {
				g.acks = append(g.acks, r)
			}
		}
	}
	group(acks, false)
	group(nacks, true)
	starts := make([]int64, 0, len(byBlock))
	for st := range byBlock {
		starts = append(starts, st)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	known := map[int64]*blockDoc{}
	lowered := map[int64]int64{}
	rd := s.redelivery(d)
	for _, bst := range starts {
		g := byBlock[bst]
		var acked, nacked, skipped int
		var b *blockDoc
		relower := false
		var lowerTo int64 = -1 // the earliest due time of a lease nacked here
		err := s.retry(ctx, func() (bool, error) {
			acked, nacked, skipped, relower, lowerTo = 0, 0, 0, false, -1
			nowMs := s.nowMs()
			due := func(l *leaseRec) {
				at := int64(0)
				if l.Delayed {
					at = l.Expires
				}
				if lowerTo < 0 || at < lowerTo {
					lowerTo = at
				}
			}
			bs, err := s.getBlocks(ctx, d, []int64{bst})
			if err != nil {
				return false, err
			}
			if b = bs[bst]; b == nil {
				skipped = len(g.acks) + len(g.nacks)
				return true, nil
			}
			current := func(r EventRef) int {
				_, lst, tag, _ := parseLeaseID(r.LeaseID)
				i := b.lease(lst, tag)
				if i < 0 || b.Leases[i].Generation != r.Generation || b.Leases[i].Dying != "" {
					return -1
				}
				return i
			}
			for _, r := range g.acks {
				i := current(r)
				if i < 0 {
					skipped++
					continue
				}
				b.remove(i)
				acked++
			}
			for _, r := range g.nacks {
				i := current(r)
				if i >= 0 && (b.Leases[i].Requeued || b.Leases[i].Delayed) {
					// Nacked before: make sure the hint says so (a failed
					// lowering is repaired by the repeat).
					relower = true
					due(&b.Leases[i])
				}
				if i < 0 || b.Leases[i].Requeued || b.Leases[i].Delayed {
					skipped++
					continue
				}
				l := &b.Leases[i]
				l.requeue(nowMs, rd.failDelay(l.Attempt, p.NackDelay))
				due(l)
				nacked++
			}
			if acked == 0 && nacked == 0 {
				return true, nil
			}
			ok, err := s.commit(ctx, d.ID, blockWrite(b))
			if ok {
				s.notes.noteBlock(d, b)
			}
			return ok, err
		})
		if err != nil {
			return SettleResult{}, err
		}
		res.Acked += acked
		res.Nacked += nacked
		res.Skipped += skipped
		known[bst] = b
		if b != nil && len(b.Leases) == 0 {
			known[bst] = nil
			if acked > 0 {
				s.dropIfEmpty(ctx, d, b)
			}
		}
		if nacked > 0 || relower {
			lowered[bst] = max(lowerTo, 0)
		}
	}
	if err := s.lowerHintsTo(ctx, d.ID, lowered); err != nil {
		return SettleResult{}, err
	}
	if res.Committed, err = s.cursor(ctx, d, known); err != nil {
		return SettleResult{}, err
	}
	return res, nil
}

// Reject moves the single-event or batch leases refs names to the
// dead-letter queue at once, with reason (ReasonDeliveryLimit,
// ReasonExpired or ReasonMaxLen: the reasons the notifications API can
// report), instead of handing them back for redelivery: for events no
// transport can deliver (poison), which would otherwise come back until
// their delivery limit. A ref that is not current (an older generation,
// settled, already dying) is skipped. The move follows DeadLetter's
// no-loss order (marked dying, records written, then removed), each block
// of refs in its own conditional writes; a move that fails half-way is
// finished by whoever meets the lease next. It returns how many leases it
// dead-lettered; herr.InvalidArgument for another reason, herr.NotFound
// for an unknown consumer.
func (s *Store) Reject(ctx context.Context, consumer string, refs []EventRef, reason string) (int, error) {
	ctx, op := telemetry.StartStore(ctx, "reject")
	n, err := s.reject(ctx, consumer, refs, reason)
	op.End(ctx, err)
	return n, err
}

func (s *Store) reject(ctx context.Context, consumer string, refs []EventRef, reason string) (int, error) {
	if reasonCode(reason) == 0 {
		return 0, herr.New(herr.InvalidArgument, "unknown dead-letter reason %q", reason)
	}
	d, err := s.get(ctx, consumer)
	if err != nil {
		return 0, err
	}
	byBlock := map[int64][]EventRef{}
	for _, r := range refs {
		if bst, _, _, ok := parseLeaseID(r.LeaseID); ok {
			byBlock[bst] = append(byBlock[bst], r)
		}
	}
	total := 0
	var stuck []int64
	for bst, rs := range byBlock {
		var b *blockDoc
		n := 0
		err := s.retry(ctx, func() (bool, error) {
			n = 0
			bs, err := s.getBlocks(ctx, d, []int64{bst})
			if err != nil {
				return false, err
			}
			if b = bs[bst]; b == nil {
				return true, nil
			}
			nowMs := s.nowMs()
			for _, r := range rs {
				_, lst, tag, _ := parseLeaseID(r.LeaseID)
				i := b.lease(lst, tag)
				if i < 0 || b.Leases[i].Generation != r.Generation || b.Leases[i].Dying != "" {
					continue
				}
				b.markDying(i, reason, nowMs)
				n++
			}
			if n == 0 {
				return true, nil
			}
			return s.commit(ctx, d.ID, blockWrite(b))
		})
		if err != nil {
			return total, err
		}
		if n == 0 {
			continue
		}
		total += n
		if err := s.finishDying(ctx, d, b); err != nil {
			stuck = append(stuck, bst)
		}
	}
	// A move left half-way must be found by the next pull.
	_ = s.lowerHints(ctx, d.ID, stuck...)
	return total, nil
}

// ExtendEventsResult is what ExtendEvents did.
type ExtendEventsResult struct {
	// Extended counts the refs whose lease got the new expiry.
	Extended int
	// Skipped counts the refs that changed nothing: unknown, settled,
	// nacked, being dead-lettered, of an older generation, handed to
	// someone else, left by their session, or repeated.
	Skipped int
	// Capped counts the refs left as they were because the new expiry
	// would pass MaxLeaseLife after their hand-out.
	Capped int
}

// ExtendEvents is Extend for the single-event leases PullEvents handed
// out (the WebSocket extend frame): each current lease of refs gets the
// expiry now plus visibility, with one conditional write per block they
// belong to. The rules are Extend's: a lease its session still holds is
// extended, even past its expiry as long as nobody has been handed it
// since; anything else is skipped; the life from hand-out to expiry is
// capped at MaxLeaseLife, and a ref past the cap is counted in Capped and
// left as it was (the others of the call are extended all the same). Life
// is counted in whole seconds, as Extend's.
//
// Extending is allowed while the consumer is paused and does not check
// the calling session. Errors: herr.OutOfRange for a visibility under a
// millisecond; herr.NotFound for an unknown consumer; the store's errors
// (the call may be repeated).
func (s *Store) ExtendEvents(ctx context.Context, consumer string, refs []EventRef, visibility time.Duration) (ExtendEventsResult, error) {
	ctx, op := telemetry.StartStore(ctx, "extend")
	res, err := s.extendEvents(ctx, consumer, refs, visibility)
	op.End(ctx, err)
	return res, err
}

func (s *Store) extendEvents(ctx context.Context, consumer string, refs []EventRef, visibility time.Duration) (ExtendEventsResult, error) {
	var res ExtendEventsResult
	if visibility < time.Millisecond {
		return res, herr.New(herr.OutOfRange, "visibility must be positive")
	}
	d, err := s.get(ctx, consumer)
	if err != nil {
		return res, err
	}
	byBlock := map[int64][]EventRef{}
	seen := map[EventRef]bool{}
	for _, r := range refs {
		bst, _, _, ok := parseLeaseID(r.LeaseID)
		if !ok || seen[r] {
			res.Skipped++
			continue
		}
		seen[r] = true
		byBlock[bst] = append(byBlock[bst], r)
	}
	starts := make([]int64, 0, len(byBlock))
	for st := range byBlock {
		starts = append(starts, st)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	lowered := map[int64]int64{}
	for _, bst := range starts {
		rs := byBlock[bst]
		var extended, skipped, capped int
		var shorter int64 // the earliest expiry made earlier than it was, 0 if none
		err := s.retry(ctx, func() (bool, error) {
			extended, skipped, capped, shorter = 0, 0, 0, 0
			bs, err := s.getBlocks(ctx, d, []int64{bst})
			if err != nil {
				return false, err
			}
			b := bs[bst]
			if b == nil {
				skipped = len(rs)
				return true, nil
			}
			nowMs := s.nowMs()
			live := d.sessionLive(nowMs)
			want := nowMs + visibility.Milliseconds()
			for _, r := range rs {
				_, lst, tag, _ := parseLeaseID(r.LeaseID)
				i := b.lease(lst, tag)
				if i < 0 {
					skipped++
					continue
				}
				l := &b.Leases[i]
				if l.Generation != r.Generation || l.Dying != "" || l.Requeued || l.Delayed || l.Worker == "" ||
					(l.Session && !live(l.Worker)) {
					skipped++
					continue
				}
				life := l.Life
				if life <= 0 {
					life = int64(MaxLeaseVisibility / time.Second) // written before Extend existed
				}
				handedOut := l.Expires - life*1000
				newLife := lifeSecs(handedOut, want)
				if newLife > int64(MaxLeaseLife/time.Second) {
					capped++
					continue
				}
				newExpires := handedOut + newLife*1000
				if newExpires < l.Expires && (shorter == 0 || newExpires < shorter) {
					shorter = newExpires
				}
				l.Expires, l.Life = newExpires, newLife
				extended++
			}
			if extended == 0 {
				return true, nil
			}
			return s.commit(ctx, d.ID, blockWrite(b))
		})
		if err != nil {
			return ExtendEventsResult{}, err
		}
		res.Extended += extended
		res.Skipped += skipped
		res.Capped += capped
		if shorter > 0 {
			lowered[bst] = shorter // the head's hint may be later than the new expiry
		}
	}
	if err := s.lowerHintsTo(ctx, d.ID, lowered); err != nil {
		return ExtendEventsResult{}, err
	}
	return res, nil
}
