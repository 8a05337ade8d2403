package delivery

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

// errNotHubQueue says a non-durable queue is served from the store, not
// by a hub: one made by a process without a hub (the API Gateway
// WebSocket bridge), or a shared one. OpenStream then serves it as before.
var errNotHubQueue = errors.New("not a hub queue")

// hubDeliveryLimit is how often a hub queue hands out one event before it
// drops it: an event that keeps ending the streams that take it.
const hubDeliveryLimit = leasestore.DefaultDeliveryLimit

// openStream serves a non-durable stream from the hub (see OpenStream).
func (h *Hub) openStream(ctx context.Context, p *auth.Principal, r StreamRequest) (*Stream, error) {
	if !p.CanReceiveAny() {
		return nil, herr.New(herr.PermissionDenied, "a %sPATTERN permission is required to consume events", auth.PermReceivePrefix)
	}
	if err := r.FilterGroups.Validate("filter_groups"); err != nil {
		return nil, err
	}
	if err := h.waitReady(ctx); err != nil {
		return nil, err
	}
	s := h.svc
	if r.ReconnectToken == "" {
		c, err := s.cfg.Store.CreateConsumer(ctx, leasestore.Consumer{
			ID: "nd-" + uuid.NewString(), Type: leasestore.TypeNonDurableQueue, Filters: r.FilterGroups,
			Home: h.cfg.ProcessID, CreatedAt: s.cfg.Now(), Owner: p.ID,
			MessageTTL: s.cfg.Streams.MessageTTL, MaxLength: s.cfg.Streams.MaxLength,
		})
		if err != nil {
			return nil, err
		}
		q := newHubQueue(h, c)
		if err := h.register(q); err != nil {
			return nil, err
		}
		err = h.cover(ctx, q.groups)
		var st *Stream
		if err == nil {
			st, err = h.attach(ctx, q, p, true)
		}
		if err != nil {
			h.unregister(q)
			_, _ = s.cfg.Store.DeleteIfHome(context.WithoutCancel(ctx), c.ID, h.cfg.ProcessID)
		}
		return st, err
	}
	field := r.TokenField
	if field == "" {
		field = "reconnect_token"
	}
	if err := ValidateReconnectToken(field, r.ReconnectToken); err != nil {
		return nil, err
	}
	if q := h.local(r.ReconnectToken); q != nil {
		q.mu.Lock()
		ok := q.gone == nil && q.state == stateLive && !q.claiming
		q.mu.Unlock()
		if ok {
			if err := h.updateFilters(ctx, p, q, r); err != nil {
				return nil, err
			}
			return h.attach(ctx, q, p, false)
		}
	}
	c, err := s.cfg.Store.GetConsumer(ctx, r.ReconnectToken)
	if herr.CodeOf(err) == herr.NotFound || (err == nil && c.Type != leasestore.TypeNonDurableQueue) {
		return nil, errTokenNotFound(field)
	}
	if err != nil {
		return nil, err
	}
	if c.Home == "" || c.Shared {
		return nil, errNotHubQueue
	}
	if r.FilterUpdate {
		// Before the queue moves: a refused update changes nothing.
		if err := CheckQueueOwner(p, c); err != nil {
			return nil, err
		}
	}
	q, err := h.claim(ctx, c)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return nil, errTokenNotFound(field)
		}
		return nil, err
	}
	if err := h.updateFilters(ctx, p, q, r); err != nil {
		return nil, err
	}
	return h.attach(ctx, q, p, false)
}

// updateFilters applies r's filter update, if it has one, to q: the
// owner check and compare-and-set of OpenStream, then the record, then the
// hub's index.
func (h *Hub) updateFilters(ctx context.Context, p *auth.Principal, q *hubQueue, r StreamRequest) error {
	if !r.FilterUpdate {
		return nil
	}
	if err := r.PreviousFilterGroups.Validate("previous_filter_groups"); err != nil {
		return err
	}
	return h.setFilters(ctx, p, q, r.PreviousFilterGroups, r.FilterGroups)
}

