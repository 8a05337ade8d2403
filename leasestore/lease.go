package leasestore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
)

// Source is the broker side of a pull: where new work comes from.
type Source interface {
	// Receive returns up to max events in delivery order. They stay out of
	// circulation until Settle.
	Receive(ctx context.Context, max int) ([]Incoming, error)
	// Settle acks the first taken events (custody passed to a lease) and
	// nacks the rest, making them available again at once.
	Settle(ctx context.Context, in []Incoming, taken int) error
}

// Incoming is one received event: its encoded body and the source's handle.
type Incoming struct {
	Body   []byte
	Handle any
	// PublishedAt is when the event was published, if the source knows
	// (zero otherwise). Only PullEvents on a consumer with a MessageTTL
	// uses it, to age the event; when it is zero the event's CloudEvents
	// "publishedat" attribute is read from Body instead (one JSON scan of
	// the body), and an event with neither never expires.
	PublishedAt time.Time
}

// PullParams are the arguments of Pull (seed 000 "Pull a batch") and of
// PullEvents.
type PullParams struct {
	Consumer string
	// Worker identifies the puller: for Pull a worker id ("" is the shared
	// identity); for PullEvents the id of an attached session.
	Worker     string
	Limit      int           // events; 1–100 for Pull, checked by the caller
	Visibility time.Duration // 1–600 s for Pull, checked by the caller
	Source     Source
}

// Lease is a leased batch. Events[i] has position Start+i.
type Lease struct {
	ID         string
	Generation int64
	// Attempt is the lifetime delivery count of the lease's events, this
	// delivery included (1 on the first delivery).
	Attempt   int64
	Start     int64
	Events    [][]byte
	ExpiresAt time.Time
}

// WindowFullError is returned by Pull when MaxInFlight events are leased and
// unacknowledged. Its code is herr.ResourceExhausted.
type WindowFullError struct {
	InFlight   int64
	RetryAfter time.Duration // until the earliest live lease expires (at least 1 s)
	// Committed is the consumer's cursor (0 = nothing committed) and
	// Dispatched the last position handed out, so the gap between them is
	// what holds the window (the durable-consumer API's 429 body).
	Committed  int64
	Dispatched int64
}

func (e *WindowFullError) Error() string {
	return fmt.Sprintf("%d events are leased and unacknowledged; the in-flight window of %d is full: acknowledge leases to free it", e.InFlight, MaxInFlight)
}

// Unwrap lets herr.CodeOf see ResourceExhausted.
func (e *WindowFullError) Unwrap() error {
	return &herr.Error{Code: herr.ResourceExhausted, Message: e.Error()}
}

