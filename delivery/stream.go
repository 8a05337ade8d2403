package delivery

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/logredact"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// ConsumerCancelledMessage is the notifications API's exact INTERNAL message for a
// stream whose consumer was taken away while its queue is intact. The
// client reconnects (same reconnect token or queue_id) and finds the
// backlog there; events it had not settled are delivered again.
const ConsumerCancelledMessage = "Internal Server Error: The broker cancelled this stream's consumer. Reconnect to resume consuming."

// ConsumerCancelledError is the error of a stream or stateless session
// whose session was taken away (detached, evicted, or its ttl lapsed
// without a heartbeat) while its queue is intact. Its code is
// herr.Internal and its caller-safe message ConsumerCancelledMessage, the
// notifications API's exact text, so every transport sends it unchanged;
// code that must tell it from other internal errors matches it with
// errors.As, never by its message.
type ConsumerCancelledError struct {
	// Err is the store's error, kept for logs (a non-durable queue's id,
	// its reconnect token, cut out of its text).
	Err error
}

func (e *ConsumerCancelledError) Error() string {
	if e.Err == nil {
		return ConsumerCancelledMessage
	}
	return ConsumerCancelledMessage + ": " + e.Err.Error()
}

// Unwrap lets herr.CodeOf and herr.MessageOf see Internal and
// ConsumerCancelledMessage, and errors.Is the store's error.
func (e *ConsumerCancelledError) Unwrap() error {
	return herr.Wrap(herr.Internal, e.Err, ConsumerCancelledMessage)
}

// StreamKind says which queue a stream reads.
type StreamKind int

// Stream kinds.
const (
	// NonDurable streams read a non-durable queue: a fresh one, or the one a
	// reconnect token names (the notifications API, ConsumeNonDurableEvents and GET
	// /api/v1beta/events/stream).
	NonDurable StreamKind = iota
	// Durable streams read a durable queue by queue_id (the notifications API,
	// ConsumeDurableEvents[WithAcks] and GET
	// /api/v1beta/events/stream-durable).
	Durable
)

// StreamRequest opens a stream.
type StreamRequest struct {
	Kind StreamKind
	// QueueID names the durable queue (Durable only); it must pass
	// ValidateQueueID.
	QueueID string
	// ReconnectToken names the non-durable queue to reattach to; "" opens
	// a fresh queue with FilterGroups. TokenField names where the token
	// came from, for messages (default "reconnect_token").
	ReconnectToken string
	TokenField     string
	// FilterGroups are the filters of a fresh queue, or the new filters of
	// a filter update.
	FilterGroups filter.Groups
	// FilterUpdate says that previous_filter_groups was given: with a
	// reconnect token, the request moves the queue from
	// PreviousFilterGroups to FilterGroups. Without it, a reconnect resumes
	// on the queue's own filters and FilterGroups is ignored (the notifications API:
	// "A request that carries the token alone resumes the stream on the
	// filters it already has").
	FilterUpdate         bool
	PreviousFilterGroups filter.Groups
}

// Delivery is one event handed to a stream's client.
type Delivery struct {
	// Tag is the session-scoped delivery tag (1, 2, 3, …) the client
	// settles the event with.
	Tag int64
	// DeliveryCount is how often the event has been delivered, this time
	// included; it counts every redelivery over the event's lifetime.
	DeliveryCount int64
	// Event is the consumer form of the event.
	Event *ConsumerEvent
	// Body is the encoded CloudEvent as stored.
	Body []byte
	// Ref names the single-event lease the event came from (its id and
	// generation): what a settlement names in the store. Set by Stream.Next
	// and Service.PollSession.
	Ref leasestore.EventRef
}

// SettleReport says what a settlement did.
type SettleReport struct {
	// Acked and Nacked count the events the store settled.
	Acked, Nacked int
	// Skipped counts the other tags: unknown to the session (never issued,
	// already settled, or from an earlier connection), or naming an event
	// that was delivered to someone else since.
	Skipped int
}

