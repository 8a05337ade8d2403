package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Stream and queue defaults (the notifications API, "Durable Queue Lifetime", "Handle
// Disconnections Gracefully").
const (
	// DefaultReconnectGrace is how long a non-durable queue outlives its
	// last attached session.
	DefaultReconnectGrace = 20 * time.Second
	// DefaultQueueIdleWindow is how long a durable queue lives without an
	// attached session before the reaper deletes it.
	DefaultQueueIdleWindow = 24 * time.Hour
	// DefaultSessionTTL is how long a stream session counts as attached
	// without a heartbeat; sessions heartbeat every third of it.
	DefaultSessionTTL = 30 * time.Second
	// DefaultStreamAckTimeout is how long an event delivered on a stream
	// may stay unsettled before it can be delivered again.
	DefaultStreamAckTimeout = 5 * time.Minute
	// DefaultStreamPollWait is how long one receive of a stream waits at
	// the broker when nothing is ready.
	DefaultStreamPollWait = time.Second
	// DefaultStreamBatch is how many events a stream takes per pull.
	DefaultStreamBatch = 100
	// DefaultMaxUnsettled is how many delivered, unsettled events one
	// session may hold before Next waits for settlements (a prefetch).
	DefaultMaxUnsettled = 100
	// DefaultKeepAlive is the SSE keep-alive comment interval.
	DefaultKeepAlive = 15 * time.Second
	// DefaultAutoAckDelay is how long the durable SSE stream waits after
	// writing an event before it acknowledges it.
	DefaultAutoAckDelay = time.Second
	// DefaultStreamWriteTimeout is how long a stream transport (SSE, gRPC
	// streams, the WebSocket bridge) waits for its client to take one
	// frame before it drops the client: a client that stops reading must
	// not hold its session, its leased events and its connection for
	// ever. 10 s is what the WebSocket bridge always allowed a write.
	DefaultStreamWriteTimeout = 10 * time.Second
	// MaxQueueIDLength is the longest queue_id (the notifications API).
	MaxQueueIDLength = 200
	// MaxReconnectTokenLength is the longest reconnect token (the notifications API).
	MaxReconnectTokenLength = 200
)

// StreamConfig tunes stream sessions, queue lifetimes and the SSE
// transport. Zero fields take the defaults above.
type StreamConfig struct {
	// ReconnectGrace: a non-durable queue without an attached session is
	// reaped this long after its last session left (HERALD_RECONNECT_GRACE).
	ReconnectGrace time.Duration
	// IdleWindow: a durable queue without an attached session is reaped
	// this long after one was last attached, or after its creation
	// (HERALD_QUEUE_IDLE_WINDOW).
	IdleWindow time.Duration
	// SessionTTL: a session that has not heartbeaten for this long counts
	// as detached; its unsettled events can be delivered to others.
	SessionTTL time.Duration
	// AckTimeout: an event delivered and not settled for this long can be
	// delivered again.
	AckTimeout time.Duration
	// PollWait: one receive waits this long at the broker.
	PollWait time.Duration
	// Batch: events taken per pull (1–100).
	Batch int
	// MaxUnsettled: the most delivered, unsettled events a session holds.
	MaxUnsettled int
	// KeepAlive is the SSE keep-alive interval (HERALD_SSE_KEEPALIVE); the
	// core does not use it.
	KeepAlive time.Duration
	// AutoAckDelay is how long the durable SSE stream waits before it
	// acknowledges an event it wrote (HERALD_SSE_ACK_DELAY; 0 =
	// DefaultAutoAckDelay); the core does not use it.
	AutoAckDelay time.Duration
	// AutoAckAtOnce: the durable SSE stream acknowledges an event as soon
	// as it is written (HERALD_SSE_ACK_DELAY=0s); AutoAckDelay is then 0
	// whatever it was set to.
	AutoAckAtOnce bool
	// WSPingInterval is how often the WebSocket bridge of the local
	// adapter and Cloud Run pings a client (HERALD_WS_PING_INTERVAL; 0 =
	// package functions/wsbridge's default, 30s); the core does not use
	// it.
	WSPingInterval time.Duration
	// MessageTTL: an event a queue (durable or not) holds longer than this
	// after it was published is dead-lettered with reason EXPIRED instead of
	// delivered (HERALD_QUEUE_MESSAGE_TTL; 0 = none).
	MessageTTL time.Duration
	// MaxLength: when a queue holds more undelivered and unsettled events
	// than this, the oldest are dead-lettered with reason MAXLEN
	// (HERALD_QUEUE_MAX_LENGTH; 0 = none, at most leasestore.MaxInFlight).
	// It counts what Herald holds for the queue and the broker backlog,
	// which ReapIdleQueues and a stream's attach take in (backlog.go).
	MaxLength int
	// WriteTimeout is how long a stream transport waits for its client to
	// take one frame (an event, a keep-alive) before it drops the
	// connection, and with it the session, whose unsettled events go back
	// to the queue (HERALD_STREAM_WRITE_TIMEOUT; 0 =
	// DefaultStreamWriteTimeout); the core does not use it.
	WriteTimeout time.Duration
	// MaxOpening bounds the stream opens in progress at once, every
	// transport and kind together (HERALD_MAX_CONCURRENT_STREAM_OPENS);
	// past it an open is refused at once with *OpensShedError (HTTP 503,
	// gRPC UNAVAILABLE, with a Retry-After of 1–3 s) instead of waiting
	// on the store behind the others. 0 = no bound.
	MaxOpening int
}

func (c *StreamConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ReconnectGrace, DefaultReconnectGrace)
	def(&c.IdleWindow, DefaultQueueIdleWindow)
	def(&c.SessionTTL, DefaultSessionTTL)
	def(&c.AckTimeout, DefaultStreamAckTimeout)
	def(&c.PollWait, DefaultStreamPollWait)
	def(&c.KeepAlive, DefaultKeepAlive)
	def(&c.WriteTimeout, DefaultStreamWriteTimeout)
	if c.AutoAckAtOnce {
		c.AutoAckDelay = 0
	} else {
		def(&c.AutoAckDelay, DefaultAutoAckDelay)
	}
	if c.Batch <= 0 || c.Batch > MaxPullLimit {
		c.Batch = DefaultStreamBatch
	}
	if c.MaxUnsettled <= 0 {
		c.MaxUnsettled = DefaultMaxUnsettled
	}
}