// Pull leases the next batch to p.Worker, following seed 000:
//
//  1. the worker's live lease, if it holds one, unchanged;
//  2. else the oldest expired or failed lease, with generation and attempt
//     one higher; a lease larger than p.Limit is split, and only its first
//     p.Limit events are handed out (they keep the lease id), while the rest
//     stays waiting for redelivery under a new lease id;
//  3. else, if MaxInFlight events are in flight, a *WindowFullError;
//  4. else up to p.Limit new events from p.Source in a new lease.
//
// A failed or expired lease whose redelivery would pass
// Options.DeliveryLimit is not handed out: its events go to the
// dead-letter queue (ReasonDeliveryLimit), the cursor moves past them, and
// the pull goes on to the next lease or to new work.
//
// It returns (nil, nil) when the consumer is caught up.
func (s *Store) Pull(ctx context.Context, p PullParams) (*Lease, error) {
	var (
		received []Incoming // custody held by this call until settled
		taken    int        // how many of received the payload holds
		leaseID  string
		out      *Lease
		dying    *consumerDoc // the written record, when it marked leases dying
		finished bool         // whether this call already finished dying leases it found
	)
	// release hands back whatever this call holds if it does not end with
	// a new lease: after an error, and also after a lost race whose retry
	// found the worker's own live lease or a lease to reclaim, which is
	// returned instead of the received events.
	release := func() {
		if len(received) == 0 {
			return
		}
		bg := context.WithoutCancel(ctx)
		if leaseID != "" {
			switch n := s.payloadWritten(bg, p.Consumer, leaseID); {
			case n > 0:
				// An ambiguous failure (say a timeout after the server
				// applied the write) did create the lease: custody has
				// passed after all.
				_ = p.Source.Settle(bg, received, min(n, taken))
				received = nil
				return
			case n == 0:
				_ = s.coll.Delete(bg, &payloadDoc{Key: payloadKey(p.Consumer, leaseID)})
			default:
				// Keep the payload: an orphan is harmless, while a lease
				// whose payload is gone could never be delivered.
			}
		}
		_ = p.Source.Settle(bg, received, 0)
		received = nil
	}

	err := s.retry(ctx, func() (bool, error) {
		out, dying = nil, nil
		d, err := s.get(ctx, p.Consumer)
		if err != nil {
			return false, err
		}
		runTestHook(hookPullRead, p.Consumer)
		if d.Paused {
			return false, herr.New(herr.FailedPrecondition, "consumer %q is paused", p.Consumer)
		}
		now := s.opts.Now()
		nowMs := now.UnixMilli()
		expires := now.Add(p.Visibility)
		worker := workerKey(p.Worker)
		d.pruneSessions(nowMs)
		if !finished && d.hasDying() {
			// A dead-lettering was interrupted (see finishDying): finish
			// it first, then read again. Should it fail again, the pull
			// goes on without those leases, which nobody is handed.
			finished = true
			_ = s.finishDying(ctx, d)
			return false, nil
		}

		// 1. The worker's own live lease comes back unchanged.
		for i := range d.Leases {
			if l := &d.Leases[i]; l.Worker == worker && l.live(nowMs) {
				out, err = s.load(ctx, d.ID, l)
				if errors.Is(err, errPayloadGone) {
					// The worker acknowledged the lease since the read
					// (its payload goes once it is committed): re-read.
					return false, nil
				}
				return err == nil, err
			}
		}
		// 2. Expired and failed leases go before new work, except those
		// past the delivery limit, which are dead-lettered.
		marked := false
		for _, i := range d.reclaimOrder(nowMs) {
			l := &d.Leases[i]
			if l.Attempt >= int64(s.opts.DeliveryLimit) {
				d.markDying(i, ReasonDeliveryLimit, nowMs)
				marked = true
				continue
			}
			// Read the events before taking the lease. Reading after the
			// write could find them gone: a puller delayed past the new
			// visibility timeout sees its generation reclaimed by another
			// worker, committed, and its payload deleted in between.
			if l.Count > int64(p.Limit) {
				d.split(i, int64(p.Limit), uuid.NewString())
				l = &d.Leases[i]
			}
			got, err := s.load(ctx, d.ID, l)
			if errors.Is(err, errPayloadGone) {
				return false, nil // committed since the read: re-read
			}
			if err != nil {
				return false, err
			}
			l.Worker, l.Requeued, l.Session = worker, false, false
			l.Generation++
			l.Attempt++
			l.Expires = expires.UnixMilli()
			ok, err := s.write(ctx, s.coll.Replace, d)
			if !ok || err != nil {
				return false, err
			}
			runTestHook(hookPullReclaimed, p.Consumer)
			got.Generation, got.Attempt, got.ExpiresAt = l.Generation, l.Attempt, time.UnixMilli(l.Expires)
			out = got
			if marked {
				dying = d
			}
			return true, nil
		}
		// 3. The in-flight window (leases being dead-lettered are leaving
		// it).
		inFlight := d.holding()
		room := MaxInFlight - inFlight
		if room <= 0 {
			if marked {
				// Record the dead-lettering; the window stays full.
				if ok, err := s.write(ctx, s.coll.Replace, d); !ok || err != nil {
					return false, err
				}
				dying = d
			}
			retryAfter := time.Second
			if e := d.earliestExpiry(nowMs); e > 0 {
				retryAfter = max(retryAfter, time.Duration(e-nowMs)*time.Millisecond)
			}
			return false, &WindowFullError{InFlight: inFlight, RetryAfter: retryAfter, Committed: d.Committed, Dispatched: max(d.Next-1, 0)}
		}
		// 4. New work. Received events survive a lost race: the next try
		// writes them at the consumer's new next position.
		if received == nil {
			received, err = p.Source.Receive(ctx, int(min(int64(p.Limit), room)))
			if err != nil {
				return false, err
			}
			if len(received) == 0 {
				received = nil
				if !marked {
					return true, nil // caught up
				}
				ok, err := s.write(ctx, s.coll.Replace, d)
				if ok && err == nil {
					dying = d
				}
				return ok, err
			}
		}
		n := min(s.fit(received), int(room))
		if n != taken {
			if leaseID == "" {
				leaseID = uuid.NewString()
			}
			pd := &payloadDoc{Key: payloadKey(d.ID, leaseID), Kind: kindPayload, Consumer: d.ID, Events: make([][]byte, n)}
			for i := range n {
				pd.Events[i] = received[i].Body
			}
			if err := s.coll.Put(ctx, pd); err != nil {
				return false, storeErr(err)
			}
			taken = n
		}
		l := leaseRec{
			ID: leaseID, Start: d.Next, Count: int64(n), Worker: worker,
			Attempt: 1, Expires: expires.UnixMilli(),
		}
		d.Next += int64(n)
		d.Leases = append(d.Leases, l)
		ok, err := s.write(ctx, s.coll.Replace, d)
		if !ok || err != nil {
			return false, err
		}
		if marked {
			dying = d
		}
		events := make([][]byte, n)
		for i := range n {
			events[i] = received[i].Body
		}
		out = &Lease{ID: l.ID, Generation: 0, Attempt: 1, Start: l.Start, Events: events, ExpiresAt: time.UnixMilli(l.Expires)}
		// Custody has passed to the lease: only now ack at the broker.
		if err := p.Source.Settle(ctx, received, n); err != nil {
			// The lease is written; an unacked message comes back as a
			// duplicate after its ack deadline, which at-least-once allows.
			_ = err
		}
		received = nil
		return true, nil
	})
	release() // a no-op when the received events went into a lease
	if dying != nil {
		// Best effort: leases left dying are finished by the next pull or
		// ExpireLeases; nobody is handed them meanwhile.
		_ = s.finishDying(ctx, dying)
	}
	return out, err
}

