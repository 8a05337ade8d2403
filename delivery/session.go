package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Stateless sessions: the stream session of a transport that keeps
// nothing in memory between requests (the API Gateway WebSocket bridge,
// one Lambda invocation per client frame). What Stream keeps in memory —
// the session id, the delivery tags, the next tag — lives in a
// SessionState the caller stores (in a leasestore.Connection), and every
// call does one step: poll, tag, take, settle, close. See
// docs/streams-design.md, "Connection records and stateless sessions".

// SessionState is a stream session whose bookkeeping lives outside process
// memory. It is JSON-encodable (the API Gateway bridge stores it in a
// leasestore.Connection's Data); tag keys encode as decimal strings, which
// encoding/json decodes back into int64. Its size grows with Tags: about
// 70 bytes per unsettled tag, at most StreamConfig.MaxUnsettled of them.
//
// A SessionState is a value the caller owns; the methods here do not lock
// it. Two invocations that act on one connection at once each work on
// their own copy read from the store, and the store's conditional write of
// the connection record (herr.Aborted to the loser) decides whose copy is
// kept: the loser re-reads and re-applies its change (Tag, Take).
type SessionState struct {
	// Kind is the stream's kind: Durable (settled with tags) or NonDurable
	// (acknowledged once sent).
	Kind StreamKind `json:"kind"`
	// Queue is the consumer id the session reads: the durable queue's
	// queue_id, or a non-durable queue's reconnect token.
	Queue string `json:"queue"`
	// Session is the session id attached to Queue in the store (a UUID
	// OpenSession issues); one connection's only.
	Session string `json:"session"`
	// NextTag is the last delivery tag issued (0 before the first); tags
	// are 1, 2, 3, … per session.
	NextTag int64 `json:"next_tag"`
	// Tags maps the unsettled delivery tags of a durable session to the
	// leases they name. A non-durable session records none.
	Tags map[int64]leasestore.EventRef `json:"tags"`
}

// OpenedSession is what OpenSession returns.
type OpenedSession struct {
	// State is the new session's state (no tags yet), for the caller to
	// store.
	State *SessionState
	// Created says that opening it created the queue: a fresh non-durable
	// stream, whose reconnect token is State.Queue.
	Created bool
}

// OpenSession is OpenStream for stateless transports: the same checks,
// errors and queue creation (see OpenStream), then a new session attached
// to the queue with ttl (≤ 0: StreamConfig.SessionTTL, 30 s by default).
// It starts no goroutine: the caller heartbeats by calling PollSession at
// least once per ttl, and calls CloseSession when the client leaves.
//
// Errors (herr codes, as OpenStream): InvalidArgument, PermissionDenied,
// NotFound (unknown durable queue, or a reconnect token naming no live
// queue), ResourceExhausted (leasestore.MaxSessions attached), and the
// backends' errors.
func (s *Service) OpenSession(ctx context.Context, p *auth.Principal, r StreamRequest, ttl time.Duration) (OpenedSession, error) {
	c, created, err := s.streamQueue(ctx, p, r)
	if err != nil {
		return OpenedSession{}, err
	}
	st := &SessionState{Kind: r.Kind, Queue: c.ID, Session: uuid.NewString(), Tags: map[int64]leasestore.EventRef{}}
	if err := s.cfg.Store.Attach(ctx, st.Queue, st.Session, s.sessionTTL(ttl)); err != nil {
		return OpenedSession{}, sessionErr(st.Kind, st.Queue, err)
	}
	s.takeInOnAttach(ctx, c)
	return OpenedSession{State: st, Created: created}, nil
}

// sessionTTL returns ttl, or the configured SessionTTL when ttl ≤ 0.
func (s *Service) sessionTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return s.cfg.Streams.SessionTTL
	}
	return ttl
}

// check reports a state that cannot name a session (herr.InvalidArgument).
func (st *SessionState) check() error {
	if st == nil || st.Queue == "" || st.Session == "" || (st.Kind != Durable && st.Kind != NonDurable) {
		return herr.New(herr.InvalidArgument, "the session state is incomplete: open the session with OpenSession")
	}
	return nil
}

