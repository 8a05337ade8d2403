package leasestore

import (
	"context"
	"errors"
	"time"

	"github.com/heraldevents/herald/herr"
)

// ReapIdle is the idle-queue reaper (the notifications API, "Durable Queue Lifetime"
// and the reconnect grace of non-durable queues). It deletes every queue
// without a live session whose idle time has passed its window:
//
//   - a TypeNonDurableQueue once grace has passed since LastAttached;
//   - a TypeDurableQueue once idle has passed since LastAttached.
//
// A queue that never had a session counts from its CreatedAt. A queue with
// a live session is never reaped, and TypeDurableConsumer never is. A hub
// queue (Consumer.Home) that is not shared is its home's to reap while its
// home is alive (Options.ProcessTTL); once the home is dead or gone its
// idle time counts from the home's last heartbeat, and a released one's
// from its release.
// Publishing to a queue does not keep it alive; only attached sessions do.
//
// Each deletion is a conditional delete of the consumer record as read, so
// a session that attaches meanwhile wins and the queue stays. The payload
// records of the events the queue held are deleted with it (those events
// are gone: the notifications API deletes a reaped queue "along with any messages it
// still holds"); its dead letters stay, like DeleteConsumer's.
//
// It returns the queues it deleted, so that the caller deletes their
// broker subscriptions. When some cannot be read or deleted it goes on with
// the others and returns what it deleted with the errors joined.
func (s *Store) ReapIdle(ctx context.Context, grace, idle time.Duration) ([]*Consumer, error) {
	all, err := s.ListHeads(ctx)
	if err != nil {
		return nil, err
	}
	return s.ReapIdleAmong(ctx, all, grace, idle)
}

// ListHeads returns every consumer, of every type, in no particular order,
// as its head record tells it (LookupConsumer's figures: Committed a floor,
// InFlight and Requeued upper bounds): one query, where ListConsumers also
// reads every consumer's blocks. Consumers stored in an earlier layout are
// left out.
func (s *Store) ListHeads(ctx context.Context) ([]*Consumer, error) {
	heads, err := s.listHeads(ctx)
	if err != nil {
		return nil, err
	}
	all := make([]*Consumer, 0, len(heads))
	nowMs := s.nowMs()
	for _, d := range heads {
		c, err := d.view(nowMs, nil, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, c)
	}
	return all, nil
}

// ReapIdleAmong is ReapIdle over the consumers of a listing the caller
// has read (ListHeads), so that a job that needs the listing for more than
// reaping reads every head once. Each candidate is read again before its
// conditional delete, so a listing that has aged reaps nothing that is no
// longer idle.
func (s *Store) ReapIdleAmong(ctx context.Context, all []*Consumer, grace, idle time.Duration) ([]*Consumer, error) {
	var (
		out   []*Consumer
		errs  []error
		homes map[string]*Process // read once, when a hub queue needs it
	)
	for _, c := range all {
		if window(c.Type, grace, idle) < 0 {
			continue
		}
		if c.Home != "" && homes == nil {
			ps, err := s.ListProcesses(ctx)
			if err != nil {
				return nil, err
			}
			homes = make(map[string]*Process, len(ps))
			for _, p := range ps {
				homes[p.ID] = p
			}
		}
		if !s.idle(c, grace, idle, homes) {
			continue
		}
		reaped, err := s.reapOne(ctx, c.ID, grace, idle, homes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if reaped != nil {
			out = append(out, reaped)
		}
	}
	return out, errors.Join(errs...)
}

// window returns the idle window of a consumer type, or -1 for a type that
// is never reaped.
func window(typ string, grace, idle time.Duration) time.Duration {
	switch typ {
	case TypeNonDurableQueue:
		return grace
	case TypeDurableQueue:
		return idle
	}
	return -1
}

// idle reports whether c (as viewed now) is past its idle window; homes
// holds the process records (needed for hub queues only).
func (s *Store) idle(c *Consumer, grace, idle time.Duration, homes map[string]*Process) bool {
	w := window(c.Type, grace, idle)
	if w < 0 || c.LiveSessions > 0 {
		return false
	}
	now := s.opts.Now()
	since := c.CreatedAt
	if c.LastAttached.After(since) {
		since = c.LastAttached
	}
	if c.Home != "" && c.Home != ReleasedHome && !c.Shared {
		p := homes[c.Home]
		if s.ProcessAlive(p, now) {
			return false
		}
		if p != nil && p.Heartbeat.After(since) {
			since = p.Heartbeat
		}
	}
	return !now.Before(since.Add(w))
}

// reapOne deletes consumer id if it is still idle: a conditional delete on
// the revision read. It returns the deleted consumer, or nil when it is
// gone or no longer idle.
func (s *Store) reapOne(ctx context.Context, id string, grace, idle time.Duration, homes map[string]*Process) (*Consumer, error) {
	var (
		d    *consumerDoc
		view *Consumer
	)
	err := s.retry(ctx, func() (bool, error) {
		view = nil
		var err error
		if d, err = s.get(ctx, id); err != nil {
			if herr.CodeOf(err) == herr.NotFound {
				return true, nil
			}
			return false, err
		}
		c, err := d.view(s.nowMs(), nil, 0)
		if err != nil {
			return false, err
		}
		if !s.idle(c, grace, idle, homes) {
			return true, nil
		}
		ok, err := s.commit(ctx, id, write{doc: d, delete: true})
		if ok {
			view = c
		}
		return ok, err
	})
	if err != nil || view == nil {
		return nil, err
	}
	if blocks, err := s.getBlocks(ctx, d, d.recordStarts()); err == nil {
		s.deleteBlocks(ctx, d, blocks)
	}
	return view, nil
}