// setFilters moves q's filters from previous to next (compare-and-set: a
// queue that has next already succeeds), if p may (CheckQueueOwner).
func (h *Hub) setFilters(ctx context.Context, p *auth.Principal, q *hubQueue, previous, next filter.Groups) error {
	if err := CheckQueueOwner(p, q.consumer); err != nil {
		return err
	}
	q.mu.Lock()
	cur := q.groups
	q.mu.Unlock()
	if SameGroups(cur, next) {
		return nil
	}
	if !SameGroups(cur, previous) {
		return herr.InField(herr.New(herr.InvalidArgument, "previous_filter_groups does not match the filters the queue has"), "previous_filter_groups")
	}
	if _, err := h.svc.cfg.Store.SetFilters(ctx, q.id, next); err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return errHubQueueGone(q.id)
		}
		return err
	}
	h.setGroups(q, next)
	return h.cover(ctx, next)
}

// attach opens a stream on q.
func (h *Hub) attach(ctx context.Context, q *hubQueue, p *auth.Principal, created bool) (*Stream, error) {
	s := h.svc
	st := &Stream{
		svc: s, p: p, kind: NonDurable, queue: q.id, session: uuid.NewString(), created: created,
		hq: q, hubTags: map[int64]hubEntry{}, settled: make(chan struct{}), hbDone: make(chan struct{}),
	}
	close(st.hbDone) // no heartbeat: the process's heartbeat covers it
	st.life, st.cancel = context.WithCancel(context.WithoutCancel(ctx))
	q.mu.Lock()
	if q.gone != nil {
		err := q.gone
		q.mu.Unlock()
		st.cancel()
		return nil, err
	}
	q.streams[st] = struct{}{}
	q.detachedAt = time.Time{}
	q.mu.Unlock()
	st.sessionClosed = telemetry.SessionOpened(st.life, NonDurable.telemetryName())
	return st, nil
}

// claim takes queue c over from its home (docs/streams-at-scale.md): at
// once when the home is dead or released it, else by a notice the home
// answers at its next heartbeat (handOver). The queue is registered
// first, so that events published meanwhile wait for the stream, and the
// events the old home spilled come first. herr.NotFound when the queue
// went meanwhile; errNotHubQueue when it became shared.
func (h *Hub) claim(ctx context.Context, c *leasestore.Consumer) (*hubQueue, error) {
	q := newHubQueue(h, c)
	q.claiming = true
	// Events spilled by the old home may reach the queue besides its
	// own hub's until the settling window ends: remember what was
	// delivered meanwhile (prepend leaves those out).
	q.delivered = newIDRing(256)
	if err := h.register(q); err != nil {
		return nil, err
	}
	fail := func(err error) (*hubQueue, error) {
		h.unregister(q)
		return nil, err
	}
	if err := h.cover(ctx, q.groups); err != nil {
		return fail(err)
	}
	s := h.svc
	store := s.cfg.Store
	me := h.cfg.ProcessID
	// The home answers within a heartbeat; past two (and a margin for the
	// store) it counts as gone.
	deadline := time.Now().Add(2*h.cfg.Heartbeat + 2*time.Second)
	home, notified := c.Home, ""
	reread := func() error {
		cur, err := store.GetConsumer(ctx, c.ID)
		if err != nil {
			return err
		}
		if cur.Shared {
			return errNotHubQueue
		}
		home = cur.Home
		return nil
	}
	for range 100 {
		if home == me {
			break
		}
		alive := false
		if home != leasestore.ReleasedHome {
			proc, err := store.GetProcess(ctx, home)
			switch {
			case err == nil:
				alive = store.ProcessAlive(proc, s.cfg.Now())
			case herr.CodeOf(err) != herr.NotFound:
				return fail(err)
			}
		}
		if alive && time.Now().Before(deadline) {
			if notified != home {
				err := store.Notify(ctx, home, leasestore.Notice{Kind: leasestore.NoticeClaim, Queue: c.ID, From: me})
				if err != nil && herr.CodeOf(err) != herr.NotFound {
					return fail(err)
				}
				notified = home
			}
			if err := sleep(ctx, min(200*time.Millisecond, h.cfg.Heartbeat/4)); err != nil {
				return fail(err)
			}
			if err := reread(); err != nil {
				return fail(err)
			}
			continue
		}
		_, err := store.SetHome(ctx, c.ID, home, me)
		if err == nil {
			home = me
			break
		}
		if herr.CodeOf(err) != herr.Aborted {
			return fail(err)
		}
		if err := reread(); err != nil {
			return fail(err)
		}
	}
	if home != me {
		return fail(herr.New(herr.Aborted, "the queue keeps moving between processes; reconnect"))
	}
	if err := h.takeSpilled(ctx, q); err != nil {
		return fail(err)
	}
	q.mu.Lock()
	q.claiming = false
	// Its grace window starts now, should the stream that claimed it not
	// attach after all.
	q.detachedAt = s.cfg.Now()
	q.mu.Unlock()
	// The old home may still spill what was on its way to it for two of
	// its heartbeats: look again meanwhile.
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		// Nothing more comes from the old home after: forget the ids.
		defer func() {
			q.mu.Lock()
			q.delivered = nil
			q.mu.Unlock()
		}()
		for _, d := range []time.Duration{250 * time.Millisecond, time.Second, h.cfg.Heartbeat, h.cfg.Heartbeat, h.cfg.Heartbeat} {
			if sleep(h.ctx, d) != nil {
				return
			}
			if err := h.takeSpilled(h.ctx, q); err != nil {
				return
			}
		}
	}()
	return q, nil
}

