package leasestore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/herr"
)

// PullEvents is Pull for streams (seed 002, ConsumeDurableEventsWithAcks
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
//     redelivery (Consumer.InFlight, less those being dead-lettered); the
//     broker's backlog is not counted, since not every broker can count it.
//     A pull on such a queue takes in up to p.Limit new events whenever
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
		payloadID string
		out       []*Lease
		dying     *consumerDoc // the written record, when it marked leases dying
		finished  bool
	)
	release := func() {
		if len(received) == 0 {
			return
		}
		bg := context.WithoutCancel(ctx)
		n := 0
		if payloadID != "" {
			switch n = s.payloadWritten(bg, p.Consumer, payloadID); {
			case n == 0:
				_ = s.coll.Delete(bg, &payloadDoc{Key: payloadKey(p.Consumer, payloadID)})
			case n < 0:
				n = 0 // keep the payload: see Pull
			}
		}
		_ = p.Source.Settle(bg, received, min(n, taken))
		received = nil
	}

	err := s.retry(ctx, func() (bool, error) {
		out, dying = nil, nil
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
		if !finished && d.hasDying() {
			finished = true
			_ = s.finishDying(ctx, d) // see Pull
			return false, nil
		}
		limit := p.Limit
		ttl := d.MessageTTL
		expired := func(publishedMs int64) bool {
			return ttl > 0 && publishedMs > 0 && nowMs-publishedMs >= ttl
		}
		marked := false
		mark := func(i int, reason string) {
			d.markDying(i, reason, nowMs)
			marked = true
		}

		// a. The delivery limit.
		for _, i := range d.reclaimOrder(nowMs) {
			if d.Leases[i].Attempt >= int64(s.opts.DeliveryLimit) {
				mark(i, ReasonDeliveryLimit)
			}
		}
		holding := d.holding()
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
			for i := range d.Leases {
				switch l := &d.Leases[i]; {
				case l.Dying != "":
				case l.live(nowMs):
					leased += l.Count
				default:
					waiting += l.Count
				}
			}
			if err := take(min(int64(limit), room, maxLen-leased)); err != nil {
				return false, err
			}
			over := leased + waiting + int64(n) - maxLen
			for _, i := range d.reclaimOrder(nowMs) {
				if over <= 0 {
					break
				}
				if d.Leases[i].Count > over {
					d.split(i, over, uuid.NewString())
				}
				over -= d.Leases[i].Count
				mark(i, ReasonMaxLen)
			}
		}

		// c. Redeliveries, oldest first, one event per lease.
		work := d.reclaimOrder(nowMs)
		payloads := map[string]*payloadDoc{}
		for len(work) > 0 && len(out) < limit {
			i := work[0]
			work = work[1:]
			if d.Leases[i].Count > 1 {
				work = append([]int{d.split(i, 1, uuid.NewString())}, work...)
			}
			l := &d.Leases[i]
			pd, ok := payloads[l.payloadID()]
			if !ok {
				// Read before taking the lease (see Pull).
				if pd, err = s.getPayload(ctx, d.ID, l.payloadID()); err != nil {
					if errors.Is(err, errPayloadGone) {
						return false, nil // committed since the read: re-read
					}
					return false, err
				}
				payloads[l.payloadID()] = pd
			}
			events, err := pd.events(l)
			if err != nil {
				return false, err
			}
			if expired(pd.publishedAt(l.Offset)) {
				mark(i, ReasonExpired)
				continue
			}
			l.Worker, l.Requeued, l.Session = key, false, true
			l.Generation++
			l.Attempt++
			l.Expires = expires
			out = append(out, &Lease{
				ID: l.ID, Generation: l.Generation, Attempt: l.Attempt, Start: l.Start,
				Events: events, ExpiresAt: time.UnixMilli(expires),
			})
		}

		// d. New work.
		if d.MaxLength == 0 {
			if err := take(min(int64(limit-len(out)), room)); err != nil {
				return false, err
			}
		}
		if len(out) == 0 && n == 0 && !marked {
			if room <= 0 {
				retryAfter := time.Second
				if e := d.earliestExpiry(nowMs); e > 0 {
					retryAfter = max(retryAfter, time.Duration(e-nowMs)*time.Millisecond)
				}
				return false, &WindowFullError{InFlight: holding, RetryAfter: retryAfter}
			}
			return true, nil // nothing to hand out
		}
		if n > 0 && n != taken {
			if payloadID == "" {
				payloadID = uuid.NewString()
			}
			pd := &payloadDoc{
				Key: payloadKey(d.ID, payloadID), Kind: kindPayload, Consumer: d.ID,
				Events: make([][]byte, n), Published: published[:n:n],
			}
			for i := range n {
				pd.Events[i] = received[i].Body
			}
			if err := s.coll.Put(ctx, pd); err != nil {
				return false, storeErr(err)
			}
			taken = n
		}
		for j := range n {
			l := leaseRec{ID: uuid.NewString(), Payload: payloadID, Offset: int64(j), Start: d.Next, Count: 1}
			d.Next++
			switch {
			case expired(published[j]):
				d.Leases = append(d.Leases, l)
				mark(len(d.Leases)-1, ReasonExpired)
				continue
			case len(out) < limit:
				l.Worker, l.Session, l.Attempt, l.Expires = key, true, 1, expires
				out = append(out, &Lease{
					ID: l.ID, Attempt: 1, Start: l.Start, Events: [][]byte{received[j].Body},
					ExpiresAt: time.UnixMilli(expires),
				})
			default:
				l.Requeued = true // taken in under MaxLength, waiting
			}
			d.Leases = append(d.Leases, l)
		}
		ok, err := s.write(ctx, s.coll.Replace, d)
		if !ok || err != nil {
			return false, err
		}
		if marked {
			dying = d
		}
		if received != nil {
			// Custody of the first n has passed to leases: only now ack
			// them at the broker. A failed ack means a duplicate later,
			// which at-least-once allows.
			_ = p.Source.Settle(ctx, received, n)
			if n == 0 && payloadID != "" {
				s.deletePayloads(ctx, d.ID, []string{payloadID})
			}
			received = nil
		}
		return true, nil
	})
	release()
	if dying != nil {
		_ = s.finishDying(ctx, dying) // best effort, see Pull
	}
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

