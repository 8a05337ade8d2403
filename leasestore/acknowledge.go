package leasestore

import (
	"context"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// AckStatus is what a worker reports for a lease.
type AckStatus string

// Acknowledge statuses (the durable-consumer API, "Acknowledge a batch";
// StatusRejected is Herald's).
const (
	StatusOK     AckStatus = "ok"
	StatusFailed AckStatus = "failed"
	// StatusRejected gives up on the lease's events: they go to the
	// dead-letter queue at once (ReasonRejected), whatever their delivery
	// count, and the cursor passes them.
	StatusRejected AckStatus = "rejected"
)

// Outcome is the result of an acknowledgement.
type Outcome string

// Outcomes (the durable-consumer API, "Acknowledge a batch").
const (
	OutcomeCommitted Outcome = "committed"
	OutcomeRequeued  Outcome = "requeued"
	OutcomeStale     Outcome = "stale"
	// OutcomeDeadLettered: a rejected lease's events are in the
	// dead-letter queue.
	OutcomeDeadLettered Outcome = "dead_lettered"
	// OutcomeExtended: Extend gave the lease a new expiry.
	OutcomeExtended Outcome = "extended"
)

// AckParams are the arguments of Acknowledge.
type AckParams struct {
	Consumer   string
	LeaseID    string
	Generation int64
	Status     AckStatus
	// RetryAfter, with StatusFailed, is how long the lease waits before it
	// is handed out again (0–MaxRetryAfter; 0 is at once); nil takes the
	// consumer's retry policy (none: at once). Other statuses ignore it.
	RetryAfter *time.Duration
	// Type, when set, is the consumer type the caller expects (the
	// durable-consumer API's acknowledge takes only TypeDurableConsumer):
	// a consumer of another type is herr.Malformed, checked on the record
	// the acknowledgement reads anyway, so it costs no extra read.
	Type string
}

// AckResult is an acknowledgement's outcome and the cursor after it.
type AckResult struct {
	Outcome   Outcome
	Committed int64 // cursor position; 0 = nothing committed yet
	// HandedOut is when the settled lease was handed to its holder (its
	// expiry less its recorded life, to the second): the start of its
	// processing. Zero for a stale acknowledgement and for a lease
	// written before lease lives were recorded.
	HandedOut time.Time
}

// Acknowledge settles a lease:
//
//   - ok for the lease's current generation commits it (even after it
//     expired, as long as nobody has been given it since) and advances the
//     cursor over the contiguous run of acknowledged leases;
//   - failed for the current generation requeues it ahead of new work,
//     once p.RetryAfter (or the consumer's retry policy's backoff) has
//     passed; other leases and new work are handed out meanwhile; a failed
//     that arrives again reads requeued again and changes nothing;
//   - rejected for the current generation moves its events to the
//     dead-letter queue (ReasonRejected) in DeadLetter's no-loss order and
//     reads dead_lettered; a move interrupted half-way is finished by
//     whoever meets the lease next, and reads dead_lettered too;
//   - anything for an older generation, or for a lease already committed
//     or being dead-lettered, is stale and changes nothing;
//   - but the repeat of an acknowledgement that committed the lease (ok)
//     or dead-lettered it (rejected) — the same lease id, generation and
//     status, as a client sends when it retries after losing the answer —
//     answers as the first did, committed (with the cursor now) or
//     dead_lettered, and changes nothing: the durable-consumer API's
//     "stale" says that nothing was committed. Herald remembers such an
//     acknowledgement in the lease's block while the block has unsettled
//     leases, and for at least RememberAcks (10 minutes) after its last
//     lease is settled unless MaxRememberedBlocks (128) blocks of the
//     consumer settled after it are remembered first; a repeat that comes
//     later answers stale.
//
// Acknowledging is allowed while the consumer is paused. It reads the
// consumer's head and the one block the lease id names, and writes only
// that block (a failed acknowledgement also lowers the block's hint in the
// head, so that the next pull finds the lease).
func (s *Store) Acknowledge(ctx context.Context, p AckParams) (*AckResult, error) {
	ctx, op := telemetry.StartStore(ctx, "acknowledge")
	res, err := s.acknowledge(ctx, p)
	op.End(ctx, err)
	return res, err
}

func (s *Store) acknowledge(ctx context.Context, p AckParams) (*AckResult, error) {
	if p.Status != StatusOK && p.Status != StatusFailed && p.Status != StatusRejected {
		return nil, herr.New(herr.InvalidArgument, "status must be ok, failed or rejected")
	}
	if p.Status == StatusFailed && p.RetryAfter != nil && (*p.RetryAfter < 0 || *p.RetryAfter > MaxRetryAfter) {
		return nil, herr.New(herr.OutOfRange, "retryAfter must be between 0 and %d seconds", int(MaxRetryAfter/time.Second))
	}
	d, err := s.get(ctx, p.Consumer)
	if err != nil {
		return nil, err
	}
	if p.Type != "" && d.Type != p.Type {
		return nil, herr.New(herr.Malformed, "the event destination is of type %s; pull and acknowledge are only supported for durable consumer destinations (type %s)", d.Type, p.Type)
	}
	res := &AckResult{Outcome: OutcomeStale}
	bst, lst, tag, ok := parseLeaseID(p.LeaseID)
	var b *blockDoc
	lowered := false
	var lowerTo int64 // with lowered: when the lease is due (0: now)
	repeat := false   // the answer is a remembered one: nothing was written
	rd := s.redelivery(d)
	if ok {
		err = s.retry(ctx, func() (bool, error) {
			res.Outcome, res.HandedOut, lowered, lowerTo, repeat = OutcomeStale, time.Time{}, false, 0, false
			bs, err := s.getBlocks(ctx, d, []int64{bst})
			if err != nil {
				return false, err
			}
			if b = bs[bst]; b == nil {
				return true, nil
			}
			i := b.lease(lst, tag)
			if i < 0 || b.Leases[i].Generation != p.Generation || b.Leases[i].Dying != "" {
				if out, ok := b.remembered(lst, tag, p.Generation); ok && out == rememberedAs(p.Status) {
					res.Outcome, repeat = out, true
				}
				return true, nil
			}
			l := &b.Leases[i]
			if l.Life > 0 {
				res.HandedOut = time.UnixMilli(l.Expires - l.Life*1000)
			}
			switch p.Status {
			case StatusOK:
				b.remember(l, p.Generation, OutcomeCommitted)
				b.remove(i)
				res.Outcome = OutcomeCommitted
			case StatusFailed:
				res.Outcome = OutcomeRequeued
				if l.Requeued || l.Delayed {
					// Again, if it was: a failed lowering is repaired by
					// the repeat.
					lowered, lowerTo = true, max(l.Expires, 0)
					if l.Requeued {
						lowerTo = 0
					}
					return true, nil
				}
				nowMs := s.nowMs()
				held := l.Expires
				l.requeue(nowMs, rd.failDelay(l.Attempt, p.RetryAfter))
				// The head's hint for the block is at most the old expiry:
				// a lease due no earlier needs no lowering (and no head
				// write).
				if !l.Delayed || l.Expires < held {
					lowered = true
					if l.Delayed {
						lowerTo = l.Expires
					}
				}
			case StatusRejected:
				b.remember(l, p.Generation, OutcomeDeadLettered)
				b.markDying(i, ReasonRejected, s.nowMs())
				res.Outcome = OutcomeDeadLettered
			}
			ok, err := s.commit(ctx, d.ID, blockWrite(b))
			if ok {
				s.notes.noteBlock(d, b)
			}
			return ok, err
		})
		if err != nil {
			return nil, err
		}
	}
	if res.Outcome == OutcomeCommitted && !repeat {
		s.dropIfEmpty(ctx, d, b)
	}
	if res.Outcome == OutcomeDeadLettered && !repeat {
		if err := s.finishDying(ctx, d, b); err != nil {
			// Marked dying: nobody is handed the events, and the next pull
			// (told by the lowered hint) finishes the move.
			lowered = true
		} else if bs, err := s.getBlocks(ctx, d, []int64{bst}); err == nil {
			b = bs[bst]
		}
	}
	if lowered {
		if err := s.lowerHintsTo(ctx, d.ID, map[int64]int64{bst: lowerTo}); err != nil {
			return nil, err
		}
	}
	known := map[int64]*blockDoc{}
	if ok {
		known[bst] = b
		if b != nil && len(b.Leases) == 0 {
			known[bst] = nil
		}
	}
	if res.Committed, err = s.cursor(ctx, d, known); err != nil {
		return nil, err
	}
	return res, nil
}

// rememberedAs is the remembered outcome a repeat of an acknowledgement
// with status answers: committed for ok, dead_lettered for rejected; ""
// for failed, whose lease stays in its block, where a repeat finds it.
func rememberedAs(status AckStatus) Outcome {
	switch status {
	case StatusOK:
		return OutcomeCommitted
	case StatusRejected:
		return OutcomeDeadLettered
	}
	return ""
}