// Stream is one consumer session on a queue: what SSE, gRPC and WebSocket
// transports drive. It attaches to the queue in the store, heartbeats in
// the background every SessionTTL/3, hands out events with session-scoped
// delivery tags, settles them (acks before nacks) and detaches on Close,
// which puts every event it did not settle back in the queue.
//
// Next and Settle may be called from different goroutines; Next must not
// be called concurrently with itself.
//
// Every event is checked against the principal's right to read its type
// (auth.Principal.CanReceive), in the store, before it is handed out
// (leasestore.PullParams.Withhold). An event the principal may not read
// is never handed to its sessions: it waits in the queue, its delivery
// count, due time and age as they were, for a session that may read it,
// while the events after it flow. Such a session settles nothing of it
// and moves it toward no limit, however often it pulls: no principal's
// rights can destroy, delay or dead-letter another's events
// (docs/limits.md, "Events a principal may not read").
//
// A poison event — one no transport can deliver: not a stored CloudEvent,
// or a message breaking the publish rules (invalid UTF-8, nesting past
// MaxMessageDepth) — is logged and moved to the dead-letter queue at once
// (leasestore.Store.Reject, reason DELIVERY_LIMIT), within the Next call
// that pulled it: it never reaches a client, never ends a stream, and
// never comes back.
//
// Errors from Next and Settle: herr.NotFound when the queue is gone
// (deleted, or reaped under the stream); a *ConsumerCancelledError
// (herr.Internal, ConsumerCancelledMessage) when the session was taken
// away while the queue is intact; the store's or broker's errors
// otherwise.
type Stream struct {
	svc     *Service
	p       *auth.Principal
	kind    StreamKind
	queue   string // consumer id: the queue id or the reconnect token
	session string
	created bool
	src     *streamSource
	// ackTimeout is the visibility of the stream's leases: the queue's
	// ack_timeout, else the deployment's.
	ackTimeout time.Duration

	life   context.Context // done once the session is lost or closed
	cancel context.CancelFunc
	hbDone chan struct{}
	// sessionClosed ends the session's count in the open-sessions metric
	// (nil before it is counted).
	sessionClosed func()

	mu       sync.Mutex
	err      error // why the session was lost
	closed   bool
	nextTag  int64
	tags     map[int64]leasestore.EventRef
	settled  chan struct{} // closed and replaced when tags shrink
	closeErr error
	// batcher settles what SettleAsync takes, grouped (see
	// leasestore.Batcher).
	batcher *leasestore.Batcher

	// hq, when set, is the hub queue the stream reads from memory (see
	// docs/streams-at-scale.md), and hubTags its unsettled events by tag;
	// src, batcher and tags are then unused.
	hq      *hubQueue
	hubTags map[int64]hubEntry
}

// OpenStream opens a stream session (see Stream).
//
// Durable: needs consume-durable-queues; QueueID must pass ValidateQueueID
// (herr.InvalidArgument, before any backend call); an unknown queue is
// herr.NotFound.
//
// NonDurable: needs at least one receive:PATTERN right. Without a token a
// fresh queue is created with FilterGroups (validated, herr.InvalidArgument),
// owned by p (see CheckQueueOwner). A token must pass
// ValidateReconnectToken; one that names no live non-durable queue is
// herr.NotFound. A token alone resumes the queue, whoever presents it:
// clients share a token to split a queue's events, and every event is
// checked against the reader's own receive rights (see Stream). With
// FilterUpdate the queue's filters move from PreviousFilterGroups to
// FilterGroups (compare-and-set as in UpdateQueueFilters; a mismatch is
// herr.InvalidArgument naming previous_filter_groups), unless it already
// has FilterGroups; only the queue's owner or an administrator may ask
// for that, anyone else gets herr.PermissionDenied with the queue left as
// it is (CheckQueueOwner).
//
// Past StreamConfig.MaxOpening opens in progress at once it fails at
// once with *OpensShedError (herr.Unavailable with a Retry-After).
func (s *Service) OpenStream(ctx context.Context, p *auth.Principal, r StreamRequest) (*Stream, error) {
	if err := s.beginOpen(ctx); err != nil {
		return nil, err
	}
	defer s.endOpen()
	if h := s.hub.Load(); h != nil && r.Kind == NonDurable {
		st, err := h.openStream(ctx, p, r)
		if !errors.Is(err, errNotHubQueue) {
			return st, err
		}
		// A queue served from the store: made without a hub, or shared.
	}
	c, created, err := s.streamQueue(ctx, p, r)
	if err != nil {
		return nil, err
	}
	st := &Stream{
		svc: s, p: p, kind: r.Kind, queue: c.ID, session: uuid.NewString(), created: created, ackTimeout: s.ackTimeout(c),
		tags: map[int64]leasestore.EventRef{}, settled: make(chan struct{}),
		hbDone: make(chan struct{}),
		src: &streamSource{
			svc: s, queue: c.ID, sub: c.Subscription, groups: c.Filters, wait: s.cfg.Streams.PollWait,
		},
	}
	if err := s.cfg.Store.Attach(ctx, st.queue, st.session, s.cfg.Streams.SessionTTL); err != nil {
		return nil, st.sessionErr(err)
	}
	s.takeInOnAttach(ctx, c)
	st.life, st.cancel = context.WithCancel(context.WithoutCancel(ctx))
	st.batcher = s.cfg.Store.NewBatcher(st.queue, st.settledAsync)
	st.sessionClosed = telemetry.SessionOpened(st.life, r.Kind.telemetryName())
	st.src.async = newAsyncReceiver(st.life)
	go st.heartbeat()
	return st, nil
}

