package leasestore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Hub queues: non-durable queues held in the memory of one process (their
// home), fed by that process's hub subscription (docs/streams-at-scale.md).
// The store keeps what must outlive a process or cross between processes:
// the queue's record (token, filters, home) and the events a home hands
// over or shares (Spill). Moving a queue is a compare-and-set on its Home.

// ReleasedHome is the Home of a hub queue whose process let it go (it shut
// down cleanly, its events spilled to the store): any process may take it.
const ReleasedHome = "-"

// ProcessAlive reports whether p counts as alive at now: its last heartbeat
// is less than Options.ProcessTTL old.
func (s *Store) ProcessAlive(p *Process, now time.Time) bool {
	return p != nil && now.Sub(p.Heartbeat) < s.opts.ProcessTTL
}

// SetHome moves hub queue id from home from to home to, as one conditional
// write: it succeeds only while the queue's Home is from (from ""
// matches a queue with no home: never a hub queue). It returns the queue
// as written. Errors: herr.NotFound for an unknown queue;
// herr.Aborted when the queue's home is no longer from (another process
// moved it first: re-read and decide again); herr.InvalidArgument for an
// empty to.
func (s *Store) SetHome(ctx context.Context, id, from, to string) (*Consumer, error) {
	if to == "" {
		return nil, herr.New(herr.InvalidArgument, "a hub queue's new home must be named")
	}
	return s.setHub(ctx, "set_home", id, from, func(d *consumerDoc) bool {
		if d.Home == to {
			return false
		}
		// A move is an attach: the reaper counts the queue's idle time
		// from it (a released queue's grace starts now).
		d.Home, d.LastAttached = to, max(d.LastAttached, s.nowMs())
		return true
	})
}

// ShareQueue marks hub queue id shared (see Consumer.Shared), as a write
// conditional on its Home being home. Sharing a queue twice is not an
// error. Errors as SetHome's.
func (s *Store) ShareQueue(ctx context.Context, id, home string) (*Consumer, error) {
	return s.setHub(ctx, "share_queue", id, home, func(d *consumerDoc) bool {
		if d.Shared {
			return false
		}
		d.Shared = true
		return true
	})
}

// setHub applies change to hub queue id if its Home is home, with one
// revision-conditional write (none when change reports no change).
func (s *Store) setHub(ctx context.Context, op, id, home string, change func(*consumerDoc) bool) (c *Consumer, err error) {
	ctx, span := telemetry.StartStore(ctx, op)
	defer func() { span.End(ctx, err) }()
	var d *consumerDoc
	err = s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.get(ctx, id); err != nil {
			return false, err
		}
		if d.Home != home {
			return false, errHomeMoved(id)
		}
		if !change(d) {
			return true, nil
		}
		return s.commit(ctx, id, write{doc: d})
	})
	if err != nil {
		return nil, err
	}
	return d.view(s.nowMs(), nil, 0)
}

func errHomeMoved(id string) error {
	return herr.New(herr.Aborted, "hub queue %q has another home now", id)
}

// DeleteIfHome deletes hub queue id, with its blocks and their payloads,
// if its Home is still home: a conditional delete, so that a queue another
// process took over meanwhile stays. It returns the deleted queue. Errors:
// herr.NotFound for an unknown queue; herr.Aborted when its home moved.
func (s *Store) DeleteIfHome(ctx context.Context, id, home string) (*Consumer, error) {
	var (
		d      *consumerDoc
		blocks map[int64]*blockDoc
	)
	err := s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.get(ctx, id); err != nil {
			return false, err
		}
		if d.Home != home {
			return false, errHomeMoved(id)
		}
		if blocks, err = s.getBlocks(ctx, d, d.allStarts()); err != nil {
			return false, err
		}
		return s.commit(ctx, id, write{doc: d, delete: true})
	})
	if err != nil {
		return nil, err
	}
	s.deleteBlocks(ctx, d, blocks)
	return d.view(s.nowMs(), blocks, 0)
}

// Spill adds events to consumer's backlog in the store, waiting to be
// handed out (PullEvents) ahead of new work, in the order given, each never
// delivered yet (its first delivery has Attempt 1). It is how a hub queue's
// home hands its in-memory events to the store: when it lets the queue go
// to another process, shuts down, or shares the queue (see Consumer.Home).
// in[i].PublishedAt, when set, ages the event for the queue's MessageTTL;
// Handle is not used.
//
// Events beyond the queue's room (MaxInFlight less the events it holds, or
// its MaxLength) are not written: Spill returns how many of in, from the
// front, it wrote; the caller dead-letters or drops the rest. One payload
// and one block record are written per call (split when in does not fit
// one payload record). Errors: herr.NotFound for an unknown consumer; the
// store's.
func (s *Store) Spill(ctx context.Context, consumer string, in []Incoming) (n int, err error) {
	ctx, span := telemetry.StartStore(ctx, "spill")
	defer func() { span.End(ctx, err) }()
	for n < len(in) {
		k, err := s.spillOnce(ctx, consumer, in[n:])
		n += k
		if err != nil || k == 0 {
			return n, err
		}
	}
	return n, nil
}