// takeSpilled moves the events spilled into q's store backlog into q.
func (h *Hub) takeSpilled(ctx context.Context, q *hubQueue) error {
	in, err := h.svc.cfg.Store.TakeSpilled(ctx, q.id, leasestore.MaxInFlight)
	if err != nil {
		return err
	}
	evs := make([]*hubEvent, 0, len(in))
	for _, e := range in {
		ev, err := newHubEvent(e.Body)
		if err != nil {
			h.log(slog.LevelError, "hub-poison", "poison event: no transport can deliver it; non-durable queues drop it", "err", err)
			continue
		}
		if !e.PublishedAt.IsZero() {
			ev.published = e.PublishedAt
		}
		evs = append(evs, ev)
	}
	q.prepend(evs)
	return nil
}

// hubNext is Next for a stream served by the hub.
func (st *Stream) hubNext(ctx context.Context) ([]Delivery, error) {
	for {
		if err := st.check(ctx); err != nil {
			return nil, err
		}
		out, wake, err := st.hubTake(ctx)
		if err != nil || len(out) > 0 {
			return out, err
		}
		select {
		case <-ctx.Done():
		case <-st.life.Done():
		case <-wake:
		}
	}
}

// Pollable reports whether the stream can be driven with Poll: a
// non-durable stream served by the process's hub. Others are driven with
// Next alone.
func (st *Stream) Pollable() bool { return st.hq != nil }

// Poll is Next without blocking, for a transport that waits in a select of
// its own instead of in a goroutine per stream (an idle stream then costs
// one goroutine less): it returns what it can hand out now, or, with none,
// a channel that is closed when there may be more (events arrived, or
// unsettled events were settled); the caller also watches Done. Errors
// are Next's. It panics for a stream that is not Pollable.
func (st *Stream) Poll() ([]Delivery, <-chan struct{}, error) {
	if st.hq == nil {
		panic("delivery: Poll of a stream that is not served by the hub")
	}
	if err := st.check(context.Background()); err != nil {
		return nil, nil, err
	}
	return st.hubTake(st.life)
}