// fit returns how many of in, from the front, fit in one payload record
// (at least one).
func (s *Store) fit(in []Incoming) int {
	total := 0
	for i, e := range in {
		total += len(e.Body) + 16 // per-element overhead of the stored list
		if total > s.opts.MaxPayloadBytes && i > 0 {
			return i
		}
	}
	return len(in)
}

// errPayloadGone is load's error for a payload record that does not exist.
var errPayloadGone = herr.New(herr.Aborted, "the lease was settled meanwhile; retry")

// Test hooks: points in Pull where tests run code to race it.
const (
	hookPullRead      = "pull-read"      // right after each read of the consumer record
	hookPullReclaimed = "pull-reclaimed" // right after a reclaim is written
)

// testHook, when set, runs at each hook point with the point and the
// consumer id. Production code never sets it.
var testHook atomic.Pointer[func(point, consumer string)]

func runTestHook(point, consumer string) {
	if h := testHook.Load(); h != nil {
		(*h)(point, consumer)
	}
}

// payloadWritten returns how many events of consumer's leases refer to
// payload id: 0 when none (or the consumer is gone), -1 when the consumer
// cannot be read. A write that created leases over the payload's first n
// events leaves at most n (fewer once some are committed), so acking that
// many at the broker never acks an event no lease holds.
func (s *Store) payloadWritten(ctx context.Context, consumer, id string) int {
	d, err := s.get(ctx, consumer)
	switch {
	case herr.CodeOf(err) == herr.NotFound:
		return 0
	case err != nil:
		return -1
	}
	n := 0
	for i := range d.Leases {
		if d.Leases[i].payloadID() == id {
			n += int(d.Leases[i].Count)
		}
	}
	return n
}

