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
// whose visibility timeout has passed while a worker held it is marked
// requeued (its worker cleared, generation unchanged), in one
// revision-conditional write of the consumer record. Afterwards the record
// says which leases workers hold and which wait for redelivery
// (Consumer.Requeued), instead of leaving expired leases looking held until
// the next pull reclaims them.
//
// The sweep changes no outcome a worker can see: a pull still hands out
// requeued leases before new work with generation and attempt one higher,
// and an "ok" for the lease's current generation still commits it, since
// nobody has been given it since. A consumer with nothing expired is read
// and not written. It returns herr.NotFound for an unknown consumer.
func (s *Store) ExpireLeases(ctx context.Context, consumer string) (Expired, error) {
	var out Expired
	err := s.retry(ctx, func() (bool, error) {
		out = Expired{}
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		nowMs := s.opts.Now().UnixMilli()
		for i := range d.Leases {
			l := &d.Leases[i]
			if l.Requeued || l.live(nowMs) {
				continue
			}
			l.Requeued, l.Worker = true, ""
			out.Leases++
			out.Events += l.Count
		}
		if out.Leases == 0 {
			return true, nil
		}
		return s.write(ctx, s.coll.Replace, d)
	})
	if err != nil {
		return Expired{}, err
	}
	return out, nil
}

// requeued counts the events in leases that wait for redelivery: failed by
// their worker or requeued by ExpireLeases.
func (d *consumerDoc) requeued() int64 {
	var n int64
	for i := range d.Leases {
		if d.Leases[i].Requeued {
			n += d.Leases[i].Count
		}
	}
	return n
}