// hubTake hands out what the stream may take now, or returns the channel
// to wait on when there is nothing.
func (st *Stream) hubTake(ctx context.Context) ([]Delivery, <-chan struct{}, error) {
	q := st.hq
	st.mu.Lock()
	room := st.svc.cfg.Streams.MaxUnsettled - len(st.hubTags)
	settled := st.settled
	st.mu.Unlock()
	if room <= 0 {
		return nil, settled, nil
	}
	n := min(st.svc.cfg.Streams.Batch, room)
	ttl := st.svc.cfg.Streams.MessageTTL
	all := st.p.CanReceiveAll()
	now := st.svc.cfg.Now()
	q.mu.Lock()
	if q.gone != nil {
		err := q.gone
		q.mu.Unlock()
		return nil, nil, err
	}
	var taken []hubEntry
	keep := q.buf[:0]
	for _, e := range q.buf {
		switch {
		case len(taken) >= n:
			keep = append(keep, e)
		case ttl > 0 && !e.ev.published.IsZero() && now.Sub(e.ev.published) >= ttl:
			q.dropped++ // expired on its way out, as a queue's message TTL says
		case all || st.p.CanReceive(e.ev.event.EventType):
			e.count++
			taken = append(taken, e)
			q.delivered.add(e.ev.id)
		default:
			// Withheld: it waits for a stream of the queue that may
			// read it.
			keep = append(keep, e)
		}
	}
	clear(q.buf[len(keep):])
	q.buf = keep
	wake := q.wake
	q.mu.Unlock()
	if len(taken) == 0 {
		return nil, wake, nil
	}
	out := make([]Delivery, len(taken))
	st.mu.Lock()
	for i, e := range taken {
		st.nextTag++
		st.hubTags[st.nextTag] = e
		out[i] = Delivery{Tag: st.nextTag, DeliveryCount: e.count, Event: e.ev.event, Body: e.ev.body}
	}
	st.mu.Unlock()
	streamDelivered(ctx, st.kind, out)
	return out, nil, nil
}

// hubSettle settles tags of a hub stream: acked events are done, nacked
// ones go back to the front of the queue.
func (st *Stream) hubSettle(acks, nacks []int64) SettleReport {
	var rep SettleReport
	var back []int64
	st.mu.Lock()
	entries := make(map[int64]hubEntry, len(nacks))
	for _, t := range acks {
		if _, ok := st.hubTags[t]; ok {
			delete(st.hubTags, t)
			rep.Acked++
		} else {
			rep.Skipped++
		}
	}
	for _, t := range nacks {
		if e, ok := st.hubTags[t]; ok {
			delete(st.hubTags, t)
			entries[t] = e
			back = append(back, t)
			rep.Nacked++
		} else {
			rep.Skipped++
		}
	}
	if rep.Acked+rep.Nacked > 0 {
		close(st.settled)
		st.settled = make(chan struct{})
	}
	st.mu.Unlock()
	slices.Sort(back)
	es := make([]hubEntry, 0, len(back))
	for _, t := range back {
		es = append(es, entries[t])
	}
	st.hq.putBack(st.capDeliveries(es))
	return rep
}

// capDeliveries leaves out the events handed out hubDeliveryLimit times.
func (st *Stream) capDeliveries(es []hubEntry) []hubEntry {
	out := es[:0]
	for _, e := range es {
		if e.count >= hubDeliveryLimit {
			st.svc.cfg.Logger.Error("an event was handed out by a non-durable queue as often as its delivery limit allows; it is dropped", queueAttr(NonDurable, st.queue), "delivery_count", e.count)
			continue
		}
		out = append(out, e)
	}
	return out
}

// takeUnsettled takes the stream's unsettled events out of it, oldest
// first: a later settlement of their tags is skipped.
func (st *Stream) takeUnsettled() []hubEntry {
	st.mu.Lock()
	defer st.mu.Unlock()
	tags := make([]int64, 0, len(st.hubTags))
	for t := range st.hubTags {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	es := make([]hubEntry, 0, len(tags))
	for _, t := range tags {
		es = append(es, st.hubTags[t])
	}
	clear(st.hubTags)
	return es
}

// hubClose ends a hub stream: its unsettled events go back to the front
// of the queue, for its other streams or the next connection.
func (st *Stream) hubClose() {
	es := st.takeUnsettled()
	q := st.hq
	q.mu.Lock()
	delete(q.streams, st)
	if len(q.streams) == 0 {
		q.detachedAt = st.svc.cfg.Now()
	}
	q.mu.Unlock()
	q.putBack(st.capDeliveries(es))
}

// hubUpdateFilters is UpdateFilters for a hub stream.
func (st *Stream) hubUpdateFilters(ctx context.Context, previous, next filter.Groups) error {
	return st.hq.hub.setFilters(ctx, st.p, st.hq, previous, next)
}
