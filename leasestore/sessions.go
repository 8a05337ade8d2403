package leasestore

import (
	"context"
	"slices"
	"time"

	"github.com/heraldevents/herald/herr"
)

// Session limits.
const (
	// MaxSessions is the most sessions one consumer may have attached at
	// once; Attach of one more is herr.ResourceExhausted. With the lease
	// table it bounds the consumer record's size.
	MaxSessions = 1000
	// TombstoneRetention is how long a consumer remembers a session that
	// was removed (by Detach, EvictSessions, or because its TTL lapsed), so
	// that the session's own late Attach or PullEvents fails with
	// herr.FailedPrecondition instead of attaching it afresh.
	TombstoneRetention = time.Hour
	// MaxTombstones is the most removed sessions a consumer remembers; the
	// oldest go first.
	MaxTombstones = 200
)

// errCancelled is the error of Attach and PullEvents for a session that
// was removed by someone else: the notifications API's "The broker cancelled this
// stream's consumer", which transports report in their own words.
func errCancelled(consumer string) error {
	return herr.New(herr.FailedPrecondition, "consumer cancelled: this session on %q was removed (detached, evicted, or its TTL lapsed without a heartbeat); attach a new session to resume", consumer)
}

// Attach registers session on consumer, or refreshes it (a heartbeat):
// the session counts as attached until ttl from now, and the consumer's
// LastAttached becomes now. A session is a stream reading the consumer
// through PullEvents with the session id as its worker.
//
// A session removed by someone else stays removed: Attach of a session id
// that was detached, evicted (EvictSessions), or whose TTL lapsed fails
// with herr.FailedPrecondition ("consumer cancelled"), for
// TombstoneRetention after the removal; its events have been requeued for
// other sessions. Stream transports report it as the notifications API's "The broker
// cancelled this stream's consumer" and the client reconnects with a new
// session. After TombstoneRetention (or once MaxTombstones newer removals
// pushed it out) the id would attach afresh; a session id is meant to be
// used by one stream only.
//
// Errors: herr.InvalidArgument for an empty session id or a ttl under a
// millisecond; herr.NotFound for an unknown consumer;
// herr.ResourceExhausted when MaxSessions are attached.
func (s *Store) Attach(ctx context.Context, consumer, sessionID string, ttl time.Duration) error {
	if sessionID == "" {
		return herr.New(herr.InvalidArgument, "a session needs an id")
	}
	if ttl < time.Millisecond {
		return herr.New(herr.InvalidArgument, "a session TTL must be at least a millisecond")
	}
	key := workerKey(sessionID)
	var cancelled bool
	err := s.retry(ctx, func() (bool, error) {
		cancelled = false
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		nowMs := s.nowMs()
		pruned := d.pruneSessions(nowMs)
		i := d.session(key)
		switch {
		case i >= 0 && d.Sessions[i].Tombstone:
			cancelled = true
			if !pruned {
				return true, nil
			}
			// Record the lapse (and requeue its leases) before saying so.
			return s.commit(ctx, consumer, write{doc: d})
		case i >= 0:
			d.Sessions[i].Expires = nowMs + ttl.Milliseconds()
		default:
			if d.liveSessions(nowMs) >= MaxSessions {
				return false, herr.New(herr.ResourceExhausted, "%d sessions are attached to %q, the most one consumer takes", MaxSessions, consumer)
			}
			d.Sessions = append(d.Sessions, session{Key: key, Expires: nowMs + ttl.Milliseconds()})
		}
		d.LastAttached = max(d.LastAttached, nowMs)
		return s.commit(ctx, consumer, write{doc: d})
	})
	if err != nil {
		return err
	}
	if cancelled {
		return errCancelled(consumer)
	}
	return nil
}

// Detach removes session from consumer and requeues every lease it holds
// at once, so they go to other sessions (their delivery count one higher
// when they do); the consumer's LastAttached becomes now. Detaching a
// session that is not attached (never was, already removed, or lapsed)
// still requeues whatever it holds and is not an error. It fails with
// herr.NotFound for an unknown consumer.
func (s *Store) Detach(ctx context.Context, consumer, sessionID string) error {
	key := workerKey(sessionID)
	return s.retry(ctx, func() (bool, error) {
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		nowMs := s.nowMs()
		changed := d.pruneSessions(nowMs)
		if i := d.session(key); i >= 0 && !d.Sessions[i].Tombstone {
			d.removeSession(i, nowMs)
			d.LastAttached = max(d.LastAttached, nowMs)
			changed = true
		}
		if !changed {
			return true, nil
		}
		return s.commit(ctx, consumer, write{doc: d})
	})
}

