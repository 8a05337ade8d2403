package leasestore

import (
	"context"
	"time"

	"github.com/heraldevents/herald/herr"
)

// Limits of the delivery controls (extend, fail with a delay, per-consumer
// retry and dead-letter policies).
const (
	// MaxLeaseLife caps how long one hand-out of a lease can be kept by
	// extending it: 12 hours from the moment it was handed out, as Amazon
	// SQS caps a message's visibility timeout. Extend refuses to go past
	// it with herr.OutOfRange; the worker must finish or let the lease go.
	MaxLeaseLife = 12 * time.Hour
	// MaxLeaseVisibility is the longest visibility a pull or an extension
	// grants (the durable-consumer API: 1–600 s). A lease stored by a
	// Herald before Extend existed is taken to have been handed out this
	// long before its expiry, the earliest it can have been.
	MaxLeaseVisibility = 600 * time.Second
	// MaxRetryAfter is the longest delay a failed acknowledgement may ask
	// for (AckParams.RetryAfter): 12 hours.
	MaxRetryAfter = 12 * time.Hour
	// MaxBackoff bounds RetryPolicy's backoffs (600 s, as Google Pub/Sub's
	// retry policy).
	MaxBackoff = 600 * time.Second
	// MaxDeliveryAttempts bounds Consumer.MaxDeliveryAttempts.
	MaxDeliveryAttempts = 1000
)

// RetryPolicy delays the redelivery of a failed, nacked or expired lease
// that carries no explicit delay (a failed acknowledgement without
// RetryAfter): the n-th delivery's failure waits MinimumBackoff·2^(n-1),
// at most MaximumBackoff, exponential by the lease's Attempt as Google
// Pub/Sub's retry policy. For a lease that expired the wait counts from its
// expiry and is computed when it is reclaimed, so nothing is written for
// it. A session lease whose session went away comes back at once. Both
// durations are 0–MaxBackoff, with MinimumBackoff ≤ MaximumBackoff; a nil
// policy (or a zero MaximumBackoff) redelivers at once.
type RetryPolicy struct {
	MinimumBackoff time.Duration
	MaximumBackoff time.Duration
}

// Validate reports a policy outside its ranges as herr.InvalidArgument,
// naming the field as the REST APIs spell it.
func (p *RetryPolicy) Validate() error {
	switch {
	case p == nil:
		return nil
	case p.MinimumBackoff < 0 || p.MinimumBackoff > MaxBackoff:
		return herr.New(herr.InvalidArgument, "retry_policy.minimum_backoff must be between 0 and %d seconds", int(MaxBackoff/time.Second))
	case p.MaximumBackoff < 0 || p.MaximumBackoff > MaxBackoff:
		return herr.New(herr.InvalidArgument, "retry_policy.maximum_backoff must be between 0 and %d seconds", int(MaxBackoff/time.Second))
	case p.MaximumBackoff < p.MinimumBackoff:
		return herr.New(herr.InvalidArgument, "retry_policy.maximum_backoff must not be below minimum_backoff")
	}
	return nil
}

// Backoff returns the wait after the failure of delivery attempt (1 for
// the first delivery): MinimumBackoff·2^(attempt-1), at most
// MaximumBackoff; 0 for a nil policy or an attempt below 1.
func (p *RetryPolicy) Backoff(attempt int64) time.Duration {
	if p == nil || attempt < 1 || p.MaximumBackoff <= 0 {
		return 0
	}
	d := p.MinimumBackoff
	for i := int64(1); i < attempt && d < p.MaximumBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaximumBackoff)
}

// Policies are a consumer's delivery policies, set at creation
// (Consumer) and changed with SetPolicies.
type Policies struct {
	// RetryPolicy delays redeliveries (nil: at once).
	RetryPolicy *RetryPolicy
	// MaxDeliveryAttempts, 1–MaxDeliveryAttempts, replaces
	// Options.DeliveryLimit for this consumer; 0 keeps the Store's.
	MaxDeliveryAttempts int
	// AckTimeout, for the notifications API's queues, is how long a stream
	// event stays with its session unsettled before it is redelivered
	// (the visibility of PullEvents' leases; the caller reads it and passes
	// it to PullEvents). 1 s–MaxLeaseLife; 0 keeps the deployment's.
	AckTimeout time.Duration
}

// Validate reports a field outside its range as herr.InvalidArgument.
func (p Policies) Validate() error {
	if err := p.RetryPolicy.Validate(); err != nil {
		return err
	}
	if p.MaxDeliveryAttempts < 0 || p.MaxDeliveryAttempts > MaxDeliveryAttempts {
		return herr.New(herr.InvalidArgument, "dead_letter_policy.max_delivery_attempts must be between 1 and %d", MaxDeliveryAttempts)
	}
	if p.AckTimeout != 0 && (p.AckTimeout < time.Second || p.AckTimeout > MaxLeaseLife) {
		return herr.New(herr.InvalidArgument, "ack_timeout must be between 1 and %d seconds", int(MaxLeaseLife/time.Second))
	}
	return nil
}

// setPolicies stores p in d.
func (d *consumerDoc) setPolicies(p Policies) {
	d.RetryMin, d.RetryMax = 0, 0
	if p.RetryPolicy != nil && p.RetryPolicy.MaximumBackoff > 0 {
		d.RetryMin, d.RetryMax = p.RetryPolicy.MinimumBackoff.Milliseconds(), p.RetryPolicy.MaximumBackoff.Milliseconds()
	}
	d.MaxAttempts = int64(p.MaxDeliveryAttempts)
	d.AckTimeout = p.AckTimeout.Milliseconds()
}