// streamQueue finds or makes the queue a stream request names.
func (s *Service) streamQueue(ctx context.Context, p *auth.Principal, r StreamRequest) (*leasestore.Consumer, bool, error) {
	if r.Kind == Durable {
		if err := p.Require(auth.PermConsumeDurableQueues); err != nil {
			return nil, false, err
		}
		if err := ValidateQueueID(r.QueueID); err != nil {
			return nil, false, err
		}
		c, err := s.getQueue(ctx, r.QueueID)
		return c, false, err
	}
	if !p.CanReceiveAny() {
		return nil, false, herr.New(herr.PermissionDenied, "a %sPATTERN permission is required to consume events", auth.PermReceivePrefix)
	}
	if err := r.FilterGroups.Validate("filter_groups"); err != nil {
		return nil, false, err
	}
	if r.ReconnectToken == "" {
		c, err := s.createConsumer(ctx, consumerSpec{
			// logredact recognizes this shape, and cuts it out of every
			// log line.
			id: logredact.TokenPrefix + uuid.NewString(), typ: leasestore.TypeNonDurableQueue, subPrefix: "herald-nd-",
			groups: r.FilterGroups, owner: p.ID,
		})
		return c, err == nil, err
	}
	field := r.TokenField
	if field == "" {
		field = "reconnect_token"
	}
	if err := ValidateReconnectToken(field, r.ReconnectToken); err != nil {
		return nil, false, err
	}
	c, err := s.cfg.Store.GetConsumer(ctx, r.ReconnectToken)
	if herr.CodeOf(err) == herr.NotFound || (err == nil && c.Type != leasestore.TypeNonDurableQueue) {
		return nil, false, errTokenNotFound(field)
	}
	if err != nil {
		return nil, false, err
	}
	if r.FilterUpdate {
		if err := CheckQueueOwner(p, c); err != nil {
			return nil, false, err
		}
		if err := r.PreviousFilterGroups.Validate("previous_filter_groups"); err != nil {
			return nil, false, err
		}
		if err := s.setFilters(ctx, c, "previous_filter_groups", r.PreviousFilterGroups, r.FilterGroups); err != nil {
			return nil, false, err
		}
		c.Filters = r.FilterGroups
	}
	return c, false, nil
}

func errTokenNotFound(field string) error {
	return herr.New(herr.NotFound, "the %s names no live queue (a non-durable queue lives only for the reconnect grace window after its last consumer left): start a fresh stream with filter_groups and no token", field)
}

// QueueID returns the queue the stream reads: the durable queue's id, or
// for a non-durable stream its reconnect token.
func (st *Stream) QueueID() string { return st.queue }

// Created reports whether opening the stream created its queue (a fresh
// non-durable stream).
func (st *Stream) Created() bool { return st.created }

// Session returns the session id the stream is attached as.
func (st *Stream) Session() string { return st.session }

// Done is closed once the session is lost (see Err) or closed.
func (st *Stream) Done() <-chan struct{} { return st.life.Done() }

