package leasestore

import (
	"github.com/heraldevents/herald/leasestore/internal/headcfg"

	"context"
	"errors"
	"sort"
	"sync"

	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// errOldLayout is the error for a consumer stored in the layout of Herald
// before the block layout: its whole lease table in one record. Such a
// record is never misread; it can only be deleted.
func errOldLayout(id string) error {
	return herr.New(herr.FailedPrecondition, "consumer %q was stored by an earlier Herald in a record layout this version does not read: delete it (DELETE /v1/event-destinations/%s, or the queue) and create it again", id, id)
}

// get reads consumer id's head, or herr.NotFound; a head of the earlier
// layout is errOldLayout.
func (s *Store) get(ctx context.Context, id string) (*consumerDoc, error) {
	d, err := s.getAny(ctx, id)
	if err == nil && d.Layout != layoutBlocks {
		return nil, errOldLayout(id)
	}
	return d, err
}

// getAny reads consumer id's head whatever its layout: a record of the
// earlier layout (whose fields this one does not have) comes back with
// Layout 0 and only its key and id.
func (s *Store) getAny(ctx context.Context, id string) (*consumerDoc, error) {
	d := &consumerDoc{Key: consumerKey(id)}
	err := s.coll.Get(ctx, d)
	if gcerrors.Code(err) == gcerrors.InvalidArgument {
		// Fields this struct lacks: look at the record as it is.
		raw := map[string]any{"key": consumerKey(id)}
		if rerr := s.coll.Get(ctx, raw); rerr == nil {
			if _, old := raw["leases"]; old {
				return &consumerDoc{Key: consumerKey(id), Config: headcfg.Config{ID: id}}, nil
			}
		}
	}
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, herr.New(herr.NotFound, "consumer %q does not exist", id)
		}
		return nil, storeErr(err)
	}
	d.unpacked()
	return d, nil
}

// getBlocks reads d's blocks at starts. A block the store does not hold
// is done (see blockDoc) and maps to nil.
func (s *Store) getBlocks(ctx context.Context, d *consumerDoc, starts []int64) (map[int64]*blockDoc, error) {
	out := make(map[int64]*blockDoc, len(starts))
	if len(starts) == 0 {
		return out, nil
	}
	acts := s.coll.Actions()
	docs := make([]*blockDoc, len(starts))
	for i, st := range starts {
		docs[i] = &blockDoc{Key: blockKey(d.ID, d.Incarnation, st)}
		acts.Get(docs[i])
	}
	if err := acts.Do(ctx); err != nil {
		var errs docstore.ActionListError
		if !errors.As(err, &errs) {
			return nil, storeErr(err)
		}
		for _, e := range errs {
			if gcerrors.Code(e.Err) != gcerrors.NotFound {
				return nil, storeErr(e.Err)
			}
			docs[e.Index] = nil
		}
	}
	for i, st := range starts {
		out[st] = docs[i]
	}
	return out, nil
}

// allStarts returns the starts of every block d indexes.
func (d *consumerDoc) allStarts() []int64 {
	out := make([]int64, len(d.Blocks))
	for i, e := range d.Blocks {
		out[i] = e.Start
	}
	return out
}

// recordStarts returns the starts of every block record d may have: the
// ones it indexes and the settled ones it keeps (see RememberAcks).
func (d *consumerDoc) recordStarts() []int64 {
	out := d.allStarts()
	for _, k := range d.Kept {
		out = append(out, k.Start)
	}
	return out
}

// sessionLive returns the liveness test of d's sessions at nowMs (d's
// sessions pruned first).
func (d *consumerDoc) sessionLive(nowMs int64) func(string) bool {
	var live map[string]bool
	return func(key string) bool {
		if live == nil {
			live = make(map[string]bool, len(d.Sessions))
			for _, e := range d.Sessions {
				if !e.Tombstone && e.Expires > nowMs {
					live[e.Key] = true
				}
			}
		}
		return live[key]
	}
}

// write is one record of a commit: a block or head to replace, create or
// delete.
type write struct {
	doc    docstore.Document
	create bool
	delete bool
}

