package delivery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

// This file is the push run: which webhook destinations are pushed to,
// how many deliveries each has in flight (its ordering), how fast (its
// rate limit), and whether at all (its circuit breaker). The delivery
// itself, one signed POST, is webhooks.go's.

// Circuit breaker defaults (WebhookConfig.BreakerThreshold and
// BreakerCooldown).
const (
	// DefaultBreakerThreshold is how many consecutive failed attempts open
	// an endpoint's circuit breaker.
	DefaultBreakerThreshold = 5
	// DefaultBreakerCooldown is how long an open breaker lets no attempt
	// through before it lets one probe through (half-open).
	DefaultBreakerCooldown = time.Minute
)

// PushReport is what one push run did.
type PushReport struct {
	// Destinations counts the webhook destinations pushed to (not
	// paused, not disabled, their circuit breaker not open).
	Destinations int
	// Delivered counts the deliveries answered 2xx and committed; Events
	// the events they carried.
	Delivered int
	Events    int
	// Failed counts the attempts that failed (an answer other than 2xx, a
	// timeout, a refused or failed connection); their leases wait for
	// their retry.
	Failed int
	// Disabled counts the destinations disabled by a 410 Gone.
	Disabled int
	// Open counts the destinations skipped because their circuit breaker
	// was open (their events wait, no attempt counted), or opened during
	// the run.
	Open int
	// Errors counts destinations the run could not serve (the store or
	// the broker failed); the next run tries them again.
	Errors int
}

// PushWebhooks runs one push: every webhook destination that is not
// paused, disabled or behind an open circuit breaker gets its due events
// POSTed, up to WebhookConfig.Concurrency deliveries at once per
// destination (one for a destination that asks for ordering), no faster
// than its rate limit, and all destinations at once, until each is caught
// up (its next events are waiting for a retry, or there are none) or ctx
// ends. It is the job that Lambda and Cloud Run run on a schedule and
// that the local adapter runs continuously; runs in several processes
// share the work through the lease store (each delivery is a lease), and
// one that crashes leaves its leases to expire and be delivered again (at
// least once; webhook-id lets receivers drop the duplicate). With a
// positive budget no new delivery starts once budget has passed since the
// call (those under way finish), so a scheduled run ends before the next
// one starts. The caller needs run:jobs.
func (s *Service) PushWebhooks(ctx context.Context, p *auth.Principal, budget time.Duration) (*PushReport, error) {
	if err := p.Require(auth.PermRunJobs); err != nil {
		return nil, err
	}
	// The webhook records alone: listing every consumer would cost a read
	// of every non-durable queue each run (twice a second locally).
	ws, err := s.cfg.Store.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	var (
		mu  sync.Mutex
		rep PushReport
		wg  sync.WaitGroup
		// The budget is wall-clock time, whatever Config.Now says.
		until time.Time
	)
	if budget > 0 {
		until = time.Now().Add(budget)
	}
	for _, w := range ws {
		wg.Go(func() {
			c, err := s.cfg.Store.LookupConsumer(ctx, w.Consumer)
			var r PushReport
			switch {
			case herr.CodeOf(err) == herr.NotFound:
				// Being created or deleted.
			case err != nil:
				s.cfg.Logger.WarnContext(ctx, "webhook push: read failed", "destination", w.Consumer, "err", err)
				r.Errors = 1
			case c.Type != leasestore.TypeWebhook || c.Paused:
			default:
				r = s.pushDestination(ctx, c, until)
			}
			mu.Lock()
			defer mu.Unlock()
			rep.add(r)
		})
	}
	wg.Wait()
	if rep.Errors > 0 {
		return &rep, herr.New(herr.Unavailable, "the push could not serve %d webhook destinations; retry", rep.Errors)
	}
	return &rep, ctx.Err()
}

func (r *PushReport) add(o PushReport) {
	r.Destinations += o.Destinations
	r.Delivered += o.Delivered
	r.Events += o.Events
	r.Failed += o.Failed
	r.Disabled += o.Disabled
	r.Open += o.Open
	r.Errors += o.Errors
}

// push is one destination's share of a push run.
type push struct {
	s     *Service
	c     *leasestore.Consumer
	w     *leasestore.Webhook
	until time.Time
	// limit spaces the deliveries by the destination's rate limit; nil
	// without one. It is shared by the run's workers of the destination.
	limit *rate.Limiter
	// failures mirrors the stored consecutive-failure count, so that a
	// success writes only when there is a count to reset.
	failures atomic.Int64
	// halt stops every worker of the destination from taking more once
	// one finds it disabled, its breaker open, or the store failing. A
	// worker that finds it caught up stops alone: the others' deliveries
	// under way must finish, on the run's context, not be cut off.
	halt atomic.Bool
	// probing is set while the one delivery of a half-open breaker is
	// under way: its failure opens the breaker again at once.
	probing atomic.Bool
	log     *attemptLog
}