// Err returns why the session was lost, or nil while it is attached.
func (st *Stream) Err() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// fail records the first reason the session was lost and wakes Next.
func (st *Stream) fail(err error) {
	st.mu.Lock()
	if st.err == nil && !st.closed {
		st.err = err
	}
	st.mu.Unlock()
	st.cancel()
}

// sessionErr translates a store error about the session; see sessionErr.
func (st *Stream) sessionErr(err error) error { return sessionErr(st.kind, st.queue, err) }

// sessionErr translates a store error about a session of kind on queue: a
// queue that is gone is herr.NotFound; a session taken away (the store's
// herr.FailedPrecondition) is a *ConsumerCancelledError. Streams and
// stateless sessions share it.
func sessionErr(kind StreamKind, queue string, err error) error {
	switch herr.CodeOf(err) {
	case herr.NotFound:
		if kind == Durable {
			return errQueueNotFound(queue)
		}
		return herr.Wrap(herr.NotFound, redactCause(kind, queue, err), "the non-durable queue is gone: start a fresh stream with filter_groups and no reconnect token")
	case herr.FailedPrecondition:
		return &ConsumerCancelledError{Err: redactCause(kind, queue, err)}
	}
	return err
}

// redactCause keeps a store error as the cause of a stream error for the
// logs, with a non-durable queue's id — its reconnect token — cut out of
// the text (the store's messages quote consumer ids).
func redactCause(kind StreamKind, queue string, err error) error {
	if kind != NonDurable {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), queue, redactQueue(kind, queue)))
}

// heartbeat re-attaches every SessionTTL/3 until the stream ends. A
// failure that says the session or the queue is gone ends the stream;
// others (a store briefly unavailable) are retried at the next beat.
func (st *Stream) heartbeat() {
	defer close(st.hbDone)
	ttl := st.svc.cfg.Streams.SessionTTL
	t := time.NewTicker(max(ttl/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-st.life.Done():
			return
		case <-t.C:
		}
		err := st.svc.cfg.Store.Attach(st.life, st.queue, st.session, ttl)
		switch herr.CodeOf(err) {
		case herr.NotFound, herr.FailedPrecondition:
			if err != nil {
				st.fail(st.sessionErr(err))
				return
			}
		}
		if err != nil && st.life.Err() == nil {
			st.svc.cfg.Logger.Warn("stream heartbeat failed", queueAttr(st.kind, st.queue), errAttr(st.kind, st.queue, err))
		}
	}
}

// maxPullFailures is how many retryable pull failures in a row end a
// stream.
const maxPullFailures = 5

// Next blocks until it can hand out at least one event, and returns up to
// StreamConfig.Batch of them. It waits while the session holds
// MaxUnsettled unsettled events. It returns ctx's error when ctx ends, and
// the session's error (see Stream) when the session is lost.
func (st *Stream) Next(ctx context.Context) ([]Delivery, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(st.life, cancel)
	defer stop()
	if st.hq != nil {
		return st.hubNext(ctx)
	}
	cfg := st.svc.cfg.Streams
	failures := 0
	for {
		if err := st.check(ctx); err != nil {
			return nil, err
		}
		room := st.room(ctx)
		if room == 0 {
			continue // check says why the wait ended
		}
		st.src.async.begin()
		wh := newWithholder(st.p)
		leases, err := st.svc.cfg.Store.PullEvents(ctx, wh.params(leasestore.PullParams{
			Consumer: st.queue, Worker: st.session, Limit: min(cfg.Batch, room),
			Visibility: st.ackTimeout, Source: st.src,
		}))
		if err != nil {
			var full *leasestore.WindowFullError
			if errors.As(err, &full) {
				// The queue's window is full of other sessions' events:
				// wait for them to settle.
				_ = sleep(ctx, cfg.PollWait)
				continue
			}
			if cerr := st.check(ctx); cerr != nil {
				return nil, cerr
			}
			if failures++; herr.Retryable(err) && failures < maxPullFailures {
				// A backend hiccup (a lost race, a brief outage) does not
				// end the stream.
				_ = sleep(ctx, cfg.PollWait)
				continue
			}
			return nil, st.sessionErr(err)
		}
		failures = 0
		out, poison := st.deliveries(wh, leases)
		if len(poison) > 0 {
			if err := st.svc.rejectPoison(ctx, st.queue, poison); err != nil {
				if cerr := st.check(ctx); cerr != nil {
					return nil, cerr
				}
				return nil, st.sessionErr(err)
			}
		}
		if len(out) > 0 {
			streamDelivered(ctx, st.kind, out)
			return out, nil
		}
	}
}