// commit runs ws as revision-conditional writes: one alone, several as
// one atomic group (docstore's AtomicWrites: a DynamoDB transaction, a
// Firestore commit). It reports (false, nil) when a condition failed and
// the caller should re-read and retry.
func (s *Store) commit(ctx context.Context, consumer string, ws ...write) (bool, error) {
	if len(ws) == 0 {
		return true, nil
	}
	acts := s.coll.Actions()
	if len(ws) > 1 {
		acts = acts.AtomicWrites()
	}
	for _, w := range ws {
		switch {
		case w.delete:
			acts.Delete(w.doc)
		case w.create:
			acts.Create(w.doc)
		default:
			acts.Replace(w.doc)
		}
	}
	err := acts.Do(ctx)
	if err == nil {
		return true, nil
	}
	var errs docstore.ActionListError
	code := gcerrors.Code(err)
	if errors.As(err, &errs) && len(errs) > 0 {
		code = gcerrors.Code(errs[0].Err)
		for _, e := range errs {
			if c := gcerrors.Code(e.Err); c != gcerrors.FailedPrecondition && c != gcerrors.AlreadyExists && c != gcerrors.NotFound {
				code = c
				break
			}
		}
	}
	switch code {
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists, gcerrors.NotFound:
		// A revision moved on, a block was created or deleted meanwhile:
		// re-read. A consumer deleted meanwhile shows on the re-read.
		return false, nil
	default:
		return false, storeErr(err)
	}
}

// blockWrite returns the write that saves b: a revision-conditional
// replace, also when no lease is left. A block is only deleted once a
// conditional write has emptied it (see dropIfEmpty): a conditional delete
// of a record someone else deleted meanwhile succeeds on some backends
// (memdocstore), and would let a stale writer believe it settled a lease
// that another settled first.
func blockWrite(b *blockDoc) write {
	return write{doc: b}
}

// dropIfEmpty deletes block b and its payload once b, as just written,
// holds no lease: nobody can change an empty block any more, so the
// deletes are unconditional and best effort (a block left behind reads as
// empty, which is done; a payload left behind is unreachable). A block
// that remembers acknowledgements is kept (blockDoc.kept): only its
// payload goes, and the head write that forgets it deletes the record
// (forgetBlocks).
func (s *Store) dropIfEmpty(ctx context.Context, d *consumerDoc, b *blockDoc) {
	if b == nil || len(b.Leases) > 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if b.kept() {
		s.deletePayload(ctx, d.ID, b.Payload)
		return
	}
	acts := s.coll.Actions()
	acts.Delete(&blockDoc{Key: b.Key})
	acts.Delete(&payloadDoc{Key: payloadKey(d.ID, b.Payload)})
	_ = acts.Do(ctx)
}

// forgetBlocks deletes the records of d's kept blocks at starts, which a
// head write has just dropped from d's kept list; best effort: a record
// left behind only answers a repeated acknowledgement for longer.
func (s *Store) forgetBlocks(ctx context.Context, d *consumerDoc, starts []int64) {
	if len(starts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), custodyTimeout)
	defer cancel()
	acts := s.coll.Actions()
	for _, st := range starts {
		acts.Delete(&blockDoc{Key: blockKey(d.ID, d.Incarnation, st)})
	}
	_ = acts.Do(ctx)
}

// notes remembers, per consumer incarnation, what this Store learned about
// blocks without writing the head (an acknowledgement that settled a
// block, a read that found one gone): the held count it saw, and for a
// settled block whether its record is kept (blockDoc.kept). The next head
// write of the Store (a reservation, a sweep) applies them, so the head's
// hints stay tight without a head write per acknowledgement. Losing notes
// (a restart) only leaves hints looser until the next sweep, which reads
// the blocks.
type notes struct {
	mu sync.Mutex
	m  map[string]map[int64]note // consumer key + incarnation → block start → what was seen
	// cursors is the highest cursor this Store has computed per consumer
	// incarnation; the cursor never moves backward, so it is a floor.
	cursors map[string]int64
}

