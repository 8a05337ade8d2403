package delivery

import (
	"context"
	"errors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// A queue's maximum length counts the broker's backlog (the notifications
// API: a queue that reaches its configured maximum length evicts its
// oldest messages to the dead-letter queue, REASON_MAXLEN). Herald takes
// the backlog of such a queue into the lease store, where the oldest
// events past the maximum are dead-lettered (leasestore.Store.Intake),
// whenever no session is pulling it: the reap-idle-queues job does it for
// every queue with a maximum length and no attached session, and a
// stream does it once when it attaches, before its first pull. While a
// session is attached its pulls take new events in under the same rule.
const (
	// intakeBatch is how many events one intake round receives: as many
	// as one pull takes, so that a round holds at most that much in memory.
	intakeBatch = MaxPullLimit
	// jobIntakeRounds bounds the rounds the reap-idle-queues job spends on
	// one queue per run (10,000 events); the next run goes on.
	jobIntakeRounds = 100
	// attachIntakeRounds bounds the rounds a stream spends on its queue's
	// backlog before its first pull (1,000 events), so that opening a
	// stream on a huge backlog stays quick; the job takes in the rest.
	attachIntakeRounds = 10
)

// IntakeTotals is what taking in queues' broker backlogs did.
type IntakeTotals struct {
	// Queues counts the queues whose backlog was looked at.
	Queues int
	// TakenIn counts the events moved from the broker into queues.
	TakenIn int
	// Evicted counts the events dead-lettered with reason MAXLEN.
	Evicted int
	// Failed counts the queues whose backlog could not be taken in
	// (logged); the next run tries again.
	Failed int
}

// takeInBacklog takes the broker backlog of queue c (which has a
// MaxLength) into the store, at most rounds rounds of intakeBatch events,
// stopping early once the broker has no more ready.
func (s *Service) takeInBacklog(ctx context.Context, c *leasestore.Consumer, rounds int) (IntakeTotals, error) {
	tot := IntakeTotals{Queues: 1}
	src := &streamSource{svc: s, queue: c.ID, sub: c.Subscription, groups: c.Filters}
	for range rounds {
		r, err := s.cfg.Store.Intake(ctx, leasestore.IntakeParams{Consumer: c.ID, Source: src, Max: intakeBatch})
		tot.TakenIn += r.TakenIn
		tot.Evicted += r.Evicted
		if err != nil {
			return tot, err
		}
		if r.Received < intakeBatch {
			break
		}
	}
	return tot, nil
}

// intakeKind is the stream kind a consumer type is logged as.
func intakeKind(typ string) StreamKind {
	if typ == leasestore.TypeNonDurableQueue {
		return NonDurable
	}
	return Durable
}

// takeInIdleBacklogs runs takeInBacklog for every consumer of cs that has
// a maximum length and no attached session, skipping those in skip (just
// reaped). A consumer deleted meanwhile is skipped; other failures are
// logged, counted and joined into the error.
func (s *Service) takeInIdleBacklogs(ctx context.Context, cs []*leasestore.Consumer, skip map[string]bool) (IntakeTotals, error) {
	var (
		tot  IntakeTotals
		errs []error
	)
	for _, c := range cs {
		if c.MaxLength <= 0 || c.LiveSessions > 0 || c.Paused || skip[c.ID] || c.Subscription == "" {
			continue
		}
		r, err := s.takeInBacklog(ctx, c, jobIntakeRounds)
		tot.Queues++
		tot.TakenIn += r.TakenIn
		tot.Evicted += r.Evicted
		switch {
		case err == nil:
		case herr.CodeOf(err) == herr.NotFound:
			// Deleted (or its subscription gone) since the listing.
		case ctx.Err() != nil:
			return tot, errors.Join(append(errs, ctx.Err())...)
		default:
			tot.Failed++
			kind := intakeKind(c.Type)
			s.cfg.Logger.WarnContext(ctx, "taking in a queue's broker backlog failed; the next run tries again", queueAttr(kind, c.ID), errAttr(kind, c.ID, err))
			errs = append(errs, err)
		}
	}
	if tot.Failed > 0 {
		return tot, herr.Wrap(herr.Unavailable, errors.Join(errs...), "could not take in the broker backlog of some queues with a maximum length; retry")
	}
	return tot, nil
}

// takeInOnAttach takes in the backlog of the queue a stream just attached
// to, if it has a maximum length, so that the stream's first delivery is
// the oldest event the rule keeps. A failure is logged, not returned: the
// stream's pulls meet the same broker and report its errors.
func (s *Service) takeInOnAttach(ctx context.Context, c *leasestore.Consumer) {
	if c.MaxLength <= 0 || c.Subscription == "" { // a hub queue has no backlog of its own
		return
	}
	if _, err := s.takeInBacklog(ctx, c, attachIntakeRounds); err != nil && ctx.Err() == nil {
		kind := intakeKind(c.Type)
		s.cfg.Logger.WarnContext(ctx, "taking in the queue's broker backlog failed before the stream's first pull", queueAttr(kind, c.ID), errAttr(kind, c.ID, err))
	}
}