// check returns the session's error, else ctx's.
func (st *Stream) check(ctx context.Context) error {
	if err := st.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if closed {
		return herr.New(herr.Canceled, "the stream is closed")
	}
	return ctx.Err()
}

// room waits until the session holds fewer than MaxUnsettled unsettled
// events and returns how many more it may take; 0 when ctx ended first.
func (st *Stream) room(ctx context.Context) int {
	for {
		st.mu.Lock()
		n := st.svc.cfg.Streams.MaxUnsettled - len(st.tags) - len(st.hubTags)
		wake := st.settled
		st.mu.Unlock()
		if n > 0 {
			return n
		}
		select {
		case <-ctx.Done():
			return 0
		case <-wake:
		}
	}
}

// deliveries tags the events of leases for the client and returns the
// refs of the poison ones, to be dead-lettered (see Stream); wh is the
// pull's withholder (nil: none).
func (st *Stream) deliveries(wh *withholder, leases []*leasestore.Lease) (out []Delivery, poison []leasestore.EventRef) {
	out, poison = st.svc.leaseDeliveries(st.p, wh, st.kind, st.queue, leases)
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range out {
		st.nextTag++
		st.tags[st.nextTag] = out[i].Ref
		out[i].Tag = st.nextTag
	}
	return out, poison
}

// Ack acknowledges tags; see Settle.
func (st *Stream) Ack(ctx context.Context, tags ...int64) (SettleReport, error) {
	return st.Settle(ctx, tags, nil)
}

// Nack hands tags back for immediate redelivery; see Settle.
func (st *Stream) Nack(ctx context.Context, tags ...int64) (SettleReport, error) {
	return st.Settle(ctx, nil, tags)
}

// Reject moves the events of tags to the dead-letter queue at once
// (reason DELIVERY_LIMIT), as Next does with a poison event: for an event
// the transport found it cannot encode, which a nack would bring back to
// every stream until its delivery limit (twenty failed sends and as many
// error lines for one event). It returns how many events it moved; a tag
// the session does not hold is skipped. Errors are the store's; the tags
// then stay unsettled (a retry rejects them, or the session's end hands
// them back).
func (st *Stream) Reject(ctx context.Context, tags ...int64) (int, error) {
	st.mu.Lock()
	refs, _, taken, _ := takeTags(st.tags, tags, nil)
	st.mu.Unlock()
	if len(refs) == 0 {
		return 0, nil
	}
	n, err := st.svc.cfg.Store.Reject(ctx, st.queue, refs, leasestore.ReasonDeliveryLimit)
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		if herr.CodeOf(err) != herr.NotFound {
			for tag, ref := range taken {
				st.tags[tag] = ref
			}
		}
		return 0, st.sessionErr(err)
	}
	close(st.settled)
	st.settled = make(chan struct{})
	return n, nil
}

// Settle acknowledges acks and hands nacks back for immediate redelivery,
// acks first: a tag in both is acknowledged (the notifications API,
// ConsumeDurableEventsWithAcks). A tag the session does not know is
// skipped and counted; it never ends the stream. A nacked event's delivery
// count grows when it is delivered again. When the store cannot be reached
// the tags stay unsettled and the call may be repeated.
func (st *Stream) Settle(ctx context.Context, acks, nacks []int64) (SettleReport, error) {
	return st.SettleDelayed(ctx, acks, nacks, nil)
}