// note is what a Store saw of one block: at most Held unsettled events,
// and, once none is left, whether the block's record is Kept.
type note struct {
	Held int64
	Kept bool
}

func noteKey(d *consumerDoc) string { return d.ID + "\x00" + d.Incarnation }

// note records that block start holds at most held unsettled events (0 for
// a block that is gone).
func (n *notes) note(d *consumerDoc, start, held int64) {
	n.add(d, start, note{Held: held})
}

// noteBlock records block b as just read or written.
func (n *notes) noteBlock(d *consumerDoc, b *blockDoc) {
	n.add(d, b.Start, note{Held: b.unsettled(), Kept: b.kept()})
}

func (n *notes) add(d *consumerDoc, start int64, nt note) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]map[int64]note{}
	}
	k := noteKey(d)
	m := n.m[k]
	if m == nil {
		if len(n.m) > 10_000 {
			clear(n.m) // bound the memory of a Store that sees many consumers
		}
		m = map[int64]note{}
		n.m[k] = m
	}
	if old, ok := m[start]; !ok || nt.Held < old.Held {
		m[start] = nt
	} else if nt.Held == old.Held && nt.Kept {
		m[start] = nt
	}
}

// take returns and forgets the notes of d.
func (n *notes) take(d *consumerDoc) map[int64]note {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := noteKey(d)
	m := n.m[k]
	delete(n.m, k)
	return m
}

// giveBack returns notes that a failed head write did not apply.
func (n *notes) giveBack(d *consumerDoc, m map[int64]note) {
	for st, nt := range m {
		n.add(d, st, nt)
	}
}

// done returns the blocks of d this Store has seen emptied (a note of
// held 0), or nil.
func (n *notes) done(d *consumerDoc) map[int64]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out map[int64]bool
	for st, nt := range n.m[noteKey(d)] {
		if nt.Held == 0 {
			if out == nil {
				out = map[int64]bool{}
			}
			out[st] = true
		}
	}
	return out
}

func (n *notes) cursorFloor(d *consumerDoc) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cursors[noteKey(d)]
}

func (n *notes) raiseCursor(d *consumerDoc, c int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cursors == nil {
		n.cursors = map[string]int64{}
	}
	if len(n.cursors) > 10_000 {
		clear(n.cursors)
	}
	k := noteKey(d)
	n.cursors[k] = max(n.cursors[k], c)
}

// refresh is what one operation read of blocks, to tighten the head's
// hints at its next write: per block start, the block as read (nil: gone)
// and the entry's stamp before the read.
type refresh struct {
	blocks map[int64]*blockDoc
	stamps map[int64]uint64
}

func newRefresh(d *consumerDoc, blocks map[int64]*blockDoc) *refresh {
	r := &refresh{blocks: blocks, stamps: make(map[int64]uint64, len(blocks))}
	for st := range blocks {
		if i := d.Blocks.find(st); i >= 0 {
			r.stamps[st] = d.Blocks[i].Stamp
		}
	}
	return r
}

// apply tightens the hints of d (about to be written) with what r read and
// the Store's notes nt, and drops entries of blocks that are done, listing
// in d.Kept those whose records are kept (see RememberAcks). Entries whose
// stamp moved since r's read keep their hints. It also raises d's cursor
// floor over the leading done entries.
func (d *consumerDoc) apply(r *refresh, nt map[int64]note, nowMs int64, rd redelivery) {
	live := d.sessionLive(nowMs)
	until := nowMs + RememberAcks.Milliseconds()
	open := d.Blocks[:0]
	for _, e := range d.Blocks {
		if r != nil {
			if b, ok := r.blocks[e.Start]; ok && r.stamps[e.Start] == e.Stamp {
				if b == nil {
					continue // gone: done
				}
				e.Held, e.Until, e.Holder = b.hints(nowMs, live, rd)
				if b.unsettled() == 0 {
					if b.kept() {
						d.keep(e.Start, until)
					}
					continue
				}
			}
		}
		if n, ok := nt[e.Start]; ok && n.Held < e.Held {
			e.Held = n.Held
		}
		if e.Held == 0 {
			// Every position settled: done.
			if n, ok := nt[e.Start]; ok && n.Kept {
				d.keep(e.Start, until)
			}
			continue
		}
		open = append(open, e)
	}
	d.Blocks = open
	floor := d.Next - 1
	if len(d.Blocks) > 0 {
		floor = d.Blocks[0].Start - 1
	}
	d.Committed = max(d.Committed, floor)
}