// TouchSession refreshes st's session (Attach with ttl; ttl ≤ 0 means the
// configured SessionTTL) without pulling: the heartbeat of a stateless
// transport on frames that are not polls (acks, nacks, pings), so that a
// client that only settles or pings keeps its session. Errors as
// PollSession's: herr.NotFound when the queue is gone, a
// *ConsumerCancelledError when the session is gone.
func (s *Service) TouchSession(ctx context.Context, st *SessionState, ttl time.Duration) error {
	if err := st.check(); err != nil {
		return err
	}
	if err := s.cfg.Store.Attach(ctx, st.Queue, st.Session, s.sessionTTL(ttl)); err != nil {
		return sessionErr(st.Kind, st.Queue, err)
	}
	return nil
}

// PollParams are the arguments of PollSession.
type PollParams struct {
	// Principal is whose rights the events are checked against.
	Principal *auth.Principal
	// State is the session, as OpenSession returned it and the caller
	// stored it; PollSession does not change it.
	State *SessionState
	// Limit is the most events to return: ≥ 1, capped at MaxPullLimit
	// (100) and, on a durable session, at the unsettled room.
	Limit int
	// Wait is the longest wait at the broker (≤ 0: none).
	Wait time.Duration
	// TTL is the session's new ttl (≤ 0: StreamConfig.SessionTTL).
	TTL time.Duration
}

// PollSession is one step of a stateless stream. It refreshes the session
// pp.State (Attach with pp.TTL, ≤ 0 meaning StreamConfig.SessionTTL: the
// heartbeat of a stateless transport, so the caller polls at least once
// per ttl), then pulls up to pp.Limit events for it, each leased for
// StreamConfig.AckTimeout. The limit must be ≥ 1 (else
// herr.InvalidArgument) and is capped at MaxPullLimit (100) and, for a
// durable session, at StreamConfig.MaxUnsettled less len(State.Tags), so
// a session never holds more than MaxUnsettled unsettled events (with no
// room it only heartbeats and returns none). It waits at most pp.Wait at
// the broker, and not at all when events wait for redelivery in the
// queue.
//
// It returns the deliveries with Ref set and Tag 0, and does not change
// st: the caller assigns tags with st.Tag on the state it then persists
// (re-read, if another invocation wrote it meanwhile) and only then sends
// the events. Events the principal may not read (no receive right for
// their type) are never handed to the session (they wait in the queue for
// one that may, their delivery count as it was), and poison events are
// dead-lettered, as Stream.Next does; neither is returned. No deliveries
// and a nil error mean nothing to hand out now (after the wait at the
// broker, also when the queue holds only events the principal may not
// read), or the queue's in-flight window (leasestore.MaxInFlight) is full
// of other sessions' events.
//
// Errors, as Stream.Next's: herr.NotFound when the queue is gone (deleted,
// or reaped); a *ConsumerCancelledError (herr.Internal with
// ConsumerCancelledMessage) when the session is gone (closed, evicted, or
// its ttl lapsed without a poll: its events went back to the queue) — the
// client reconnects; herr.InvalidArgument
// for a bad limit or state; retryable backend errors (herr.Retryable) as
// they are, after one retry.
func (s *Service) PollSession(ctx context.Context, pp PollParams) ([]Delivery, error) {
	p, st, limit, wait := pp.Principal, pp.State, pp.Limit, pp.Wait
	if err := st.check(); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, herr.New(herr.InvalidArgument, "limit must be at least 1")
	}
	if err := s.cfg.Store.Attach(ctx, st.Queue, st.Session, s.sessionTTL(pp.TTL)); err != nil {
		return nil, sessionErr(st.Kind, st.Queue, err)
	}
	n := min(limit, MaxPullLimit)
	if st.Kind == Durable {
		n = min(n, s.cfg.Streams.MaxUnsettled-len(st.Tags))
	}
	if n <= 0 {
		return nil, nil
	}
	c, err := s.cfg.Store.LookupConsumer(ctx, st.Queue) // Requeued is a bound: enough to skip the broker's wait
	if err != nil {
		return nil, sessionErr(st.Kind, st.Queue, err)
	}
	wait = max(wait, 0)
	deadline := time.Now().Add(wait)
	src := &streamSource{svc: s, queue: c.ID, sub: c.Subscription, groups: c.Filters, wait: wait}
	// Redeliveries go first: do not wait for new events. If the pull finds
	// none it may take (they are all events p may not read), it waits
	// after all (below).
	skipped := c.Requeued > 0
	if skipped {
		src.wait = 0
	}
	retried := false
	for {
		wh := newWithholder(p)
		leases, err := s.cfg.Store.PullEvents(ctx, wh.params(leasestore.PullParams{
			Consumer: st.Queue, Worker: st.Session, Limit: n,
			Visibility: s.ackTimeout(c), Source: src,
		}))
		if err != nil {
			var full *leasestore.WindowFullError
			if errors.As(err, &full) {
				return nil, nil
			}
			if herr.Retryable(err) && !retried && ctx.Err() == nil {
				retried = true
				continue
			}
			return nil, sessionErr(st.Kind, st.Queue, err)
		}
		out, poison := s.leaseDeliveries(p, wh, st.Kind, st.Queue, leases)
		if len(poison) > 0 {
			if err := s.rejectPoison(ctx, st.Queue, poison); err != nil {
				return nil, sessionErr(st.Kind, st.Queue, err)
			}
		}
		if len(out) > 0 {
			streamDelivered(ctx, st.Kind, out)
			return out, nil
		}
		if len(leases) == 0 {
			if skipped && time.Now().Before(deadline) && ctx.Err() == nil {
				// The waiting events were all ones p may not read: wait
				// for new events as an idle session would, rather than
				// have the caller poll again at once.
				skipped = false
				src.wait = max(time.Until(deadline), 0)
				continue
			}
			return nil, nil
		}
		// Everything pulled was poison, now dead-lettered: pull again
		// within what is left of wait.
		src.wait = max(time.Until(deadline), 0)
	}
}