// Streams returns the stream settings in force (defaults filled in).
func (s *Service) Streams() StreamConfig { return s.cfg.Streams }

// queueIDPattern is the notifications API's rule for queue_id.
var queueIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

// ValidateQueueID checks id against the notifications API's rule
// `^[A-Za-z0-9._-]{1,200}$`. The error is herr.InvalidArgument (HTTP 422,
// gRPC INVALID_ARGUMENT) naming the field and the rule; it does not quote
// the id.
func ValidateQueueID(id string) error {
	if !queueIDPattern.MatchString(id) {
		return herr.InField(herr.New(herr.InvalidArgument, "queue_id must match ^[A-Za-z0-9._-]{1,200}$ (1 to 200 letters, digits, '.', '_' or '-')"), "queue_id")
	}
	return nil
}

// ValidateReconnectToken checks a reconnect token against the notifications API's rule:
// 1 to 200 printable ASCII characters (0x21–0x7E: no spaces, no control
// characters, nothing non-ASCII). field names where the token came from
// ("Last-Event-ID", "reconnect_token"). The error is herr.InvalidArgument
// naming the field and the rule, and quotes none of the token.
func ValidateReconnectToken(field, token string) error {
	ok := len(token) >= 1 && len(token) <= MaxReconnectTokenLength
	for i := 0; ok && i < len(token); i++ {
		ok = token[i] >= 0x21 && token[i] <= 0x7e
	}
	if !ok {
		return herr.InField(herr.New(herr.InvalidArgument, "%s must be 1 to 200 printable ASCII characters (0x21-0x7E: no spaces, no control characters, nothing non-ASCII)", field), field)
	}
	return nil
}