// spillOnce writes the first events of in that fit one payload record and
// the queue's room, and returns how many.
func (s *Store) spillOnce(ctx context.Context, consumer string, in []Incoming) (int, error) {
	var (
		pid   string
		taken int
		n     int
	)
	err := s.retry(ctx, func() (bool, error) {
		d, err := s.get(ctx, consumer)
		if err != nil {
			return false, err
		}
		holding, err := s.holding(ctx, d, map[int64]*blockDoc{})
		if err != nil {
			return false, err
		}
		room := MaxInFlight - holding
		if d.MaxLength > 0 {
			room = min(room, d.MaxLength-holding)
		}
		n = int(min(int64(s.fit(in)), max(room, 0)))
		if n == 0 {
			return true, nil
		}
		if n != taken {
			if pid != "" {
				// Lost the race with less room than before: the last
				// reservation was refused outright, so nothing refers
				// to its payload.
				s.deletePayload(ctx, consumer, pid)
			}
			pid = uuid.NewString()
			published := make([]int64, n)
			for i := range n {
				if !in[i].PublishedAt.IsZero() {
					published[i] = in[i].PublishedAt.UnixMilli()
				} else {
					published[i] = publishedMs(in[i])
				}
			}
			if err := s.putPayload(ctx, d.ID, pid, in[:n], published); err != nil {
				return false, err
			}
			taken = n
		}
		r := &reservation{
			incarnation: d.Incarnation, count: int64(n), nowMs: s.nowMs(), checkRoom: true,
			block: func(start int64) *blockDoc {
				b := &blockDoc{
					Key: blockKey(d.ID, d.Incarnation, start), Kind: kindBlock, Consumer: d.ID,
					Start: start, Count: int64(n), Payload: pid, Leases: make(blockLeases, n),
				}
				for j := range n {
					b.Leases[j] = leaseRec{Start: start + int64(j), Count: 1, Tag: newTag(), Requeued: true}
				}
				return b
			},
		}
		s.reserve(ctx, d.ID, r)
		return r.ok, r.err
	})
	if err != nil {
		// The payload stays: a write that failed ambiguously may have
		// made a block that refers to it, and an orphan is harmless.
		return 0, err
	}
	return n, nil
}

// TakeSpilled removes the events waiting in consumer's backlog (spilled,
// nacked, or left by a session that went), up to limit, lowest position
// first, and returns them with their publish times (from the store's
// record of them; zero when unknown). It is how a hub queue's new home
// takes what the old one spilled: from then on the events live in the new
// home's memory only, as a hub queue's events do (a crash loses them).
// Events handed out to a live session are left alone. One conditional
// write per block taken from; an event another caller took first is not
// returned. Errors: herr.NotFound for an unknown consumer; the store's.
func (s *Store) TakeSpilled(ctx context.Context, consumer string, limit int) (out []Incoming, err error) {
	ctx, span := telemetry.StartStore(ctx, "take_spilled")
	defer func() { span.End(ctx, err) }()
	if limit < 1 {
		return nil, herr.New(herr.InvalidArgument, "limit must be at least 1")
	}
	d, err := s.get(ctx, consumer)
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
	starts := sortedStarts(blocks)
	for _, st := range starts {
		if len(out) >= limit {
			break
		}
		err := s.retry(ctx, func() (bool, error) {
			bs, err := s.getBlocks(ctx, d, []int64{st})
			if err != nil {
				return false, err
			}
			b := bs[st]
			if b == nil {
				return true, nil
			}
			var pd *payloadDoc
			var took []Incoming
			for i := 0; i < len(b.Leases) && len(out)+len(took) < limit; {
				l := &b.Leases[i]
				if !l.waiting(nowMs, live) || l.Delayed {
					i++
					continue
				}
				if pd == nil {
					if pd, err = s.getPayload(ctx, d.ID, b.Payload); err != nil {
						if errors.Is(err, errPayloadGone) {
							return false, nil // settled meanwhile: re-read
						}
						return false, err
					}
				}
				events, err := pd.events(b, l)
				if err != nil {
					return false, err
				}
				for j, body := range events {
					in := Incoming{Body: body}
					if ms := pd.publishedAt(l.Start - b.Start + int64(j)); ms > 0 {
						in.PublishedAt = time.UnixMilli(ms)
					}
					took = append(took, in)
				}
				b.remove(i)
			}
			if len(took) == 0 {
				return true, nil
			}
			ok, err := s.commit(ctx, d.ID, blockWrite(b))
			if ok {
				s.notes.note(d, b.Start, b.unsettled())
				s.dropIfEmpty(ctx, d, b)
				out = append(out, took...)
			}
			return ok, err
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
