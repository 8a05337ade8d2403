package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// Pull limits of the durable-consumer API ("Pull a batch").
const (
	DefaultPullLimit  = 20
	MaxPullLimit      = 100
	DefaultVisibility = 60 * time.Second
	MaxVisibility     = 600 * time.Second
	MaxWorkerIDLength = 200
)

// CreateDestinationParams is what CreateDestination is asked for.
type CreateDestinationParams struct {
	// Type must be leasestore.TypeDurableConsumer (herr.Malformed
	// otherwise: the durable-consumer API answers 400 for other types).
	Type string
	// FilterGroups select the consumer's events (none = every event).
	FilterGroups filter.Groups
	// Policies are its delivery policies (zero = the deployment's
	// defaults); herr.InvalidArgument outside their ranges, herr.Malformed
	// with an AckTimeout (durable queues only).
	Policies leasestore.Policies
}

// CreateDestination creates a durable consumer at the head of the stream:
// its broker subscription first (so nothing published after this call
// returns is missed), then its record. See CreateDestinationParams for
// what it takes and the errors of each member.
func (s *Service) CreateDestination(ctx context.Context, p *auth.Principal, d CreateDestinationParams) (*leasestore.Consumer, error) {
	typ, groups := d.Type, d.FilterGroups
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	if typ != leasestore.TypeDurableConsumer {
		return nil, herr.New(herr.Malformed, "type must be %q or %q", leasestore.TypeDurableConsumer, leasestore.TypeWebhook)
	}
	if err := groups.Validate("filter_groups"); err != nil {
		return nil, err
	}
	policies := d.Policies
	if err := policies.Validate(); err != nil {
		return nil, err
	}
	if policies.AckTimeout != 0 {
		return nil, herr.New(herr.Malformed, "ack_timeout is only for durable queues")
	}
	id := uuid.NewString()
	sub := "herald-dc-" + id
	if err := s.cfg.Broker.CreateSubscription(ctx, sub, groups); err != nil {
		return nil, brokerErr(err)
	}
	c, err := s.cfg.Store.CreateConsumer(ctx, leasestore.Consumer{
		ID: id, Type: typ, Filters: groups, Subscription: sub, CreatedAt: s.cfg.Now(), Policies: policies,
	})
	if err != nil {
		_ = s.cfg.Broker.DeleteSubscription(context.WithoutCancel(ctx), sub)
		return nil, err
	}
	return c, nil
}

// GetDestination returns one consumer or herr.NotFound.
func (s *Service) GetDestination(ctx context.Context, p *auth.Principal, id string) (*leasestore.Consumer, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	c, err := s.cfg.Store.GetConsumer(ctx, id)
	if err == nil {
		s.countHubStreams(c)
	}
	return c, err
}

// DestinationLeases returns consumer id's unsettled leases
// (leasestore.Store.Leases): what is in flight, with each lease's
// attempt and expiry. It needs manage:destinations, as GetDestination.
func (s *Service) DestinationLeases(ctx context.Context, p *auth.Principal, id string) ([]leasestore.LeaseView, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	return s.cfg.Store.Leases(ctx, id)
}

// countHubStreams sets c.LiveSessions for a hub queue homed in this
// process: its streams live in the hub, not in the store. (A hub queue
// homed in another process shows none.)
func (s *Service) countHubStreams(c *leasestore.Consumer) {
	if h := s.hub.Load(); h != nil && c.Home == h.ProcessID() {
		if n, ok := h.LiveStreams(c.ID); ok {
			c.LiveSessions = n
		}
	}
}

// ListDestinations returns every consumer: durable consumers, durable
// queues and non-durable queues. A non-durable queue's id is its
// reconnect token, which lets its holder resume the stream, so it is
// listed cut to a short prefix (RedactQueue): the listing shows that the
// queue exists, not how to attach to it.
func (s *Service) ListDestinations(ctx context.Context, p *auth.Principal) ([]*leasestore.Consumer, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	cs, err := s.cfg.Store.ListConsumers(ctx)
	for _, c := range cs {
		s.countHubStreams(c)
		if c.Type == leasestore.TypeNonDurableQueue {
			c.ID = RedactQueue(NonDurable, c.ID)
		}
	}
	return cs, err
}