// getPayload reads consumer's payload record id; errPayloadGone when it
// does not exist.
func (s *Store) getPayload(ctx context.Context, consumer, id string) (*payloadDoc, error) {
	pd := &payloadDoc{Key: payloadKey(consumer, id)}
	if err := s.coll.Get(ctx, pd); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, errPayloadGone
		}
		return nil, storeErr(err)
	}
	return pd, nil
}

// events returns l's events from its payload record pd.
func (pd *payloadDoc) events(l *leaseRec) ([][]byte, error) {
	if l.Offset < 0 || l.Offset+l.Count > int64(len(pd.Events)) {
		return nil, herr.New(herr.Internal, "lease %s refers to events %d–%d of a payload of %d", l.ID, l.Offset, l.Offset+l.Count-1, len(pd.Events))
	}
	return pd.Events[l.Offset : l.Offset+l.Count : l.Offset+l.Count], nil
}

func (s *Store) load(ctx context.Context, consumer string, l *leaseRec) (*Lease, error) {
	pd, err := s.getPayload(ctx, consumer, l.payloadID())
	if err != nil {
		return nil, err
	}
	events, err := pd.events(l)
	if err != nil {
		return nil, err
	}
	return &Lease{
		ID: l.ID, Generation: l.Generation, Attempt: l.Attempt, Start: l.Start,
		Events: events, ExpiresAt: time.UnixMilli(l.Expires),
	}, nil
}

// AckStatus is what a worker reports for a lease.
type AckStatus string

// Acknowledge statuses (seed 000, "Acknowledge a batch").
const (
	StatusOK     AckStatus = "ok"
	StatusFailed AckStatus = "failed"
)

// Outcome is the result of an acknowledgement.
type Outcome string

// Outcomes (seed 000, "Acknowledge a batch").
const (
	OutcomeCommitted Outcome = "committed"
	OutcomeRequeued  Outcome = "requeued"
	OutcomeStale     Outcome = "stale"
)

// AckParams are the arguments of Acknowledge.
type AckParams struct {
	Consumer   string
	LeaseID    string
	Generation int64
	Status     AckStatus
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
}

// Acknowledge settles a lease:
//
//   - ok for the lease's current generation commits it (even after it
//     expired, as long as nobody has been given it since) and advances the
//     cursor over the contiguous run of acknowledged leases;
//   - failed for the current generation requeues it ahead of new work; a
//     failed that arrives again reads requeued again;
//   - anything for an older generation, or for a lease already committed
//     or being dead-lettered, is stale and changes nothing.
//
// Acknowledging is allowed while the consumer is paused.
func (s *Store) Acknowledge(ctx context.Context, p AckParams) (*AckResult, error) {
	if p.Status != StatusOK && p.Status != StatusFailed {
		return nil, herr.New(herr.InvalidArgument, "status must be ok or failed")
	}
	var res *AckResult
	var freed []string
	err := s.retry(ctx, func() (bool, error) {
		freed = nil
		d, err := s.get(ctx, p.Consumer)
		if err != nil {
			return false, err
		}
		if p.Type != "" && d.Type != p.Type {
			return false, herr.New(herr.Malformed, "the event destination is of type %s; pull and acknowledge are only supported for durable consumer destinations (type %s)", d.Type, p.Type)
		}
		d.pruneSessions(s.nowMs())
		i := d.lease(p.LeaseID)
		if i < 0 || d.Leases[i].Generation != p.Generation || d.Leases[i].Dying != "" {
			res = &AckResult{Outcome: OutcomeStale, Committed: d.Committed}
			return true, nil
		}
		l := &d.Leases[i]
		switch p.Status {
		case StatusOK:
			pid := l.payloadID()
			d.commit(i)
			freed = d.unreferenced([]string{pid})
			res = &AckResult{Outcome: OutcomeCommitted, Committed: d.Committed}
		case StatusFailed:
			res = &AckResult{Outcome: OutcomeRequeued, Committed: d.Committed}
			if l.Requeued {
				return true, nil
			}
			l.Requeued, l.Worker = true, ""
		}
		return s.write(ctx, s.coll.Replace, d)
	})
	if err != nil {
		return nil, err
	}
	// Best effort: an orphaned payload is unreachable and harmless.
	s.deletePayloads(ctx, p.Consumer, freed)
	return res, nil
}