// pushDestination drains one destination with its workers: Concurrency,
// or one when it asks for ordering or its breaker lets one probe through.
func (s *Service) pushDestination(ctx context.Context, c *leasestore.Consumer, until time.Time) PushReport {
	w, err := s.cfg.Store.GetWebhook(ctx, c.ID)
	switch {
	case herr.CodeOf(err) == herr.NotFound:
		return PushReport{} // being created or deleted
	case err != nil:
		s.cfg.Logger.WarnContext(ctx, "webhook push: read failed", "destination", c.ID, "err", err)
		return PushReport{Errors: 1}
	case w.Disabled != "":
		return PushReport{}
	}
	ps := &push{s: s, c: c, w: w, until: until, log: s.newAttemptLog(c.ID)}
	defer ps.log.flush(context.WithoutCancel(ctx))
	ps.failures.Store(int64(w.Failures))
	telemetry.WebhookConsecutiveFailures(ctx, c.ID, w.Failures)
	if w.RateLimit > 0 {
		// A burst of one: the deliveries are spaced, never bunched.
		ps.limit = rate.NewLimiter(rate.Limit(w.RateLimit), 1)
	}
	rep := PushReport{Destinations: 1}
	if !w.OpenedAt.IsZero() {
		probing, err := s.claimProbe(ctx, c.ID, w.OpenedAt)
		switch {
		case err != nil:
			s.cfg.Logger.WarnContext(ctx, "webhook push: breaker read failed", "destination", c.ID, "err", err)
			return PushReport{Errors: 1}
		case !probing:
			return PushReport{Open: 1}
		}
		// Half-open: one delivery probes the endpoint. Only its success
		// lets the others through, in this run.
		ps.probing.Store(true)
		r, _ := ps.one(ctx, "herald-webhook-"+uuid.NewString())
		ps.probing.Store(false)
		rep.add(r)
		if r.Delivered == 0 {
			if r.Failed > 0 && r.Disabled == 0 {
				rep.Open = 1
			}
			return rep
		}
	}
	workers := s.cfg.Webhooks.Concurrency
	if w.Ordered {
		workers = 1
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range workers {
		worker := "herald-webhook-" + uuid.NewString()
		wg.Go(func() {
			for ctx.Err() == nil && !ps.halt.Load() && ps.inBudget() {
				r, more := ps.one(ctx, worker)
				mu.Lock()
				rep.add(r)
				mu.Unlock()
				if r.Disabled > 0 || r.Errors > 0 || r.Open > 0 {
					ps.halt.Store(true)
				}
				if !more {
					return
				}
			}
		})
	}
	wg.Wait()
	return rep
}

func (ps *push) inBudget() bool { return ps.until.IsZero() || time.Now().Before(ps.until) }

// one waits for the rate limit, takes one lease of the destination's
// events and delivers it. more is false when the destination is caught
// up or must not be pushed to now.
func (ps *push) one(ctx context.Context, worker string) (rep PushReport, more bool) {
	s, c, w := ps.s, ps.c, ps.w
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultWebhookTimeout
	}
	var token *rate.Reservation
	if ps.limit != nil {
		// The token is taken before the pull, so that a lease is not held
		// while it waits; handed back when there is nothing to deliver.
		now := s.cfg.Now()
		token = ps.limit.ReserveN(now, 1)
		wait := token.DelayFrom(now)
		if !ps.until.IsZero() && time.Now().Add(wait).After(ps.until) {
			token.CancelAt(now)
			return rep, false // the run ends before the next token
		}
		if err := s.cfg.Webhooks.Sleep(ctx, wait); err != nil {
			token.CancelAt(s.cfg.Now())
			return rep, false
		}
	}
	ordered, err := ps.mayTakeNew(ctx)
	if err != nil {
		return ps.storeFailed(ctx, "pull", err)
	}
	l, err := s.cfg.Store.Pull(ctx, leasestore.PullParams{
		Consumer: c.ID, Worker: worker, Limit: max(w.MaxBatch, 1),
		// The lease outlives the attempt, so nobody else takes it
		// while it is being delivered.
		Visibility: min(2*timeout+5*time.Second, MaxVisibility),
		SourceFor: func(ci leasestore.ConsumerIdentity) (leasestore.Source, error) {
			if ci.Type != leasestore.TypeWebhook {
				return nil, herr.New(herr.Malformed, "the event destination is not a webhook")
			}
			if !ordered {
				// An earlier delivery is in flight or waits for its
				// retry: only it may go (a due retry), nothing newer.
				return noSource{}, nil
			}
			return &brokerSource{svc: s, broker: s.cfg.Broker, sub: ci.Subscription, groups: ci.Filters, wait: s.cfg.ReceiveWait}, nil
		},
	})
	var full *leasestore.WindowFullError
	switch {
	case l == nil && err == nil:
		if token != nil {
			token.CancelAt(s.cfg.Now())
		}
		return rep, false // caught up
	case errors.As(err, &full), herr.CodeOf(err) == herr.FailedPrecondition, herr.CodeOf(err) == herr.NotFound:
		return rep, false // window full of waiting retries, paused, deleted
	case ctx.Err() != nil:
		return rep, false
	case err != nil:
		return ps.storeFailed(ctx, "pull", err)
	}
	// The record as it is now: a rotation or a PATCH made since the run
	// began applies to this delivery (one read per delivery). Should the
	// read fail, the run's copy serves. A longer timeout applies from the
	// next run on: this lease's visibility was made for the run's.
	if cur, err := s.cfg.Store.GetWebhook(ctx, c.ID); err == nil {
		w = cur
		if w.Timeout > 0 {
			timeout = min(w.Timeout, timeout)
		}
	}
	out := s.deliver(ctx, w, l, timeout)
	ps.log.add(l, out)
	webhookAttempted(ctx, c.ID, out)
	ack := leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK, Type: leasestore.TypeWebhook}
	more = true
	switch {
	case out.ok:
		rep.Delivered, rep.Events = 1, len(l.Events)
	case out.gone:
		rep.Failed, rep.Disabled = 1, 1
		ack.Status, ack.RetryAfter = leasestore.StatusFailed, new(time.Duration)
		more = false
		if _, err := s.cfg.Store.UpdateWebhook(context.WithoutCancel(ctx), c.ID, func(w *leasestore.Webhook) error {
			w.Disabled = "the endpoint answered 410 Gone"
			return nil
		}); err != nil && herr.CodeOf(err) != herr.NotFound {
			s.cfg.Logger.WarnContext(ctx, "webhook push: disable failed", "destination", c.ID, "err", err)
		}
	default:
		rep.Failed = 1
		ack.Status = leasestore.StatusFailed
		ack.RetryAfter = s.retryAfter(c, l.Attempt, out.retryAfter)
	}
	// The outcome is settled even when the run's context ended: the
	// attempt was made, and dropping its outcome would only redeliver it.
	if _, err := s.cfg.Store.Acknowledge(context.WithoutCancel(ctx), ack); err != nil {
		s.cfg.Logger.WarnContext(ctx, "webhook push: acknowledge failed", "destination", c.ID, "err", err)
		return PushReport{Errors: 1}, false
	}
	if !out.ok {
		s.cfg.Logger.InfoContext(ctx, "webhook delivery failed", "destination", c.ID, "attempt", l.Attempt, "status", out.status, "err", out.err)
	}
	if opened := ps.settleBreaker(context.WithoutCancel(ctx), out.ok); opened {
		rep.Open = 1
		more = false
	}
	return rep, more
}