// rejectPoison dead-letters poison events at once, as if their delivery
// limit had passed (REASON_DELIVERY_LIMIT, the closest reason the
// notifications API has): handed back, they would fail every stream that
// took them until that limit.
func (s *Service) rejectPoison(ctx context.Context, queue string, poison []leasestore.EventRef) error {
	_, err := s.cfg.Store.Reject(ctx, queue, poison, leasestore.ReasonDeliveryLimit)
	return err
}

// leaseDeliveries turns single-event leases into deliveries (Tag 0) for
// principal p, applying Stream's rules (see Stream), and returns the refs
// of poison events, which no transport could deliver (not a stored
// CloudEvent, or a message that breaks the publish rules of
// Event.Validate: written before they were enforced, or by another
// writer), to be dead-lettered at once (see rejectPoison). wh is the
// withholder the leases were pulled with (nil: p may receive every type):
// it holds the events it decoded, so each is decoded once.
//
// The store hands p no event p may not read (leasestore.PullParams.Withhold,
// decided by wh on the same decoding). Should one come anyway (a caller
// that pulled without wh), it is not shown and not settled: it stays with
// the session until the session ends or its ack timeout passes.
func (s *Service) leaseDeliveries(p *auth.Principal, wh *withholder, kind StreamKind, queue string, leases []*leasestore.Lease) (out []Delivery, poison []leasestore.EventRef) {
	for _, l := range leases {
		ref := leasestore.EventRef{LeaseID: l.ID, Generation: l.Generation}
		if len(l.Events) == 0 {
			poison = append(poison, ref)
			continue
		}
		body := l.Events[0]
		// One decode serves both the rights check and the delivery: it is
		// the largest cost of a stream's push loop (docs/benchmarks.md).
		d := wh.decode(body)
		if d.err != nil {
			s.cfg.Logger.Error("poison event: no transport can deliver it; it goes to the dead-letter queue at once", queueAttr(kind, queue), "lease", l.ID, "delivery_count", l.Attempt, "err", d.err)
			poison = append(poison, ref)
			continue
		}
		if !p.CanReceive(d.ev.EventType) {
			s.cfg.Logger.Error("an event the principal may not read was pulled for it; it is not delivered", queueAttr(kind, queue), "lease", l.ID)
			continue
		}
		out = append(out, Delivery{DeliveryCount: l.Attempt, Event: d.ev, Body: body, Ref: ref})
	}
	return out, poison
}