// DeleteDestination deletes the consumer's record, then its subscription.
func (s *Service) DeleteDestination(ctx context.Context, p *auth.Principal, id string) error {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return err
	}
	c, err := s.cfg.Store.DeleteConsumer(ctx, id)
	if err != nil {
		return err
	}
	if err := s.cfg.Broker.DeleteSubscription(ctx, c.Subscription); err != nil && herr.CodeOf(err) != herr.NotFound {
		// The consumer is gone; a leftover subscription only costs storage.
		s.cfg.Logger.WarnContext(ctx, "delete subscription failed", "subscription", c.Subscription, "err", err)
	}
	if c.Type == leasestore.TypeWebhook {
		if err := s.cfg.Store.DeleteWebhook(ctx, id); err != nil {
			// The consumer is gone, so nothing pushes to it; a leftover
			// record only costs storage.
			s.cfg.Logger.WarnContext(ctx, "delete webhook record failed", "destination", id, "err", err)
		}
	}
	return nil
}

// SetPaused pauses or resumes a consumer. Resuming a webhook
// destination also enables it again after its endpoint answered 410
// Gone.
func (s *Service) SetPaused(ctx context.Context, p *auth.Principal, id string, paused bool) (*leasestore.Consumer, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	c, err := s.cfg.Store.SetPaused(ctx, id, paused)
	if err == nil && !paused && c.Type == leasestore.TypeWebhook {
		if err := s.EnableWebhook(ctx, p, id); err != nil && herr.CodeOf(err) != herr.NotFound {
			return nil, err
		}
	}
	return c, err
}

// PullRequest is a pull as the REST layer parsed it.
type PullRequest struct {
	Destination string
	Worker      string
	Limit       int
	Visibility  time.Duration
}

// Validate checks the the durable-consumer API ranges; errors are herr.OutOfRange.
func (r *PullRequest) Validate() error {
	if r.Limit < 1 || r.Limit > MaxPullLimit {
		return herr.New(herr.OutOfRange, "limit must be between 1 and %d", MaxPullLimit)
	}
	if r.Visibility < time.Second || r.Visibility > MaxVisibility {
		return herr.New(herr.OutOfRange, "visibility must be between 1 and %d seconds", int(MaxVisibility/time.Second))
	}
	if len([]rune(r.Worker)) > MaxWorkerIDLength {
		return herr.New(herr.OutOfRange, "workerId must be at most %d characters", MaxWorkerIDLength)
	}
	if err := CheckText("workerId", r.Worker); err != nil {
		return err
	}
	return CheckText("the event destination id", r.Destination)
}

// Pull leases the next batch (see leasestore.Store.Pull). It returns
// (nil, nil) when the consumer is caught up.
//
// Every event is checked against the caller's right to read its type
// (auth.Principal.CanReceive), in the store, before anything is handed
// out (leasestore.PullParams.Withhold): a batch stops before the first
// event the caller may not read, and when that is the next event, the
// pull is herr.PermissionDenied naming its type, with Retry-After
// WithheldRetryAfter, and nothing is handed out, written or counted. A
// destination has one cursor, so its events cannot be skipped for one
// worker and kept for another: the event waits, with its delivery count
// as it was, for a worker that may read it, and the events after it wait
// behind it. A caller without the right can neither see nor settle it,
// nor move it toward the delivery limit, however often it pulls
// (docs/limits.md, "Events a principal may not read").
func (s *Service) Pull(ctx context.Context, p *auth.Principal, r PullRequest) (l *leasestore.Lease, err error) {
	ctx, op := telemetry.StartReceive(ctx, "pull")
	defer func() {
		if l != nil {
			op.Delivered(ctx, l.Events, redelivered(l))
		}
		op.End(ctx, err)
	}()
	l, err = s.pull(ctx, p, r)
	var w *leasestore.WithheldError
	if errors.As(err, &w) {
		return nil, withheldError(w)
	}
	return l, err
}

func (s *Service) pull(ctx context.Context, p *auth.Principal, r PullRequest) (*leasestore.Lease, error) {
	if err := p.Require(auth.PermReadEvents); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	// The source is made from the consumer as the pull reads it: one read
	// of its head, not a lookup and then the pull's own.
	sourceFor := func(c leasestore.ConsumerIdentity) (leasestore.Source, error) {
		if c.Type != leasestore.TypeDurableConsumer {
			return nil, herr.New(herr.Malformed, "the event destination is of type %s; pull and acknowledge are only supported for durable consumer destinations (type %s)", c.Type, leasestore.TypeDurableConsumer)
		}
		return &brokerSource{svc: s, broker: s.cfg.Broker, sub: c.Subscription, groups: c.Filters, wait: s.cfg.ReceiveWait}, nil
	}
	// A principal that may receive every type needs no per-event check,
	// which would decode every event (a fifth of a pull's CPU in the
	// profile, docs/benchmarks.md): pullWithhold is nil then.
	return s.cfg.Store.Pull(ctx, leasestore.PullParams{
		Consumer: r.Destination, Worker: r.Worker, Limit: r.Limit, Visibility: r.Visibility, SourceFor: sourceFor,
		Withhold: pullWithhold(p),
	})
}

