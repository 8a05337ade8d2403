package leasestore

import (
	"context"
	"sync"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// Per-event keys (docs/api.md, "Idempotency keys"): a batch whose events
// carry keys of their own is one record per keyed event, each claimed,
// completed and released as a keyed publish of one event is, so a key
// used on an event of a batch and then on a single publish (or in another
// batch) is the same key. The events claimed now go to the broker
// together, with the batch's unkeyed events, in one Publish call: the
// broker still sees one batch.
//
// The crash points are PublishOnce's, per key: faults.KeyPublish after
// every claim and before the publish (nothing is published), and
// faults.KeyComplete after the publish and before the results are
// recorded; each ends as it does for PublishOnce (see "Crash points" in
// idempotency.go): a repeat of a key takes it over after its hold and
// publishes that key's first plan.
//
// Cost: per keyed event what a keyed publish of one event costs (two
// conditional writes when its key is new, one read for a repeat); at most
// eachParallel of them are in flight at once.

// eachParallel bounds the store calls PublishEach has in flight at once:
// a batch of 1,000 keyed events takes 1,000 claims, and one at a time
// would add a thousand round trips to its latency.
const eachParallel = 16

// KeyedEvents is a batch publish whose events carry idempotency keys of
// their own, for PublishEach.
type KeyedEvents struct {
	// Keys holds one request per keyed event, each with its own key,
	// fingerprint and plan, all of one principal; no key twice
	// (InvalidArgument).
	Keys []KeyRequest
	// Wait is how long a key another publish holds is waited for before
	// that key fails with *KeyBusyError (KeyedPublish.Wait).
	Wait time.Duration
	// Publish sends, in one call, the plans of the keys claimed now
	// (claimed holds their indexes in Keys, plans their plans: a
	// taken-over key's is its first claim's) together with whatever the
	// batch sends without a key. ctx ends at the earliest hold of those
	// claims. It returns, for each claimed key, whether its event was
	// published and the result to record (results may be nil: nothing to
	// record). It is called once, even when no key was claimed. A key
	// not published is released; an error releases every claimed key.
	Publish func(ctx context.Context, claimed []int, plans [][]byte) (results [][]byte, published []bool, err error)
}

// EachOutcome is one key's part of PublishEach's answer.
type EachOutcome struct {
	// KeyOutcome is as PublishOnce's: Replayed (nothing published now,
	// Plan and Result the first publish's), or published now (Result the
	// one recorded) or not (the key released), with RecordErr.
	KeyOutcome
	// Claimed says the key's event was handed to Publish now.
	Claimed bool
	// Err is why the key's event was not published: ClaimKey's error
	// (*KeyReusedError, a request outside its bounds, the store's) or
	// *KeyBusyError. The other keys go on.
	Err error
}

// PublishEach runs a batch publish whose events carry keys of their own:
// it claims every key (at most eachParallel at a time, each waiting up to
// b.Wait for a publish in progress under it), calls b.Publish once with
// the keys claimed, then records each published key's result and
// releases the keys not published. The answer holds one EachOutcome per
// key, index for index.
//
// Errors: herr.InvalidArgument for a key given twice or requests of
// several principals; Publish's (every claimed key released); a fault's
// (see the comment at the top of this file); ctx's.
func (s *Store) PublishEach(ctx context.Context, b KeyedEvents) ([]EachOutcome, error) {
	seen := make(map[string]struct{}, len(b.Keys))
	for i := range b.Keys {
		if b.Keys[i].Principal != b.Keys[0].Principal {
			return nil, herr.New(herr.InvalidArgument, "the keys of one batch must be of one principal")
		}
		if _, ok := seen[b.Keys[i].Key]; ok {
			return nil, herr.New(herr.InvalidArgument, "an idempotency key is given twice in one batch")
		}
		seen[b.Keys[i].Key] = struct{}{}
	}
	outs := make([]EachOutcome, len(b.Keys))
	claims := make([]*KeyClaim, len(b.Keys))
	parallel(len(b.Keys), func(i int) {
		c, err := s.claimWait(ctx, b.Keys[i], b.Wait)
		switch {
		case err != nil:
			outs[i].Err = err
		case c.State == KeyDone:
			outs[i].KeyOutcome = KeyOutcome{Replayed: true, Plan: c.Plan, Result: c.Result}
		default:
			claims[i] = c
		}
	})
	if err := ctx.Err(); err != nil {
		s.releaseAll(context.WithoutCancel(ctx), claims)
		return nil, err
	}
	var (
		claimed []int
		plans   [][]byte
	)
	hold := time.Time{}
	for i, c := range claims {
		if c == nil {
			continue
		}
		claimed = append(claimed, i)
		plans = append(plans, c.Plan)
		if hold.IsZero() || c.HoldUntil.Before(hold) {
			hold = c.HoldUntil
		}
		outs[i].Claimed, outs[i].TakenOver, outs[i].Plan = true, c.TakenOver, c.Plan
	}
	for _, i := range claimed {
		if err := faults.Check(faults.KeyPublish, b.Keys[i].Key); err != nil {
			return nil, err // a crash: the claims stay until their holds lapse
		}
	}
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if !hold.IsZero() {
		// As in publishClaimed: over before the first hold lapses.
		pctx, cancel = context.WithTimeout(ctx, hold.Sub(s.opts.Now()))
	}
	results, published, err := b.Publish(pctx, claimed, plans)
	cancel()
	if err == nil && (len(published) != len(claimed) || (results != nil && len(results) != len(claimed))) {
		err = herr.New(herr.Internal, "a keyed batch publish answered %d results for %d claimed keys", len(published), len(claimed))
	}
	if err != nil {
		s.releaseAll(context.WithoutCancel(ctx), claims)
		return nil, err
	}
	done := make([]*KeyClaim, len(b.Keys))
	for k, i := range claimed {
		if results != nil {
			outs[i].Result = results[k]
		}
		if published[k] {
			done[i], claims[i] = claims[i], nil
		}
	}
	s.releaseAll(context.WithoutCancel(ctx), claims)
	for i, c := range done {
		if c == nil {
			continue
		}
		if err := faults.Check(faults.KeyComplete, b.Keys[i].Key); err != nil {
			return nil, err // a crash: published, the claims stay until their holds lapse
		}
	}
	wctx := context.WithoutCancel(ctx)
	parallel(len(done), func(i int) {
		if done[i] != nil {
			outs[i].RecordErr = s.CompleteKey(wctx, done[i], outs[i].Result)
		}
	})
	return outs, nil
}

// claimWait claims r, waiting up to wait while another publish holds it:
// the claim is KeyClaimed or KeyDone, else the error is *KeyBusyError or
// ClaimKey's.
func (s *Store) claimWait(ctx context.Context, r KeyRequest, wait time.Duration) (*KeyClaim, error) {
	deadline := s.opts.Now().Add(wait)
	step := 20 * time.Millisecond
	for {
		c, err := s.ClaimKey(ctx, r)
		if err != nil {
			return nil, err
		}
		if c.State != KeyBusy {
			return c, nil
		}
		now := s.opts.Now()
		if !now.Before(deadline) {
			return nil, &KeyBusyError{RetryAfter: c.RetryAfter(now)}
		}
		if err := sleep(ctx, min(step, deadline.Sub(now), c.HoldUntil.Sub(now)+time.Millisecond)); err != nil {
			return nil, err
		}
		step = min(2*step, time.Second)
	}
}

// releaseAll releases the non-nil claims, best effort: a claim left
// behind is taken over after its hold, which publishes its plan (its
// event was not published, so once).
func (s *Store) releaseAll(ctx context.Context, claims []*KeyClaim) {
	parallel(len(claims), func(i int) {
		if claims[i] != nil {
			_ = s.ReleaseKey(ctx, claims[i])
		}
	})
}

// parallel runs f(0) … f(n-1), at most eachParallel at once, and
// returns when all have.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, eachParallel)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}