// Tag assigns the next delivery tags (st.NextTag+1, +2, …) to ds, setting
// ds[i].Tag, and records them in st.Tags when the session is durable.
// Non-durable sessions get tags too (the client sees them) but records
// none: the caller acknowledges their events once sent, with
// AckDeliveries. Tag on a state re-read after a lost write simply assigns
// the tags again from that state's NextTag.
//
// Tag is idempotent for a durable session: a delivery whose Ref (lease id
// and generation) a tag of st.Tags already names gets that tag again, and
// no new one. So a caller that re-applies Tag to a state its own earlier
// write already changed (a conditional write that landed although the
// caller saw it fail) does not issue a second set of tags for the same
// events.
func (st *SessionState) Tag(ds []Delivery) {
	var byRef map[leasestore.EventRef]int64
	if st.Kind == Durable && len(st.Tags) > 0 {
		byRef = make(map[leasestore.EventRef]int64, len(st.Tags))
		for tag, ref := range st.Tags {
			byRef[ref] = tag
		}
	}
	for i := range ds {
		if tag, ok := byRef[ds[i].Ref]; ok {
			ds[i].Tag = tag
			continue
		}
		st.NextTag++
		ds[i].Tag = st.NextTag
		if st.Kind == Durable {
			if st.Tags == nil {
				st.Tags = map[int64]leasestore.EventRef{}
			}
			st.Tags[st.NextTag] = ds[i].Ref
		}
	}
}

// Take removes the tags of acks and nacks from st.Tags, acks first (a tag
// in both, or twice in one list, is taken once, as an ack), and returns the
// refs to acknowledge and to hand back, the tags taken with their refs
// (for Untake), and the session-side report: Acked and Nacked count the
// tags taken, Skipped the tags st does not hold (never issued, already
// settled, repeated, or from an earlier connection; the notifications API, "an unknown
// delivery tag is skipped"). The caller persists st, then calls
// SettleRefs; if that fails with anything but herr.NotFound it puts the
// tags back with Untake and persists again, so that a retry settles them.
func (st *SessionState) Take(acks, nacks []int64) (ackRefs, nackRefs []leasestore.EventRef, taken map[int64]leasestore.EventRef, rep SettleReport) {
	return takeTags(st.Tags, acks, nacks)
}

// Untake puts tags Take took back into st.Tags.
func (st *SessionState) Untake(taken map[int64]leasestore.EventRef) {
	if len(taken) > 0 && st.Tags == nil {
		st.Tags = map[int64]leasestore.EventRef{}
	}
	for tag, ref := range taken {
		st.Tags[tag] = ref
	}
}

// takeTags removes acks, then nacks, from tags; see SessionState.Take. It
// is Stream.Settle's first half too.
func takeTags(tags map[int64]leasestore.EventRef, acks, nacks []int64) (ackRefs, nackRefs []leasestore.EventRef, taken map[int64]leasestore.EventRef, rep SettleReport) {
	taken = map[int64]leasestore.EventRef{}
	for _, tag := range acks {
		if ref, ok := tags[tag]; ok {
			delete(tags, tag)
			taken[tag] = ref
			ackRefs = append(ackRefs, ref)
			rep.Acked++
		} else {
			rep.Skipped++
		}
	}
	for _, tag := range nacks {
		if ref, ok := tags[tag]; ok {
			delete(tags, tag)
			taken[tag] = ref
			nackRefs = append(nackRefs, ref)
			rep.Nacked++
		} else {
			rep.Skipped++
		}
	}
	return ackRefs, nackRefs, taken, rep
}