// errQueueNotFound is the NotFound of an unknown or reaped durable queue.
func errQueueNotFound(id string) error {
	return herr.New(herr.NotFound, "durable queue %q does not exist; it may have been deleted or reaped after its idle window: create it again with the same queue_id and filter_groups", id)
}

// getQueue returns durable queue id, or herr.NotFound when there is none
// (including when id names a consumer of another kind).
func (s *Service) getQueue(ctx context.Context, id string) (*leasestore.Consumer, error) {
	c, err := s.cfg.Store.GetConsumer(ctx, id)
	if herr.CodeOf(err) == herr.NotFound || (err == nil && c.Type != leasestore.TypeDurableQueue) {
		return nil, errQueueNotFound(id)
	}
	return c, err
}

// CreateQueue is the notifications API's CreateDurableQueue (POST
// /api/v1beta/queues/durable), with ensure-exists semantics:
//
//   - id names no queue: the queue is created at the head of the stream
//     (broker subscription first, then the store record of type
//     DURABLE_QUEUE with id as its id) and Created is true;
//   - id names a durable queue: it is returned as it is, with its own
//     filters, and Created is false, whatever groups say;
//   - id is "": Herald generates an id and creates the queue.
//
// Two concurrent creates of one id both succeed: one creates, the other
// sees Created false; the loser deletes the subscription it made, so none
// is orphaned. Every creation uses a fresh subscription name, so a queue
// re-created after it was reaped never meets its predecessor's.
//
// Errors: herr.PermissionDenied without create-durable-queues;
// herr.InvalidArgument for a bad id or bad groups (before any backend
// call); herr.AlreadyExists when id is taken by a consumer of another kind.
//
// q.Policies are applied only when this call creates the queue: an
// existing queue keeps its own (UpdateQueuePolicies changes them).
func (s *Service) CreateQueue(ctx context.Context, p *auth.Principal, q CreateQueueParams) (CreateQueueResult, error) {
	c, created, err := s.createQueue(ctx, p, q)
	return CreateQueueResult{Queue: c, Created: created}, err
}

// CreateQueueParams is what CreateQueue is asked for.
type CreateQueueParams struct {
	// ID is the queue's id ("" = generate one, "dq-" and a UUID); see
	// ValidateQueueID for its shape.
	ID string
	// FilterGroups select the queue's events (none = every event).
	FilterGroups filter.Groups
	// Policies are the queue's delivery policies (zero = the
	// deployment's defaults); herr.InvalidArgument outside their ranges.
	Policies leasestore.Policies
}

// CreateQueueResult is what CreateQueue answers.
type CreateQueueResult struct {
	// Queue is the durable queue (nil with an error).
	Queue *leasestore.Consumer
	// Created is true when this call created the queue, false when it
	// existed already.
	Created bool
}

func (s *Service) createQueue(ctx context.Context, p *auth.Principal, q CreateQueueParams) (c *leasestore.Consumer, created bool, err error) {
	id, groups := q.ID, q.FilterGroups
	if err := p.Require(auth.PermCreateDurableQueues); err != nil {
		return nil, false, err
	}
	if id != "" {
		if err := ValidateQueueID(id); err != nil {
			return nil, false, err
		}
	}
	if err := groups.Validate("filter_groups"); err != nil {
		return nil, false, err
	}
	if err := q.Policies.Validate(); err != nil {
		return nil, false, err
	}
	if id == "" {
		id = "dq-" + uuid.NewString()
	} else if c, err := s.existingQueue(ctx, id); c != nil || err != nil {
		return c, false, err
	}
	c, err = s.createConsumer(ctx, consumerSpec{
		id: id, typ: leasestore.TypeDurableQueue, subPrefix: "herald-dq-", groups: groups, policies: q.Policies,
	})
	if herr.CodeOf(err) == herr.AlreadyExists {
		// Another caller created it between our read and our write.
		c, err := s.existingQueue(ctx, id)
		if c == nil && err == nil {
			err = herr.New(herr.Aborted, "queue %q was created and deleted concurrently; retry", id)
		}
		return c, false, err
	}
	return c, err == nil, err
}