// Acknowledge settles a lease (see leasestore.Store.Acknowledge).
func (s *Service) Acknowledge(ctx context.Context, p *auth.Principal, a leasestore.AckParams) (res *leasestore.AckResult, err error) {
	if err := p.Require(auth.PermReadEvents); err != nil {
		return nil, err
	}
	name := "ack"
	switch a.Status {
	case leasestore.StatusFailed:
		name = "nack"
	case leasestore.StatusRejected:
		name = "reject"
	}
	ctx, op := telemetry.StartSettle(ctx, name)
	defer func() {
		outcome := "error"
		if res != nil {
			outcome = string(res.Outcome)
			if res.Outcome != leasestore.OutcomeStale && !res.HandedOut.IsZero() {
				telemetry.Processed(ctx, "rest", name, s.cfg.Now().Sub(res.HandedOut))
			}
		}
		op.Acknowledged(ctx, outcome, 1)
		op.End(ctx, err)
	}()
	return s.cfg.Store.Acknowledge(ctx, a)
}

// Extend moves a pull lease's expiry (see leasestore.Store.Extend). It
// needs the read:events permission, as Acknowledge.
func (s *Service) Extend(ctx context.Context, p *auth.Principal, e leasestore.ExtendParams) (res *leasestore.ExtendResult, err error) {
	if err := p.Require(auth.PermReadEvents); err != nil {
		return nil, err
	}
	ctx, op := telemetry.StartSettle(ctx, "extend")
	defer func() {
		outcome := "error"
		if res != nil {
			outcome = string(res.Outcome)
		}
		op.Acknowledged(ctx, outcome, 1)
		op.End(ctx, err)
	}()
	return s.cfg.Store.Extend(ctx, e)
}

// brokerSource adapts a broker subscription to leasestore.Source and
// re-checks the consumer's filters: a broker may filter less than Herald's
// filter groups say (a shallow prefix cannot be pushed down), so events that
// do not match are acked at the broker and never leased. It resolves
// claim-check references (claims.go) of the events that match; a
// reference whose claim is gone is acked at the broker too.
type brokerSource struct {
	svc    *Service // for claim-check references; Settle does not need it
	broker *pubsubx.Broker
	sub    string
	groups filter.Groups
	wait   time.Duration
}

// maxFilteredRounds bounds how many receives one pull spends skipping
// events that fail the filter before it answers with what it has.
const maxFilteredRounds = 4

func (b *brokerSource) Receive(ctx context.Context, max int) ([]leasestore.Incoming, error) {
	for range maxFilteredRounds {
		msgs, err := b.broker.Receive(ctx, b.sub, pubsubx.ReceiveParams{Max: max, Wait: b.wait})
		if err != nil {
			return nil, brokerErr(err)
		}
		var match, skip []*pubsubx.Message
		for _, m := range msgs {
			if b.groups.Match(m.EventType(), m.ResourceID()) {
				match = append(match, m)
			} else {
				skip = append(skip, m)
			}
		}
		out, skip, err := b.svc.resolveAll(ctx, b.sub, match, skip)
		if err != nil {
			return nil, err
		}
		if len(skip) > 0 {
			if err := b.broker.Ack(ctx, b.sub, skip); err != nil {
				return nil, brokerErr(err)
			}
		}
		if len(out) > 0 || len(msgs) == 0 {
			return out, nil
		}
	}
	return nil, nil
}

func (b *brokerSource) Settle(ctx context.Context, in []leasestore.Incoming, taken int) error {
	msgs := make([]*pubsubx.Message, len(in))
	for i := range in {
		msgs[i] = in[i].Handle.(*pubsubx.Message)
	}
	var err error
	if taken > 0 {
		err = b.broker.Ack(ctx, b.sub, msgs[:taken])
	}
	if taken < len(msgs) {
		if nerr := b.broker.Nack(ctx, b.sub, msgs[taken:]); err == nil {
			err = nerr
		}
	}
	return err
}

// brokerErr keeps a broker error's code unless it says nothing useful.
func brokerErr(err error) error {
	switch herr.CodeOf(err) {
	case herr.Unknown, herr.Internal:
		return herr.Wrap(herr.Unavailable, err, "the message broker is unavailable; retry with backoff")
	}
	return err
}