// Settle settles leases of consumer in one conditional write (seed 002,
// ConsumeDurableEventsWithAcks): acks first, then nacks, so a ref in both
// is acknowledged.
//
//   - An ack of a lease's current generation commits it, as Acknowledge
//     does with "ok" (also after its visibility passed or its session
//     left, as long as nobody has been handed it since), and the cursor
//     advances over the contiguous run of acknowledged events.
//   - A nack of the current generation requeues it for immediate
//     redelivery, ahead of new work; its delivery count grows by one when
//     it is delivered again.
//   - Anything else is skipped and counted (see SettleResult).
//
// Settling is allowed while the consumer is paused and does not check the
// settling session. A call whose refs change nothing writes nothing. It
// fails with herr.NotFound for an unknown consumer.
func (s *Store) Settle(ctx context.Context, consumer string, acks, nacks []EventRef) (SettleResult, error) {
	var res SettleResult
	var freed []string
	err := s.retry(ctx, func() (bool, error) {
		res, freed = SettleResult{}, nil
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		d.pruneSessions(s.nowMs())
		current := func(r EventRef) int {
			i := d.lease(r.LeaseID)
			if i < 0 || d.Leases[i].Generation != r.Generation || d.Leases[i].Dying != "" {
				return -1
			}
			return i
		}
		for _, r := range acks {
			i := current(r)
			if i < 0 {
				res.Skipped++
				continue
			}
			freed = append(freed, d.Leases[i].payloadID())
			d.commit(i)
			res.Acked++
		}
		for _, r := range nacks {
			i := current(r)
			if i < 0 || d.Leases[i].Requeued {
				res.Skipped++
				continue
			}
			l := &d.Leases[i]
			l.Requeued, l.Worker = true, ""
			res.Nacked++
		}
		res.Committed = d.Committed
		if res.Acked == 0 && res.Nacked == 0 {
			freed = nil
			return true, nil
		}
		freed = d.unreferenced(freed)
		return s.write(ctx, s.coll.Replace, d)
	})
	if err != nil {
		return SettleResult{}, err
	}
	// Best effort: an orphaned payload is unreachable and harmless.
	s.deletePayloads(ctx, consumer, freed)
	return res, nil
}