// existingQueue returns durable queue id, (nil, nil) when no consumer has
// that id, or herr.AlreadyExists when one of another kind has it.
func (s *Service) existingQueue(ctx context.Context, id string) (*leasestore.Consumer, error) {
	c, err := s.cfg.Store.GetConsumer(ctx, id)
	switch {
	case herr.CodeOf(err) == herr.NotFound:
		return nil, nil
	case err != nil:
		return nil, err
	case c.Type != leasestore.TypeDurableQueue:
		return nil, herr.New(herr.AlreadyExists, "queue_id %q is in use by a consumer of another kind; choose another id", id)
	}
	return c, nil
}

// consumerSpec is what createConsumer makes.
type consumerSpec struct {
	id, typ string
	// subPrefix starts the broker subscription's name (then a UUID).
	subPrefix string
	groups    filter.Groups
	policies  leasestore.Policies
	// owner is the creating principal's id, recorded where it decides who
	// may reconfigure the consumer (non-durable queues, CheckQueueOwner);
	// "" records none.
	owner string
}

// createConsumer makes a broker subscription named spec.subPrefix+UUID at
// the head of the stream, then the consumer record. When the record cannot
// be written the subscription is deleted again.
func (s *Service) createConsumer(ctx context.Context, spec consumerSpec) (*leasestore.Consumer, error) {
	sub := spec.subPrefix + uuid.NewString()
	if err := s.cfg.Broker.CreateSubscription(ctx, sub, spec.groups); err != nil {
		return nil, brokerErr(err)
	}
	c, err := s.cfg.Store.CreateConsumer(ctx, leasestore.Consumer{
		ID: spec.id, Type: spec.typ, Filters: spec.groups, Subscription: sub, CreatedAt: s.cfg.Now(),
		MessageTTL: s.cfg.Streams.MessageTTL, MaxLength: s.cfg.Streams.MaxLength, Policies: spec.policies,
		Owner: spec.owner,
	})
	if err != nil {
		s.deleteSubscription(context.WithoutCancel(ctx), sub)
		return nil, err
	}
	return c, nil
}

// deleteSubscription deletes sub at the broker; a failure is logged, since
// the consumer it served is gone and a leftover only costs storage.
func (s *Service) deleteSubscription(ctx context.Context, sub string) bool {
	if sub == "" {
		return true // a hub queue has none of its own
	}
	if err := s.cfg.Broker.DeleteSubscription(ctx, sub); err != nil && herr.CodeOf(err) != herr.NotFound {
		s.cfg.Logger.WarnContext(ctx, "delete subscription failed", "subscription", sub, "err", err)
		return false
	}
	return true
}

// SameGroups reports whether a and b select the same events as written:
// the same groups, in any order, each with the same filters in any order.
// unspecified and eq count as one filter type.
func SameGroups(a, b filter.Groups) bool {
	return slices.Equal(canonical(a), canonical(b))
}