// SettleDelayed is Settle whose nacked events, when delay is set, are not
// delivered again before *delay has passed (0–MaxNackDelay, counted from
// the settlement; the WebSocket nack frame's delay), in place of the
// queue's retry policy; other events flow meanwhile, and once due the
// events go ahead of new work. A delay out of range is herr.OutOfRange
// and settles nothing (the tags stay unsettled).
func (st *Stream) SettleDelayed(ctx context.Context, acks, nacks []int64, delay *time.Duration) (SettleReport, error) {
	if delay != nil && (*delay < 0 || *delay > MaxNackDelay) {
		return SettleReport{}, herr.New(herr.OutOfRange, "delay must be between 0 and %d seconds", int(MaxNackDelay/time.Second))
	}
	if st.hq != nil {
		// A hub queue applies no delay: a nacked event goes back at once
		// (the notifications API's own rule for nacks).
		return st.hubSettle(acks, nacks), nil
	}
	st.mu.Lock()
	ackRefs, nackRefs, taken, rep := takeTags(st.tags, acks, nacks)
	st.mu.Unlock()
	if len(taken) == 0 {
		return rep, nil
	}
	defer func() {
		if len(nackRefs) > 0 {
			// After the store requeued them: the waiting pull returns
			// and the next one finds them (stream_wait.go).
			st.src.async.nacked()
		}
	}()
	rep, err := st.svc.settleRefs(ctx, st.kind, st.queue, ackRefs, nackRefs, delay, rep)
	if err != nil {
		if herr.CodeOf(err) != herr.NotFound {
			// Put them back so that a retry settles them.
			st.mu.Lock()
			for tag, ref := range taken {
				st.tags[tag] = ref
			}
			st.mu.Unlock()
		}
		return SettleReport{}, err
	}
	st.mu.Lock()
	close(st.settled)
	st.settled = make(chan struct{})
	st.mu.Unlock()
	return rep, nil
}

// Extend keeps the session's unsettled events of tags with it until d
// from now, past the queue's ack timeout (the WebSocket extend frame;
// leasestore.Store.ExtendEvents): they are not delivered to anyone else
// before then unless the session ends. Each event's time from delivery is
// capped at MaxExtendedLife; a tag past it is left as it was and counted
// in Capped. The tags stay unsettled. A tag the session does not hold is
// skipped, and so is one whose event was delivered to someone else since
// (its ack timeout passed first). d must be at least a millisecond
// (herr.OutOfRange); the WebSocket frame checks 1–600 s. Store errors are
// as Settle's; the call may be repeated.
func (st *Stream) Extend(ctx context.Context, tags []int64, d time.Duration) (ExtendReport, error) {
	if st.hq != nil {
		// A hub queue's events stay with the stream until it settles
		// them or ends: there is no ack timeout to extend.
		return ExtendReport{Extended: len(tags)}, nil
	}
	st.mu.Lock()
	refs, rep := tagRefs(st.tags, tags)
	st.mu.Unlock()
	return st.svc.extendRefs(ctx, st.kind, st.queue, refs, d, rep)
}

// SettleAsync is Settle for transports that send no answer per settlement
// (the gRPC ack stream): it takes tags out of the session at once and
// hands them to the session's leasestore.Batcher, which writes what
// arrives together in one store call. A tag the session does not know is
// ignored. A group that fails ends the session with its error (the events
// stay unsettled and come back after their visibility, a duplicate at
// most). Close waits for the groups in flight before it detaches.
func (st *Stream) SettleAsync(ctx context.Context, acks, nacks []int64) {
	if st.hq != nil {
		st.hubSettle(acks, nacks)
		return
	}
	st.mu.Lock()
	ackRefs, nackRefs, taken, _ := takeTags(st.tags, acks, nacks)
	if len(taken) > 0 {
		close(st.settled)
		st.settled = make(chan struct{})
	}
	st.mu.Unlock()
	if len(taken) > 0 {
		st.batcher.Add(ctx, ackRefs, nackRefs)
	}
}

// settledAsync is the session's report of one group of SettleAsync.
func (st *Stream) settledAsync(res leasestore.SettleResult, err error) {
	if err != nil {
		st.fail(st.sessionErr(err))
		return
	}
	if res.Nacked > 0 {
		st.src.async.nacked() // see Settle
	}
}

// Unsettled returns how many delivered events the session holds unsettled.
func (st *Stream) Unsettled() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.tags) + len(st.hubTags)
}