// SettleRefs settles what Take returned in the store, in one conditional
// write: ackRefs acknowledged, nackRefs handed back for immediate
// redelivery (their delivery count grows when delivered again), acks
// first. rep is Take's report; the result is the final one, where the
// store has the last word: a ref whose lease was handed to someone else
// since (an older generation: the session's ttl lapsed, or the event's ack
// timeout passed and it was redelivered) settled nothing and counts as
// Skipped. It does not refresh the session, and an ack commits even after
// the session is gone, as long as nobody was handed the event since. With
// nothing to settle it returns rep unchanged without a store call.
//
// Errors: herr.NotFound when the queue is gone (the tags are moot: do not
// put them back); herr.InvalidArgument for an incomplete st; the store's
// errors (put the tags back with Untake; the call may be repeated).
func (s *Service) SettleRefs(ctx context.Context, st *SessionState, ackRefs, nackRefs []leasestore.EventRef, rep SettleReport) (SettleReport, error) {
	return s.SettleRefsDelayed(ctx, st, ackRefs, nackRefs, nil, rep)
}

// SettleRefsDelayed is SettleRefs whose nacks, when delay is set, are not
// handed out again before *delay has passed (0–MaxNackDelay; the
// WebSocket nack frame's delay), in place of the queue's retry policy.
// A delay out of range is herr.OutOfRange and settles nothing (put the
// tags back).
func (s *Service) SettleRefsDelayed(ctx context.Context, st *SessionState, ackRefs, nackRefs []leasestore.EventRef, delay *time.Duration, rep SettleReport) (SettleReport, error) {
	if err := st.check(); err != nil {
		return SettleReport{}, err
	}
	if len(ackRefs)+len(nackRefs) == 0 {
		return rep, nil
	}
	return s.settleRefs(ctx, st.Kind, st.Queue, ackRefs, nackRefs, delay, rep)
}

// settleRefs settles refs on queue (nacks after delay when set) and
// corrects rep by what the store settled; store errors are mapped by
// sessionErr. Stream.Settle's second half too.
func (s *Service) settleRefs(ctx context.Context, kind StreamKind, queue string, ackRefs, nackRefs []leasestore.EventRef, delay *time.Duration, rep SettleReport) (_ SettleReport, err error) {
	ctx, end := startSettle(ctx)
	defer func() { end(&rep, err) }()
	if delay != nil && len(nackRefs) == 0 {
		delay = nil // nothing to delay
	}
	res, err := s.cfg.Store.SettleWith(ctx, queue, leasestore.SettleParams{Acks: ackRefs, Nacks: nackRefs, NackDelay: delay})
	if herr.CodeOf(err) == herr.OutOfRange {
		return SettleReport{}, err // the caller's delay, not the session's fault
	}
	if err != nil {
		return SettleReport{}, sessionErr(kind, queue, err)
	}
	// The store has the last word: a tag whose lease was reclaimed since
	// (an older generation) settled nothing.
	rep.Skipped += rep.Acked + rep.Nacked - res.Acked - res.Nacked
	rep.Acked, rep.Nacked = res.Acked, res.Nacked
	return rep, nil
}

// AckDeliveries acknowledges ds at once, by their Ref (the notifications API's
// non-durable streams: an event is acknowledged once sent). The caller
// sends first and acknowledges after, so a crash between leaves the
// events leased to the session, to be redelivered once it is gone — a
// duplicate, never a loss. A delivery whose lease was handed to someone
// else since is skipped by the store, silently.
//
// Errors: herr.NotFound when the queue is gone; herr.InvalidArgument for
// an incomplete st; the store's errors (the call may be repeated).
func (s *Service) AckDeliveries(ctx context.Context, st *SessionState, ds []Delivery) error {
	if err := st.check(); err != nil {
		return err
	}
	if len(ds) == 0 {
		return nil
	}
	refs := make([]leasestore.EventRef, len(ds))
	for i, d := range ds {
		refs[i] = d.Ref
	}
	if _, err := s.cfg.Store.Settle(ctx, st.Queue, refs, nil); err != nil {
		return sessionErr(st.Kind, st.Queue, err)
	}
	return nil
}