// policies returns d's stored policies.
func (d *consumerDoc) policies() Policies {
	p := Policies{MaxDeliveryAttempts: int(d.MaxAttempts), AckTimeout: time.Duration(d.AckTimeout) * time.Millisecond}
	if d.RetryMax > 0 {
		p.RetryPolicy = &RetryPolicy{
			MinimumBackoff: time.Duration(d.RetryMin) * time.Millisecond,
			MaximumBackoff: time.Duration(d.RetryMax) * time.Millisecond,
		}
	}
	return p
}

// SetPolicies replaces consumer id's delivery policies with p and returns
// the consumer. New values apply from the next pull on, to the leases
// already waiting too. It fails with herr.InvalidArgument for a policy
// outside its ranges and herr.NotFound for an unknown consumer.
func (s *Store) SetPolicies(ctx context.Context, id string, p Policies) (*Consumer, error) {
	return s.UpdatePolicies(ctx, id, func(Policies) (Policies, error) { return p, nil })
}

// UpdatePolicies changes consumer id's delivery policies to what change
// makes of the current ones, read in the same conditional write: two
// updates of different members at once (PATCH requests) both land, as
// change runs again on the other's result when the write clashes. An
// error from change is returned as it is, and nothing is written. Errors
// otherwise as SetPolicies.
func (s *Store) UpdatePolicies(ctx context.Context, id string, change func(Policies) (Policies, error)) (*Consumer, error) {
	var d *consumerDoc
	err := s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.get(ctx, id); err != nil {
			return false, err
		}
		before := d.policies()
		p, err := change(before)
		if err != nil {
			return false, err
		}
		if err := p.Validate(); err != nil {
			return false, err
		}
		d.setPolicies(p)
		if samePolicies(before, d.policies()) {
			return true, nil
		}
		// The hints of blocks with waiting leases may have assumed the
		// old backoff: lower them all, so that pulls read them.
		for _, e := range d.Blocks {
			d.lower(e.Start)
		}
		return s.commit(ctx, id, write{doc: d})
	})
	if err != nil {
		return nil, err
	}
	return s.fullView(ctx, d)
}

func samePolicies(a, b Policies) bool {
	if (a.RetryPolicy == nil) != (b.RetryPolicy == nil) || (a.RetryPolicy != nil && *a.RetryPolicy != *b.RetryPolicy) {
		return false
	}
	return a.MaxDeliveryAttempts == b.MaxDeliveryAttempts && a.AckTimeout == b.AckTimeout
}

// redelivery is what decides when a lease that nobody holds may be handed
// out again: the consumer's retry policy and delivery limit.
type redelivery struct {
	retry *RetryPolicy
	limit int64
}

// redelivery returns d's redelivery rules.
func (s *Store) redelivery(d *consumerDoc) redelivery {
	r := redelivery{retry: d.policies().RetryPolicy, limit: int64(s.opts.DeliveryLimit)}
	if d.MaxAttempts > 0 {
		r.limit = d.MaxAttempts
	}
	return r
}

// due returns when lease l may be handed out (Unix ms; at or before nowMs:
// now); for a held lease, when its visibility ends. A dying lease is due
// now (whoever meets it finishes its move). A delayed lease is due at its
// Expires. A lease that expired is due at its expiry plus the retry
// policy's backoff, unless redelivering it would pass the delivery limit
// (it is dead-lettered at once). Anything else nobody holds (failed or
// nacked without a delay, a session's lease whose session left) is due now.
func (r redelivery) due(l *leaseRec, nowMs int64, live func(string) bool) int64 {
	switch {
	case l.Dying != "":
		return nowMs
	case l.Attempt >= r.limit && !l.live(nowMs, live):
		return nowMs // to the dead-letter queue, without waiting
	case l.Delayed:
		return l.Expires
	case l.live(nowMs, live):
		return l.Expires
	case r.retry != nil && l.Expires > 0 && l.Expires <= nowMs && l.Attempt < r.limit:
		return l.Expires + r.retry.Backoff(l.Attempt).Milliseconds()
	}
	return nowMs
}

// failDelay returns the delay of a lease that failed or was nacked at
// attempt: retryAfter when given, else the retry policy's backoff (0 once
// the next redelivery would pass the delivery limit, which dead-letters it
// instead).
func (r redelivery) failDelay(attempt int64, retryAfter *time.Duration) time.Duration {
	if retryAfter != nil {
		return *retryAfter
	}
	if attempt >= r.limit {
		return 0
	}
	return r.retry.Backoff(attempt)
}

// requeue makes lease l wait for redelivery after delay: at once (requeued)
// or from nowMs+delay (delayed). Nobody holds it any more.
func (l *leaseRec) requeue(nowMs int64, delay time.Duration) {
	l.Worker, l.Life = "", 0
	if delay <= 0 {
		l.Requeued, l.Delayed = true, false
		return
	}
	l.Requeued, l.Delayed = false, true
	l.Expires = nowMs + delay.Milliseconds()
}

// waiting reports whether l is failed, nacked, delayed or expired: nobody
// holds it and it waits for redelivery (dying leases excluded).
func (l *leaseRec) waiting(nowMs int64, live func(string) bool) bool {
	return l.Dying == "" && !l.live(nowMs, live)
}

// lifeSecs returns the whole seconds, rounded up, from handedOut to
// expires (both Unix ms).
func lifeSecs(handedOut, expires int64) int64 {
	return (expires - handedOut + 999) / 1000
}