// storeFailed reports a store or broker failure of the destination.
func (ps *push) storeFailed(ctx context.Context, what string, err error) (PushReport, bool) {
	if ctx.Err() != nil {
		return PushReport{}, false
	}
	ps.s.cfg.Logger.WarnContext(ctx, "webhook push: "+what+" failed", "destination", ps.c.ID, "err", err)
	return PushReport{Errors: 1}, false
}

// mayTakeNew reports whether the next pull may take new events: always,
// unless the destination asks for ordering and an earlier delivery is in
// flight or waits for its retry (one read of the consumer, exact
// counts). Among several push runs at once this is a check, not a lock:
// two runs that read at the same instant may each take a lease.
func (ps *push) mayTakeNew(ctx context.Context) (bool, error) {
	if !ps.w.Ordered {
		return true, nil
	}
	c, err := ps.s.cfg.Store.GetConsumer(ctx, ps.c.ID)
	if err != nil {
		return false, err
	}
	return c.InFlight == 0, nil
}

// noSource has no new events: an ordered destination's pull that may
// only hand out a due retry.
type noSource struct{}

func (noSource) Receive(context.Context, int) ([]leasestore.Incoming, error) { return nil, nil }
func (noSource) Settle(context.Context, []leasestore.Incoming, int) error    { return nil }

