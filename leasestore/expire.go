package leasestore

import (
	"context"
)

// Expired is what ExpireLeases changed on one consumer.
type Expired struct {
	// Leases and Events count the leases (and the events they hold) that
	// were held by a worker past their visibility timeout and are now
	// requeued for redelivery.
	Leases int
	Events int64
}

// ExpireLeases is the lease-expiry sweep for one consumer: every lease
// whose visibility timeout has passed while a worker held it, and every
// session lease whose session is gone (its TTL lapsed), is marked requeued
// (its worker cleared, generation unchanged), in one revision-conditional
// write of the consumer record. Afterwards the record says which leases
// workers hold and which wait for redelivery (Consumer.Requeued), instead
// of leaving expired leases looking held until the next pull reclaims
// them. A lapsed session is recorded as removed (see Attach).
//
// The sweep changes no outcome a worker can see: a pull still hands out
// requeued leases before new work with generation and attempt one higher,
// and an "ok" for the lease's current generation still commits it, since
// nobody has been given it since. A consumer with nothing expired is read
// and not written.
//
// It also finishes a dead-lettering that was interrupted (leases marked
// for the dead-letter queue whose move did not complete; see DeadLetter),
// and returns that step's error if it fails again. It returns herr.NotFound
// for an unknown consumer.
func (s *Store) ExpireLeases(ctx context.Context, consumer string) (Expired, error) {
	var (
		out   Expired
		dying *consumerDoc
	)
	err := s.retry(ctx, func() (bool, error) {
		out, dying = Expired{}, nil
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		nowMs := s.opts.Now().UnixMilli()
		held := map[int]bool{}
		for i := range d.Leases {
			if l := &d.Leases[i]; !l.Requeued && l.Dying == "" {
				held[i] = true
			}
		}
		changed := d.pruneSessions(nowMs)
		for i := range d.Leases {
			l := &d.Leases[i]
			if l.Dying != "" || (l.Requeued && !held[i]) || l.live(nowMs) {
				continue
			}
			l.Requeued, l.Worker = true, ""
			out.Leases++
			out.Events += l.Count
		}
		if d.hasDying() {
			dying = d
		}
		if out.Leases == 0 && !changed {
			return true, nil
		}
		return s.write(ctx, s.coll.Replace, d)
	})
	if err != nil {
		return Expired{}, err
	}
	if dying != nil {
		if err := s.finishDying(ctx, dying); err != nil {
			return out, err
		}
	}
	return out, nil
}

// requeued counts the events in leases that wait for redelivery: failed by
// their worker, requeued by ExpireLeases or a session's departure, or put
// there by a replay or a MaxLength intake.
func (d *consumerDoc) requeued() int64 {
	var n int64
	for i := range d.Leases {
		if d.Leases[i].Requeued && d.Leases[i].Dying == "" {
			n += d.Leases[i].Count
		}
	}
	return n
}