// Close ends the session: it stops the heartbeat and detaches, which puts
// every event the session did not settle back in the queue, to be
// delivered again (with a higher delivery count) to the next session.
// Close is idempotent and runs even when ctx is already done.
func (st *Stream) Close(ctx context.Context) error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return st.closeErr
	}
	st.closed = true
	st.tags = map[int64]leasestore.EventRef{}
	st.mu.Unlock()
	if st.sessionClosed != nil {
		st.sessionClosed()
	}
	st.cancel()
	if st.hq != nil {
		st.hubClose()
		return nil
	}
	<-st.hbDone
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Settlements in flight go first: detaching before them would hand
	// acknowledged events to the next session again.
	_ = st.batcher.Wait(ctx)
	if st.src.sub == "" {
		// Nothing received from a broker (a shared hub queue).
	} else if err := st.src.async.release(ctx, st.svc.cfg.Broker, st.src.sub); err != nil && herr.CodeOf(err) != herr.NotFound {
		// They come back once the broker's ack deadline passes.
		st.svc.cfg.Logger.Warn("stream could not hand received events back to the broker", queueAttr(st.kind, st.queue), errAttr(st.kind, st.queue, err))
	}
	err := st.svc.cfg.Store.Detach(ctx, st.queue, st.session)
	switch herr.CodeOf(err) {
	case herr.NotFound, herr.FailedPrecondition:
		err = nil // the queue or the session is gone already
	}
	if err != nil {
		st.svc.cfg.Logger.Warn("stream detach failed; its events return once the session TTL lapses", queueAttr(st.kind, st.queue), errAttr(st.kind, st.queue, err))
	}
	st.mu.Lock()
	st.closeErr = err
	st.mu.Unlock()
	return err
}

// streamSource feeds PullEvents from the queue's broker subscription. Like
// brokerSource it re-checks the queue's filters, and events that fail
// them are acked at the broker and never delivered; before it drops one
// it re-reads the queue's filters, so an event a filter update has just
// admitted is never lost to a session that started on the old filters.
// Claim-check references of the events that pass are resolved like
// brokerSource's.
type streamSource struct {
	svc   *Service
	queue string
	sub   string
	wait  time.Duration
	// async, when set (a Stream's source), makes the broker wait
	// interruptible by a nack (stream_wait.go); nil: receive blocks.
	async *asyncReceiver

	mu     sync.Mutex
	groups filter.Groups
}

func (s *streamSource) Receive(ctx context.Context, max int) ([]leasestore.Incoming, error) {
	wait := s.wait
	if s.sub == "" {
		// A shared hub queue: its home writes its events into the store,
		// where the pull finds them; there is no subscription to wait on.
		_ = sleep(ctx, wait)
		return nil, nil
	}
	var msgs []*pubsubx.Message
	var err error
	if s.async != nil {
		msgs, err = s.async.receive(ctx, s.svc.cfg.Broker, s.sub, max, wait)
	} else {
		msgs, err = s.svc.cfg.Broker.Receive(ctx, s.sub, pubsubx.ReceiveParams{Max: max, Wait: wait})
	}
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return nil, herr.Wrap(herr.NotFound, err, "the queue's subscription is gone")
		}
		return nil, brokerErr(err)
	}
	s.mu.Lock()
	groups := s.groups
	s.mu.Unlock()
	var match, skip []*pubsubx.Message
	refreshed := false
	for _, m := range msgs {
		ok := groups.Match(m.EventType(), m.ResourceID())
		if !ok && !refreshed {
			refreshed = true
			if c, err := s.svc.cfg.Store.LookupConsumer(ctx, s.queue); err == nil {
				s.mu.Lock()
				// Unless Stream.UpdateFilters set newer groups meanwhile.
				if SameGroups(s.groups, groups) {
					s.groups = c.Filters
				}
				groups = s.groups
				s.mu.Unlock()
				ok = groups.Match(m.EventType(), m.ResourceID())
			} else {
				ok = true // cannot tell: deliver rather than drop
			}
		}
		if ok {
			match = append(match, m)
		} else {
			skip = append(skip, m)
		}
	}
	out, skip, err := s.svc.resolveAll(ctx, s.sub, match, skip)
	if err != nil {
		return nil, err
	}
	if len(skip) > 0 {
		if err := s.svc.cfg.Broker.Ack(ctx, s.sub, skip); err != nil {
			return nil, brokerErr(err)
		}
	}
	return out, nil
}

func (s *streamSource) Settle(ctx context.Context, in []leasestore.Incoming, taken int) error {
	if s.sub == "" {
		return nil
	}
	return (&brokerSource{broker: s.svc.cfg.Broker, sub: s.sub}).Settle(ctx, in, taken)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