// claimProbe decides, for a destination whose breaker opened at opened,
// whether this run may probe the endpoint: only once the cool-down has
// passed, and only one run per cool-down, the one whose conditional write
// moves the opening time to now (so the next probe is a cool-down later
// whatever the probe's outcome, unless it succeeds and closes the breaker).
func (s *Service) claimProbe(ctx context.Context, id string, opened time.Time) (bool, error) {
	now := s.cfg.Now()
	if now.Before(opened.Add(s.cfg.Webhooks.BreakerCooldown)) {
		return false, nil
	}
	errTaken := errors.New("another run probes")
	_, err := s.cfg.Store.UpdateWebhook(ctx, id, func(w *leasestore.Webhook) error {
		if !w.OpenedAt.Equal(opened) {
			return errTaken
		}
		w.OpenedAt = now
		return nil
	})
	switch {
	case errors.Is(err, errTaken), herr.CodeOf(err) == herr.NotFound:
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// settleBreaker records an attempt's outcome in the endpoint's circuit
// breaker, in the webhook record that every dispatcher shares: a success
// resets the count and closes the breaker (a write only when there is
// something to reset); a failure counts, and the BreakerThreshold-th in a
// row opens the breaker. opened reports that it is open now.
func (ps *push) settleBreaker(ctx context.Context, ok bool) (opened bool) {
	s := ps.s
	probing := ps.probing.Load()
	if ok && ps.failures.Load() == 0 && !probing {
		return false
	}
	now := s.cfg.Now()
	w, err := s.cfg.Store.UpdateWebhook(ctx, ps.c.ID, func(w *leasestore.Webhook) error {
		if ok {
			w.Failures, w.OpenedAt = 0, time.Time{}
			return nil
		}
		w.Failures++
		if w.Failures >= s.cfg.Webhooks.BreakerThreshold && (w.OpenedAt.IsZero() || probing) {
			// Opened now, or opened again after a failed probe.
			w.OpenedAt = now
		}
		return nil
	})
	if err != nil {
		if herr.CodeOf(err) != herr.NotFound {
			s.cfg.Logger.WarnContext(ctx, "webhook push: breaker update failed", "destination", ps.c.ID, "err", err)
		}
		return false
	}
	ps.failures.Store(int64(w.Failures))
	telemetry.WebhookConsecutiveFailures(ctx, ps.c.ID, w.Failures)
	if !w.OpenedAt.IsZero() {
		s.cfg.Logger.WarnContext(ctx, "webhook circuit breaker open", "destination", ps.c.ID, "consecutive_failures", w.Failures)
		return true
	}
	return false
}

// attemptLog gathers a push run's attempts of one destination, the last
// leasestore.MaxWebhookAttempts of them, and writes them to the store's
// attempt log once, when the run leaves the destination: one write per
// destination per run rather than one per attempt. A run that crashes
// loses its part of the log, never a delivery.
type attemptLog struct {
	s    *Service
	id   string
	mu   sync.Mutex
	list []leasestore.WebhookAttempt
}

func (s *Service) newAttemptLog(id string) *attemptLog { return &attemptLog{s: s, id: id} }

// add records attempt out of lease l.
func (a *attemptLog) add(l *leasestore.Lease, out attemptOutcome) {
	e := leasestore.WebhookAttempt{
		At: out.at, WebhookID: out.id, Attempt: l.Attempt, Events: len(l.Events),
		Status: out.status, Latency: out.latency, Body: string(out.head),
	}
	if out.err != nil {
		e.Error = out.err.Error()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.list) == leasestore.MaxWebhookAttempts {
		a.list = append(a.list[:0], a.list[1:]...)
	}
	a.list = append(a.list, e)
}

// attemptLogTimeout bounds the write of a run's attempt log.
const attemptLogTimeout = 10 * time.Second

// flush writes the gathered attempts; a failure is logged, not returned:
// the log is for operators, and the deliveries it tells of are settled.
func (a *attemptLog) flush(ctx context.Context) {
	a.mu.Lock()
	list := a.list
	a.list = nil
	a.mu.Unlock()
	if len(list) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, attemptLogTimeout)
	defer cancel()
	if err := a.s.cfg.Store.AppendWebhookAttempts(ctx, a.id, list); err != nil {
		a.s.cfg.Logger.WarnContext(ctx, "webhook push: attempt log write failed", "destination", a.id, "err", err)
	}
}

// WebhookAttempts returns destination id's recent delivery attempts,
// newest first: at most leasestore.MaxWebhookAttempts, none older than
// leasestore.WebhookAttemptRetention, each with its time, status,
// latency, the first leasestore.MaxWebhookAttemptBody bytes of the
// answer's body and the error of an attempt without an answer (never the
// secret or the URL). It needs manage:destinations, as GetDestination;
// herr.NotFound when id is no webhook destination.
func (s *Service) WebhookAttempts(ctx context.Context, p *auth.Principal, id string) ([]leasestore.WebhookAttempt, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	if err := CheckText("the event destination id", id); err != nil {
		return nil, err
	}
	if _, err := s.cfg.Store.GetWebhook(ctx, id); err != nil {
		return nil, err
	}
	return s.cfg.Store.WebhookAttempts(ctx, id)
}