func canonical(gs filter.Groups) []string {
	out := make([]string, 0, len(gs))
	for _, g := range gs {
		fs := make([]string, 0, len(g.Filters))
		for _, f := range g.Filters {
			if f.FilterType == filter.Unspecified {
				f.FilterType = filter.Eq
			}
			b, _ := json.Marshal(f)
			fs = append(fs, string(b))
		}
		slices.Sort(fs)
		fs = slices.Compact(fs)
		b, _ := json.Marshal(struct {
			T string
			F []string
		}{g.EventType, fs})
		out = append(out, string(b))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckQueueOwner returns nil when p may change the filters of
// non-durable queue c: p created it (its id is c.Owner), or p holds
// manage:destinations, the administrator's permission over every consumer
// (it can list, pause and delete any of them already: deleting a
// non-durable queue takes it, DeleteDestination). Anyone
// else gets herr.PermissionDenied, which names neither the owner nor the
// token. A queue created before owners were recorded has none, so only an
// administrator may change it; it lives at most the reconnect grace after
// its last session left.
//
// The rule is the notifications API's: a reconnect token "grants no
// access on its own", so presenting one lets a principal share the
// queue's events (each checked against its own receive rights), not
// re-filter them away from the principal that made the queue. Durable
// queues are not owned: the API makes their permissions deployment-wide
// ("Per-queue isolation is not enforced"), so create-durable-queues
// updates and delete-durable-queues deletes any of them.
func CheckQueueOwner(p *auth.Principal, c *leasestore.Consumer) error {
	if (c.Owner != "" && c.Owner == p.ID) || p.Can(auth.PermManageDestinations) {
		return nil
	}
	return herr.New(herr.PermissionDenied, "only the principal that created this non-durable queue, or one with %s, may change its filters: a reconnect token lets you share its events, not re-filter it", auth.PermManageDestinations)
}

// UpdateQueueFilters is the notifications API's UpdateDurableQueue (PATCH
// /api/v1beta/queues/durable): it replaces the queue's filters with next,
// first at the broker (without losing what the subscription holds), then
// in the store.
//
// current must describe the filters the queue has (compared with
// SameGroups): the update is a compare-and-set, so two clients that
// re-filter one queue cannot silently undo each other. A mismatch is
// herr.InvalidArgument naming current_filter_groups; the queue's filters
// can be read back with CreateQueue (Created false). An update whose next
// groups the queue already has succeeds whatever current says, so a retry
// of an applied update succeeds.
//
// Errors: herr.PermissionDenied without create-durable-queues (the notifications API:
// there is no separate update permission); herr.InvalidArgument for a bad
// id or bad groups, before any backend call; herr.NotFound for an unknown
// queue.
func (s *Service) UpdateQueueFilters(ctx context.Context, p *auth.Principal, id string, current, next filter.Groups) error {
	if err := p.Require(auth.PermCreateDurableQueues); err != nil {
		return err
	}
	if err := ValidateQueueID(id); err != nil {
		return err
	}
	if err := current.Validate("current_filter_groups"); err != nil {
		return err
	}
	if err := next.Validate("new_filter_groups"); err != nil {
		return err
	}
	c, err := s.getQueue(ctx, id)
	if err != nil {
		return err
	}
	return s.setFilters(ctx, c, "current_filter_groups", current, next)
}

// setFilters applies a compare-and-set filter update to consumer c; field
// names the expected-filters field in messages.
func (s *Service) setFilters(ctx context.Context, c *leasestore.Consumer, field string, current, next filter.Groups) error {
	if SameGroups(c.Filters, next) {
		return nil
	}
	if !SameGroups(c.Filters, current) {
		return herr.InField(herr.New(herr.InvalidArgument, "%s does not match the filters the queue has", field), field)
	}
	if c.Subscription == "" {
		// A hub queue: its home's hub judges events by the record's
		// filters (shared queues only reach here).
	} else if err := s.cfg.Broker.UpdateSubscription(ctx, c.Subscription, next); err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return herr.New(herr.NotFound, "the queue's subscription is gone; the queue is being deleted")
		}
		return brokerErr(err)
	}
	_, err := s.cfg.Store.SetFilters(ctx, c.ID, next)
	return err
}

// DeleteQueue is the notifications API's DeleteDurableQueue (DELETE
// /api/v1beta/queues/durable): it deletes the queue's record with what it
// holds, then its broker subscription. Streams attached to it end with
// NOT_FOUND.
//
// Errors: herr.PermissionDenied without delete-durable-queues;
// herr.InvalidArgument for a bad id (before any backend call);
// herr.NotFound for an unknown queue.
func (s *Service) DeleteQueue(ctx context.Context, p *auth.Principal, id string) error {
	if err := p.Require(auth.PermDeleteDurableQueues); err != nil {
		return err
	}
	if err := ValidateQueueID(id); err != nil {
		return err
	}
	if _, err := s.getQueue(ctx, id); err != nil {
		return err
	}
	c, err := s.cfg.Store.DeleteConsumer(ctx, id)
	if herr.CodeOf(err) == herr.NotFound {
		return errQueueNotFound(id)
	}
	if err != nil {
		return err
	}
	s.deleteSubscription(ctx, c.Subscription)
	return nil
}

