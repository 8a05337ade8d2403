package leasestore

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// The states of a lease (LeaseView.State).
const (
	// LeaseHeld: handed out to a worker or a stream session, and not yet
	// acknowledged; it comes back for redelivery at Expires.
	LeaseHeld = "held"
	// LeaseWaiting: failed, nacked, expired or left by its session, and
	// waiting for redelivery: at once, or at Expires when delayed by a
	// retry policy or a retryAfter.
	LeaseWaiting = "waiting"
	// LeaseDeadLettering: being moved to the dead-letter queue.
	LeaseDeadLettering = "dead_lettering"
)

// LeaseView is one lease as an operator sees it: which events, how many
// times they were delivered, and until when. It names no lease id: with
// the generation, the id is what acknowledges the lease, and a view is
// for looking, not for settling another worker's events.
type LeaseView struct {
	// First is the position of its first event (the sequence a pull
	// reports), Count how many events it holds from there.
	First, Count int64
	// Attempt is the lifetime delivery count of its events (1 on the
	// first delivery; 0 for a replayed dead letter not yet delivered).
	Attempt int64
	// State is LeaseHeld, LeaseWaiting or LeaseDeadLettering.
	State string
	// Expires is when a held lease comes back, or when a delayed waiting
	// lease is due; zero for a lease due now and for one dead-lettering.
	Expires time.Time
	// Session marks a lease held by a stream session rather than a pull.
	Session bool
}

// Leases returns consumer id's unsettled leases in position order: at
// most MaxInFlight events' worth, since that is all a consumer may hold.
// Cost: the reads of GetConsumer (the head, then the blocks it indexes);
// nothing is written. Errors: herr.NotFound for an unknown consumer, the
// store's errors otherwise.
func (s *Store) Leases(ctx context.Context, id string) ([]LeaseView, error) {
	d, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	blocks, err := s.getBlocks(ctx, d, d.allStarts())
	if err != nil {
		return nil, err
	}
	nowMs := s.nowMs()
	d.pruneSessions(nowMs)
	live := d.sessionLive(nowMs)
	out := []LeaseView{}
	for _, b := range blocks {
		if b == nil {
			continue
		}
		for i := range b.Leases {
			l := &b.Leases[i]
			v := LeaseView{First: l.Start, Count: l.Count, Attempt: l.Attempt, Session: l.Session}
			switch {
			case l.Dying != "":
				v.State = LeaseDeadLettering
			case l.live(nowMs, live):
				v.State, v.Expires = LeaseHeld, time.UnixMilli(l.Expires).UTC()
			default:
				v.State = LeaseWaiting
				if l.Delayed && l.Expires > nowMs {
					v.Expires = time.UnixMilli(l.Expires).UTC()
				}
			}
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b LeaseView) int { return cmp.Compare(a.First, b.First) })
	return out, nil
}