// lower records in d that block start may have a lease reclaimable now
// (its Until drops to 0 and its stamp moves), so pulls read it.
func (d *consumerDoc) lower(start int64) bool {
	return d.lowerTo(start, 0)
}

// lowerTo records in d that block start may have a lease reclaimable from
// until (Unix ms) on: its Until drops to until if it is later, and its
// stamp moves, so that a refresh computed from an older read of the block
// is not applied. Lowering to 0 also forgets the holder (pulls read the
// block whoever they are); a later until keeps it, as nothing in the block
// is reclaimable before it.
func (d *consumerDoc) lowerTo(start, until int64) bool {
	i := d.Blocks.find(start)
	if i < 0 {
		return false
	}
	e := &d.Blocks[i]
	e.Until = min(e.Until, until)
	if e.Until <= 0 {
		e.Until, e.Holder = 0, 0
	}
	e.Stamp++
	return true
}

// lowerHints lowers the hints of blocks starts in consumer's head (see
// lower), retrying lost races. A head written by someone else in between
// keeps its other changes.
func (s *Store) lowerHints(ctx context.Context, consumer string, starts ...int64) error {
	if len(starts) == 0 {
		return nil
	}
	to := make(map[int64]int64, len(starts))
	for _, st := range starts {
		to[st] = 0
	}
	return s.lowerHintsTo(ctx, consumer, to)
}

// lowerHintsTo lowers the hints of the blocks in to (start → until, Unix
// ms) in consumer's head (see lowerTo), as lowerHints.
func (s *Store) lowerHintsTo(ctx context.Context, consumer string, to map[int64]int64) error {
	if len(to) == 0 {
		return nil
	}
	if err := faults.Check(faults.HintLower, consumer); err != nil {
		return err
	}
	return s.retry(ctx, func() (bool, error) {
		d, err := s.get(ctx, consumer)
		if err != nil {
			if herr.CodeOf(err) == herr.NotFound {
				return true, nil
			}
			return false, err
		}
		changed := false
		for st, until := range to {
			if d.lowerTo(st, until) {
				changed = true
			}
		}
		if !changed {
			return true, nil
		}
		return s.commit(ctx, consumer, write{doc: d})
	})
}

// cursor returns d's committed cursor: the highest position p such that
// every position ≤ p is settled. It walks d's index from the floor (the
// head's and this Store's), reading blocks not in known; a block not held
// is done. It reads one block in the common case and none when the
// lowest open block is in known.
func (s *Store) cursor(ctx context.Context, d *consumerDoc, known map[int64]*blockDoc) (int64, error) {
	c := max(d.Committed, s.notes.cursorFloor(d))
	nt := s.notes.done(d)
	for _, e := range d.Blocks {
		if e.Start+e.Count-1 <= c {
			continue
		}
		if nt[e.Start] {
			c = e.Start + e.Count - 1
			continue
		}
		b, ok := known[e.Start]
		if !ok {
			bs, err := s.getBlocks(ctx, d, []int64{e.Start})
			if err != nil {
				return 0, err
			}
			b = bs[e.Start]
			if b == nil {
				s.notes.note(d, e.Start, 0)
			} else if len(b.Leases) == 0 {
				s.notes.noteBlock(d, b)
			}
		}
		if b == nil || len(b.Leases) == 0 {
			c = e.Start + e.Count - 1
			continue
		}
		c = max(c, b.firstUnsettled()-1)
		s.notes.raiseCursor(d, c)
		return c, nil
	}
	c = max(c, d.Next-1)
	s.notes.raiseCursor(d, c)
	return c, nil
}

// sortedStarts returns the keys of m in order.
func sortedStarts(m map[int64]*blockDoc) []int64 {
	out := make([]int64, 0, len(m))
	for st := range m {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
