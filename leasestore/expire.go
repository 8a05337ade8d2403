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
// (its worker cleared, generation unchanged), with one revision-conditional
// write of each block that changes. Afterwards the record says which leases
// workers hold and which wait for redelivery (Consumer.Requeued), instead
// of leaving expired leases looking held until the next pull reclaims
// them. A lapsed session is recorded as removed (see Attach).
//
// It is also the head's compaction: it reads every block the head
// indexes, and rewrites the head when its hints, its index or its cursor
// floor are out of date, so that consumers with little traffic keep tight
// hints (see blockEntry).
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
	var out Expired
	var dyingErr error
	err := s.retry(ctx, func() (bool, error) {
		out, dyingErr = Expired{}, nil
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		nowMs := s.opts.Now().UnixMilli()
		before, _ := d.Blocks.MarshalBinary()
		keptBefore, _ := d.Kept.MarshalBinary()
		changed := d.pruneSessions(nowMs)
		live := d.sessionLive(nowMs)
		blocks, err := s.getBlocks(ctx, d, d.allStarts())
		if err != nil {
			return false, err
		}
		ref := newRefresh(d, blocks)
		dirty := map[*blockDoc]bool{}
		for _, b := range blocks {
			if b == nil {
				continue
			}
			for i := range b.Leases {
				l := &b.Leases[i]
				if l.Dying != "" || l.Requeued || l.Delayed || l.live(nowMs, live) {
					continue
				}
				l.Requeued, l.Worker, l.Life = true, "", 0
				dirty[b] = true
				out.Leases++
				out.Events += l.Count
			}
		}
		if ok, err := s.commitBlocks(ctx, d, dirty); !ok || err != nil {
			return false, err
		}
		for _, b := range blocks {
			if b != nil && b.hasDying() {
				if err := s.finishDying(ctx, d, b); err != nil && dyingErr == nil {
					dyingErr = err
				}
			}
		}
		nt := s.notes.take(d)
		d.apply(ref, nt, nowMs, s.redelivery(d)) // an empty block read here is settled, kept or not
		gone := d.forget(nowMs)
		after, _ := d.Blocks.MarshalBinary()
		keptAfter, _ := d.Kept.MarshalBinary()
		if c, err := s.cursor(ctx, d, blocks); err == nil && c > d.Committed {
			d.Committed = c
			changed = true
		}
		if !changed && string(before) == string(after) && string(keptBefore) == string(keptAfter) {
			return true, nil
		}
		ok, err := s.commit(ctx, consumer, write{doc: d})
		if !ok {
			s.notes.giveBack(d, nt)
		}
		if ok {
			s.forgetBlocks(ctx, d, gone)
		}
		return ok, err
	})
	if err != nil {
		return Expired{}, err
	}
	return out, dyingErr
}