// CloseSession ends the session: it detaches it from its queue, which puts
// every event the session did not settle back in the queue, to be
// delivered again (delivery count +1) to the next session, and it empties
// st.Tags. It is idempotent: a queue that is gone (herr.NotFound) or a
// session already removed (herr.FailedPrecondition) is not an error. It
// runs even when ctx is already done (with a 10 s bound, as Stream.Close).
// A failure leaves the session to lapse after its ttl, when its events go
// back to the queue all the same.
//
// Errors: herr.InvalidArgument for an incomplete st; the store's errors.
func (s *Service) CloseSession(ctx context.Context, st *SessionState) error {
	if err := st.check(); err != nil {
		return err
	}
	st.Tags = map[int64]leasestore.EventRef{}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.cfg.Store.Detach(ctx, st.Queue, st.Session)
	switch herr.CodeOf(err) {
	case herr.NotFound, herr.FailedPrecondition:
		return nil
	}
	return err
}

// MaxNackDelay is the longest delay of a delayed nack
// (Stream.SettleDelayed, Service.SettleRefsDelayed): 12 hours, as a
// failed acknowledgement's retryAfter (leasestore.MaxRetryAfter).
const MaxNackDelay = leasestore.MaxRetryAfter

// ExtendReport says what an extension of delivery tags did.
type ExtendReport struct {
	// Extended counts the tags whose events stay with the session until
	// the new time.
	Extended int
	// Skipped counts the other tags: unknown to the session (never
	// issued, already settled, or from an earlier connection), or naming
	// an event that was delivered to someone else since (its ack timeout
	// passed first) or is being dead-lettered.
	Skipped int
	// Capped counts the tags left as they were because the new time would
	// pass MaxExtendedLife after the event was delivered.
	Capped int
}

// MaxExtendedLife caps how long one delivery of a stream event can be
// kept unsettled by extending it: 12 hours from its delivery, as a pull
// lease's life (leasestore.MaxLeaseLife).
const MaxExtendedLife = leasestore.MaxLeaseLife

// ExtendTags keeps the durable session's unsettled events of tags with it
// until d from now (Stream.Extend for the API Gateway bridge, whose state
// is persisted): it reads st, does not change it, and does not refresh
// the session. d must be at least a millisecond (the WebSocket frame
// checks 1–600 s). Errors: herr.NotFound when the queue is gone;
// herr.InvalidArgument for an incomplete st; herr.OutOfRange for d under
// a millisecond; the store's errors (the call may be repeated).
func (s *Service) ExtendTags(ctx context.Context, st *SessionState, tags []int64, d time.Duration) (ExtendReport, error) {
	if err := st.check(); err != nil {
		return ExtendReport{}, err
	}
	refs, rep := tagRefs(st.Tags, tags)
	return s.extendRefs(ctx, st.Kind, st.Queue, refs, d, rep)
}

// tagRefs returns the refs of the tags that tags holds, each once, and a
// report counting the others as skipped.
func tagRefs(held map[int64]leasestore.EventRef, tags []int64) ([]leasestore.EventRef, ExtendReport) {
	var rep ExtendReport
	var refs []leasestore.EventRef
	seen := make(map[int64]bool, len(tags))
	for _, tag := range tags {
		ref, ok := held[tag]
		if !ok || seen[tag] {
			rep.Skipped++
			continue
		}
		seen[tag] = true
		refs = append(refs, ref)
	}
	return refs, rep
}

// extendRefs extends refs on queue by d and adds the store's counts to
// rep. Stream.Extend's second half too.
func (s *Service) extendRefs(ctx context.Context, kind StreamKind, queue string, refs []leasestore.EventRef, d time.Duration, rep ExtendReport) (ExtendReport, error) {
	if d < time.Millisecond {
		return ExtendReport{}, herr.New(herr.OutOfRange, "an extension must be positive")
	}
	if len(refs) == 0 {
		return rep, nil
	}
	res, err := s.cfg.Store.ExtendEvents(ctx, queue, refs, d)
	if err != nil {
		return ExtendReport{}, sessionErr(kind, queue, err)
	}
	rep.Extended += res.Extended
	rep.Skipped += res.Skipped
	rep.Capped += res.Capped
	return rep, nil
}
