package leasestore

import (
	"context"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// ExtendParams are the arguments of Extend.
type ExtendParams struct {
	Consumer   string
	LeaseID    string
	Generation int64
	// Visibility is the new visibility timeout, counted from now (1–600 s
	// for the durable-consumer API, checked by the caller; at least 1 ms).
	Visibility time.Duration
	// Type, when set, is the consumer type the caller expects, as in
	// AckParams.
	Type string
}

// ExtendResult is what Extend did.
type ExtendResult struct {
	// Outcome is OutcomeExtended or OutcomeStale.
	Outcome Outcome
	// ExpiresAt is the lease's new expiry (millisecond precision); zero
	// when stale.
	ExpiresAt time.Time
}

// Extend moves the expiry of a lease its holder still has to now plus
// p.Visibility (SQS's ChangeMessageVisibility, Pub/Sub's
// ModifyAckDeadline), so that a slow worker keeps its lease. The new
// expiry may be earlier than the old one (a worker that wants the lease
// to come back sooner). It works on the lease's current generation while
// nobody has been handed it since, even after its visibility passed (as
// an "ok" would commit it then); a lease that was acknowledged, failed,
// rejected, dead-lettered, swept by ExpireLeases or handed to someone
// else is OutcomeStale and changes nothing.
//
// A lease's life from its hand-out to its expiry is capped at
// MaxLeaseLife: an extension past that is herr.OutOfRange and changes
// nothing (extending to the cap exactly is allowed). Life is counted in
// whole seconds, so the new expiry is rounded up to a whole second after
// the hand-out (at most 999 ms later than asked).
//
// Extending is allowed while the consumer is paused. It reads the head
// and the one block the lease id names and writes only that block: a
// later expiry keeps the head's hints valid.
func (s *Store) Extend(ctx context.Context, p ExtendParams) (*ExtendResult, error) {
	ctx, op := telemetry.StartStore(ctx, "extend")
	res, err := s.extend(ctx, p)
	op.End(ctx, err)
	return res, err
}

func (s *Store) extend(ctx context.Context, p ExtendParams) (*ExtendResult, error) {
	if p.Visibility < time.Millisecond {
		return nil, herr.New(herr.OutOfRange, "visibility must be positive")
	}
	d, err := s.get(ctx, p.Consumer)
	if err != nil {
		return nil, err
	}
	if p.Type != "" && d.Type != p.Type {
		return nil, herr.New(herr.Malformed, "the event destination is of type %s; extend is only supported for durable consumer destinations (type %s)", d.Type, p.Type)
	}
	res := &ExtendResult{Outcome: OutcomeStale}
	bst, lst, tag, ok := parseLeaseID(p.LeaseID)
	if !ok {
		return res, nil
	}
	var shorter int64 // when the new expiry is earlier than the old one: the new one
	err = s.retry(ctx, func() (bool, error) {
		res.Outcome, res.ExpiresAt, shorter = OutcomeStale, time.Time{}, 0
		bs, err := s.getBlocks(ctx, d, []int64{bst})
		if err != nil {
			return false, err
		}
		b := bs[bst]
		if b == nil {
			return true, nil
		}
		i := b.lease(lst, tag)
		if i < 0 {
			return true, nil
		}
		l := &b.Leases[i]
		if l.Generation != p.Generation || l.Dying != "" || l.Requeued || l.Delayed || l.Worker == "" {
			return true, nil
		}
		nowMs := s.nowMs()
		if l.Session && !d.sessionLive(nowMs)(l.Worker) {
			return true, nil // its session left: the lease is anybody's
		}
		life := l.Life
		if life <= 0 {
			life = int64(MaxLeaseVisibility / time.Second) // written before Extend existed
		}
		handedOut := l.Expires - life*1000
		want := nowMs + p.Visibility.Milliseconds()
		newLife := lifeSecs(handedOut, want)
		if newLife > int64(MaxLeaseLife/time.Second) {
			return false, herr.New(herr.OutOfRange, "a lease can be kept at most %d hours after it was handed out (%s): acknowledge it, or let it go and pull again",
				int(MaxLeaseLife/time.Hour), time.UnixMilli(handedOut).UTC().Format(time.RFC3339))
		}
		newExpires := handedOut + newLife*1000
		if newExpires < l.Expires {
			shorter = newExpires
		}
		l.Expires, l.Life = newExpires, newLife
		res.Outcome, res.ExpiresAt = OutcomeExtended, time.UnixMilli(newExpires)
		return s.commit(ctx, d.ID, blockWrite(b))
	})
	if err != nil {
		return nil, err
	}
	if shorter > 0 {
		// The head's hint may be later than the new expiry.
		if err := s.lowerHintsTo(ctx, d.ID, map[int64]int64{bst: shorter}); err != nil {
			return nil, err
		}
	}
	return res, nil
}