// ReapReport is what one run of the idle-queue reaper did.
type ReapReport struct {
	// Queues counts the queues deleted (durable and non-durable).
	Queues int
	// Failed counts broker subscriptions that could not be deleted; they
	// are logged by name.
	Failed int
	// Claims counts the claim-check claims deleted for being older than
	// Config.ClaimRetention (claims.go).
	Claims int
	// Keys counts the idempotency keys deleted for being past their
	// window (leasestore.Store.ReapKeys): the expiry of the stores
	// without a TTL of their own.
	Keys int
	// Processes counts the records of dead processes deleted, with their
	// hub subscriptions (docs/streams-at-scale.md).
	Processes int
	// Intake is what taking in the broker backlog of the queues with a
	// maximum length and no attached session did (backlog.go).
	Intake IntakeTotals
}

// reapProcesses deletes the hub subscription and the record of every
// process dead for longer than the reconnect grace window: its queues
// have been taken over or reaped by then, and nothing reads its
// subscription. A process that beats again meanwhile keeps its record.
func (s *Service) reapProcesses(ctx context.Context) (int, error) {
	ps, err := s.cfg.Store.ListProcesses(ctx)
	if err != nil {
		return 0, err
	}
	now := s.cfg.Now()
	n := 0
	var errs []error
	for _, p := range ps {
		if s.cfg.Store.ProcessAlive(p, now.Add(-s.cfg.Streams.ReconnectGrace)) {
			continue
		}
		s.deleteSubscription(ctx, p.Subscription)
		if err := s.cfg.Store.DeleteProcess(ctx, p.ID, p.Heartbeat); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// ReapIdleQueues runs the idle-queue reaper (the notifications API, "Durable Queue
// Lifetime"): the store deletes every non-durable queue whose last session
// left more than ReconnectGrace ago and every durable queue without an
// attached session for IdleWindow (see leasestore.Store.ReapIdle), with
// what they hold; then their broker subscriptions are deleted. Afterwards
// every call on a reaped queue answers NOT_FOUND, and a durable queue can
// be created again with the same id. It also deletes the claim-check
// claims older than Config.ClaimRetention (claims.go). Then, for every
// remaining queue with a maximum length and no attached session, it takes
// the broker's backlog into the queue, dead-lettering the oldest events
// past the maximum with reason MAXLEN (backlog.go), so that a queue nobody
// reads holds at most its maximum length. When some steps fail it returns
// the report so far with the errors joined. Needs run:jobs.
func (s *Service) ReapIdleQueues(ctx context.Context, p *auth.Principal) (*ReapReport, error) {
	if err := p.Require(auth.PermRunJobs); err != nil {
		return nil, err
	}
	// One listing of the heads serves the reaper and the backlog intake
	// below: with many non-durable queues, reading every consumer is most
	// of an idle process's work.
	all, err := s.cfg.Store.ListHeads(ctx)
	var cs []*leasestore.Consumer
	if err == nil {
		cs, err = s.cfg.Store.ReapIdleAmong(ctx, all, s.cfg.Streams.ReconnectGrace, s.cfg.Streams.IdleWindow)
	}
	rep := &ReapReport{}
	reaped := make(map[string]bool, len(cs))
	for _, c := range cs {
		rep.Queues++
		reaped[c.ID] = true
		if !s.deleteSubscription(ctx, c.Subscription) {
			rep.Failed++
		}
		if c.Home != "" && c.Home != leasestore.ReleasedHome {
			// Its home was taken for dead; should it still run, it ends
			// the queue's streams as a deleted queue's.
			_ = s.cfg.Store.Notify(ctx, c.Home, leasestore.Notice{Kind: leasestore.NoticeGone, Queue: c.ID})
		}
	}
	procs, perr := s.reapProcesses(ctx)
	rep.Processes = procs
	n, cerr := s.reapClaims(ctx)
	rep.Claims = n
	keys, kerr := s.cfg.Store.ReapKeys(ctx)
	rep.Keys = keys
	cerr = errors.Join(cerr, kerr)
	var ierr error
	rep.Intake, ierr = s.takeInIdleBacklogs(ctx, all, reaped)
	return rep, errors.Join(err, perr, cerr, ierr)
}
