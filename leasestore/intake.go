package leasestore

import (
	"context"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// IntakeParams are the arguments of Intake.
type IntakeParams struct {
	// Consumer is the queue; it must have a MaxLength.
	Consumer string
	// Source is where the queue's new events come from (its broker
	// subscription).
	Source Source
	// Max is the most events to receive from Source in this call, at
	// least 1. Fewer are taken when they do not fit one payload record
	// or the queue's in-flight window (MaxInFlight less its leased
	// events); the rest are handed back to Source.
	Max int
}

// IntakeResult is what one Intake did.
type IntakeResult struct {
	// Received counts the events Source returned. When it is below
	// IntakeParams.Max the source had no more ready: the broker's backlog
	// is drained.
	Received int
	// TakenIn counts the events whose custody passed to the queue (and
	// which were acked at Source); Received less TakenIn went back to
	// Source.
	TakenIn int
	// Evicted counts the events dead-lettered with ReasonMaxLen by this
	// call: the queue's oldest waiting events, then the oldest of those
	// just taken in.
	Evicted int
}

// Intake takes the broker backlog of a queue with a MaxLength into the
// store, so that the queue's length counts it (the notifications API: a
// queue that reaches its configured maximum length evicts the oldest
// messages to the dead-letter queue, REASON_MAXLEN). It receives up to
// p.Max events from p.Source and writes them to the queue as events
// waiting for delivery (delivery count 0: PullEvents hands them out
// before newer events, oldest first, as first deliveries); then, while the
// queue holds more than MaxLength events, leased and waiting together,
// the oldest waiting events are dead-lettered with ReasonMaxLen — the
// queue's own first, then the oldest of those just received. So after an
// Intake the queue holds the newest MaxLength events it has seen (fewer
// when sessions hold leased events, which are never evicted), and the
// rest are in the dead-letter queue with delivery count 0.
//
// No event is lost: the received events are written to the store (the
// evicted ones marked for the dead-letter queue), then the evicted ones'
// dead-letter records are written and they leave the queue (see
// DeadLetter), and only then are the events acked at the source. A
// failure of the dead-letter write leaves them marked in the queue, and
// the next operation on the queue finishes the move. Events that arrive
// past MessageTTL are dead-lettered with ReasonExpired instead, as
// PullEvents does.
//
// Intake hands nothing out and does not need an attached session: the
// reap-idle-queues job runs it for queues no session reads, and a stream
// runs it once when it attaches, so that its first delivery is the oldest
// of the newest MaxLength events rather than the oldest the broker kept.
// Call it again while Received == p.Max to drain a larger backlog.
//
// Errors: herr.InvalidArgument for p.Max below 1; herr.NotFound for an
// unknown consumer; herr.FailedPrecondition for a consumer without a
// MaxLength or a paused one; the source's and the store's errors (the
// received events then go back to the source).
func (s *Store) Intake(ctx context.Context, p IntakeParams) (IntakeResult, error) {
	ctx, op := telemetry.StartStore(ctx, "intake")
	res, err := s.intake(ctx, p)
	op.End(ctx, err)
	return res, err
}

func (s *Store) intake(ctx context.Context, p IntakeParams) (IntakeResult, error) {
	if p.Max < 1 {
		return IntakeResult{}, herr.New(herr.InvalidArgument, "intake: max must be at least 1, got %d", p.Max)
	}
	var (
		res       IntakeResult
		received  []Incoming // custody held by this call until settled
		published []int64    // enqueue times of received (Unix ms)
		taken     int        // how many of received the payload holds
		pid       string
		last      *reservation
		finished  bool
		evicted   int // existing waiting events this call dead-lettered
	)
	release := func() { s.release(ctx, p.Consumer, p.Source, received, taken, pid, last) }

	err := s.retry(ctx, func() (bool, error) {
		seen := s.headWrites(p.Consumer)
		d, err := s.get(ctx, p.Consumer)
		if err != nil {
			return false, err
		}
		maxLen := int64(d.MaxLength)
		if maxLen <= 0 {
			return false, herr.New(herr.FailedPrecondition, "consumer %q has no maximum length: there is nothing to take in ahead of delivery", p.Consumer)
		}
		if d.Paused {
			return false, herr.New(herr.FailedPrecondition, "consumer %q is paused", p.Consumer)
		}
		nowMs := s.opts.Now().UnixMilli()
		d.pruneSessions(nowMs)
		live := d.sessionLive(nowMs)
		// The queue's length counts every held event: read them all.
		blocks, err := s.getBlocks(ctx, d, d.allStarts())
		if err != nil {
			return false, err
		}
		if !finished && s.finishAll(ctx, d, blocks) {
			finished = true
			return false, nil // see Pull
		}
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
		// What can be taken in: the window less the leased events (waiting
		// ones can be evicted to make room).
		fits := MaxInFlight - leased
		if fits <= 0 {
			return true, nil // the window is full of leased events
		}
		if received == nil {
			in, err := p.Source.Receive(ctx, int(min(int64(p.Max), fits, maxBlockEvents)))
			if err != nil {
				return false, err
			}
			res.Received = len(in)
			if len(in) == 0 {
				return true, nil // drained
			}
			ttl := d.MessageTTL
			received, published = in, make([]int64, len(in))
			for i := range in {
				if ttl > 0 {
					published[i] = publishedMs(in[i])
				} else if !in[i].PublishedAt.IsZero() {
					published[i] = in[i].PublishedAt.UnixMilli()
				}
			}
		}
		n := int64(min(s.fit(received), len(received)))
		n = min(n, fits)
		// Events that arrive past the TTL leave as EXPIRED: they do not
		// count towards the length.
		ttl := d.MessageTTL
		expired := func(j int64) bool { return ttl > 0 && published[j] > 0 && nowMs-published[j] >= ttl }
		stay := n
		for j := range n {
			if expired(j) {
				stay--
			}
		}
		over := max(leased+waiting+stay-maxLen, 0)
		evictOld := min(over, waiting)
		evictNew := over - evictOld

		// Evict the oldest waiting events first.
		dirty := map[*blockDoc]bool{}
		marked := int64(0)
		for _, r := range reclaimOrder(blocks, nowMs, live, nil) {
			if marked >= evictOld {
				break
			}
			if c := r.b.Leases[r.i].Count; c > evictOld-marked {
				r.b.split(r.i, evictOld-marked)
			}
			marked += r.b.Leases[r.i].Count
			r.b.markDying(r.i, ReasonMaxLen, nowMs)
			dirty[r.b] = true
		}
		holding, err := s.holding(ctx, d, blocks)
		if err != nil {
			return false, err
		}
		if len(dirty) > 0 && holding+marked+n > MaxInFlight {
			// The window counts events until they are out of the queue:
			// finish these evictions first, then take the new events in.
			ok, err := s.commitBlocks(ctx, d, dirty)
			if !ok || err != nil {
				return false, err
			}
			evicted += int(marked)
			s.finishMarked(ctx, d, dirty, nil)
			return false, nil // read again: the window moved
		}
		if n != int64(taken) {
			if pid == "" {
				pid = uuid.NewString()
			}
			if err := s.putPayload(ctx, d.ID, pid, received[:n], published[:n:n]); err != nil {
				return false, err
			}
			taken = int(n)
		}
		extra := make([]write, 0, len(dirty))
		for b := range dirty {
			extra = append(extra, blockWrite(b))
		}
		var nb *blockDoc
		last = &reservation{
			incarnation: d.Incarnation, count: n, checkRoom: true, nowMs: nowMs,
			refresh: newRefresh(d, blocks), extra: extra, basis: d, seen: seen,
			block: func(start int64) *blockDoc {
				nb = &blockDoc{
					Key: blockKey(d.ID, d.Incarnation, start), Kind: kindBlock, Consumer: d.ID,
					Start: start, Count: n, Payload: pid, Leases: make(blockLeases, 0, n),
				}
				evicting := evictNew
				for j := range n {
					l := leaseRec{Start: start + j, Count: 1, Tag: newTag()}
					switch {
					case expired(j):
						l.Dying, l.Expires = ReasonExpired, nowMs
					case evicting > 0:
						l.Dying, l.Expires = ReasonMaxLen, nowMs
						evicting--
					default:
						l.Requeued = true // waiting for its first delivery
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
		res.TakenIn = int(n)
		evicted += int(marked + evictNew)
		for b := range dirty {
			s.notes.note(d, b.Start, b.unsettled())
		}
		if nb.hasDying() {
			dirty[nb] = true
		}
		// Custody of the first n has passed to the queue. The evicted
		// ones' dead-letter records are written before the source is
		// acked (a failure leaves them marked in the queue, for the next
		// operation to finish); a crash before the ack means duplicates
		// later, which at-least-once allows.
		s.finishMarked(ctx, d, dirty, nil)
		s.settleSource(ctx, p.Source, received, int(n))
		received = nil
		return true, nil
	})
	release()
	res.Evicted = evicted
	return res, err
}