// EvictSessions removes the given sessions of consumer, or every attached
// session when none is given, as if the broker had cancelled their
// consumers: their leases are requeued at once, and each evicted session's
// next Attach or PullEvents fails with herr.FailedPrecondition (see
// Attach), which transports report as the notifications API's "The broker cancelled
// this stream's consumer". Operators use it to push streams off a queue;
// tests use it to produce that case. It returns how many attached sessions
// it removed (ids that are not attached are ignored), or herr.NotFound for
// an unknown consumer.
//
// A hub queue that is not shared (Consumer.Home) keeps its sessions in its
// home's memory: EvictSessions posts its home a NoticeEvict instead, and
// the home ends every stream of the queue at its next heartbeat; it
// returns 0 then (the store removed none itself).
func (s *Store) EvictSessions(ctx context.Context, consumer string, sessionIDs ...string) (int, error) {
	if d, err := s.get(ctx, consumer); err != nil {
		return 0, err
	} else if d.Home != "" && d.Home != ReleasedHome && !d.Shared {
		err := s.Notify(ctx, d.Home, Notice{Kind: NoticeEvict, Queue: consumer})
		if herr.CodeOf(err) == herr.NotFound {
			err = nil // its home is gone: so are its streams
		}
		return 0, err
	}
	want := map[string]bool{}
	for _, id := range sessionIDs {
		want[workerKey(id)] = true
	}
	var n int
	err := s.retry(ctx, func() (bool, error) {
		n = 0
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		nowMs := s.nowMs()
		changed := d.pruneSessions(nowMs)
		for i := 0; i < len(d.Sessions); i++ {
			e := d.Sessions[i]
			if e.Tombstone || (len(want) > 0 && !want[e.Key]) {
				continue
			}
			d.removeSession(i, nowMs)
			n++
			changed = true
		}
		if !changed {
			return true, nil
		}
		return s.commit(ctx, consumer, write{doc: d})
	})
	return n, err
}

// session returns the index of the entry (session or tombstone) with key,
// or -1.
func (d *consumerDoc) session(key string) int {
	for i := range d.Sessions {
		if d.Sessions[i].Key == key {
			return i
		}
	}
	return -1
}

// liveSessions counts the sessions attached at nowMs.
func (d *consumerDoc) liveSessions(nowMs int64) int {
	n := 0
	for _, e := range d.Sessions {
		if !e.Tombstone && e.Expires > nowMs {
			n++
		}
	}
	return n
}

// liveSession reports whether key is a session attached at nowMs.
func (d *consumerDoc) liveSession(key string, nowMs int64) bool {
	i := d.session(key)
	return i >= 0 && !d.Sessions[i].Tombstone && d.Sessions[i].Expires > nowMs
}

// removeSession turns session entry i into a tombstone removed at nowMs.
func (d *consumerDoc) removeSession(i int, nowMs int64) {
	d.Sessions[i] = session{Key: d.Sessions[i].Key, Expires: nowMs, Tombstone: true}
}

// pruneSessions applies the passage of time to d's sessions: a session
// whose TTL lapsed by nowMs becomes a tombstone (and LastAttached its
// lapse time, when it was the later), and tombstones older than TombstoneRetention,
// or beyond the newest MaxTombstones, are dropped. Every operation that
// decides from sessions or leases prunes first, so a lapsed session is
// treated as gone whether or not a write has recorded it yet. It reports
// whether d changed.
func (d *consumerDoc) pruneSessions(nowMs int64) bool {
	changed := false
	for i := range d.Sessions {
		e := &d.Sessions[i]
		if !e.Tombstone && e.Expires <= nowMs {
			d.LastAttached = max(d.LastAttached, e.Expires)
			*e = session{Key: e.Key, Expires: e.Expires, Tombstone: true}
			changed = true
		}
	}
	// Drop old tombstones, and the oldest beyond MaxTombstones.
	tombs := 0
	for _, e := range d.Sessions {
		if e.Tombstone {
			tombs++
		}
	}
	if tombs == 0 {
		return changed
	}
	cutoff := nowMs - TombstoneRetention.Milliseconds()
	if tombs > MaxTombstones {
		// The MaxTombstones-th newest removal time is the lowest kept.
		times := make([]int64, 0, tombs)
		for _, e := range d.Sessions {
			if e.Tombstone {
				times = append(times, e.Expires)
			}
		}
		slices.Sort(times)
		cutoff = max(cutoff, times[tombs-MaxTombstones]-1)
	}
	kept := d.Sessions[:0]
	for _, e := range d.Sessions {
		if e.Tombstone && e.Expires <= cutoff {
			changed = true
			continue
		}
		kept = append(kept, e)
	}
	d.Sessions = kept
	return changed
}
