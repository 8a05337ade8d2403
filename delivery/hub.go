package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// HubConfig tunes a process's hub (docs/streams-at-scale.md). Zero fields
// take their defaults.
type HubConfig struct {
	// ProcessID names the process in the store and in its hub
	// subscription's name (default: a random UUID). Give each process its
	// own: two processes with one id would take each other's notices.
	ProcessID string
	// Heartbeat is how often the process writes its process record and
	// reads its notices (HERALD_PROCESS_HEARTBEAT; default
	// DefaultHubHeartbeat). A reconnect on another process waits for the
	// home's next heartbeat, so it bounds a hand-over's delay; the
	// store's ProcessTTL must be several of them.
	Heartbeat time.Duration
	// ReceiveWait is how long one receive of the hub subscription waits
	// at the broker when nothing is ready (default DefaultHubReceiveWait):
	// an idle process makes one broker call per wait.
	ReceiveWait time.Duration
	// Batch is the most events one receive takes (default 256).
	Batch int
	// QueueLimit is the most events a hub queue keeps in memory (default
	// leasestore.MaxInFlight, the most a queue holds in the store); a
	// queue's own MaxLength, when smaller, wins. Past it the oldest are
	// dropped, as a broker's drop-head overflow does.
	QueueLimit int
}

// Hub defaults.
const (
	DefaultHubHeartbeat   = 2 * time.Second
	DefaultHubReceiveWait = 20 * time.Second
	hubSubscriptionPrefix = "herald-hub-"
)

func (c *HubConfig) setDefaults() {
	if c.ProcessID == "" {
		c.ProcessID = uuid.NewString()
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHubHeartbeat
	}
	if c.ReceiveWait <= 0 {
		c.ReceiveWait = DefaultHubReceiveWait
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = leasestore.MaxInFlight
	}
}

// Hub serves the process's non-durable queues from memory, fed by one
// broker subscription (see docs/streams-at-scale.md). Service.StartHub
// makes it; once it runs, OpenStream serves non-durable streams through
// it.
type Hub struct {
	svc *Service
	cfg HubConfig
	sub string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	spillC chan struct{}
	// ready is closed once the process record exists (setUp); until then
	// no stream is served from the hub.
	ready chan struct{}
	// subs is the state of the hub subscription (hubsub.go).
	subs *hubSub

	mu      sync.RWMutex
	queues  map[string]*hubQueue
	byType  map[string]map[*hubQueue]struct{}
	anyType map[*hubQueue]struct{} // queues whose filters take every event
	closed  bool
}

// StartHub registers this process, creates its hub subscription and
// starts the hub's loops; from then on OpenStream serves non-durable
// streams from memory. Stop it with Hub.Close, which hands the process's
// queues back to the store. Only servers that outlive a request start
// one (the local adapter, Cloud Run); a Service without a hub serves every
// stream from the store, as the API Gateway WebSocket bridge does.
//
// The hub subscription and the process record are made in the background
// (a broker or store down at start does not stop the server): streams
// wait for them, up to a few seconds, then answer UNAVAILABLE.
func (s *Service) StartHub(ctx context.Context, cfg HubConfig) (*Hub, error) {
	cfg.setDefaults()
	h := &Hub{
		svc: s, cfg: cfg, sub: hubSubscriptionPrefix + cfg.ProcessID,
		spillC: make(chan struct{}, 1), subs: newHubSub(),
		queues: map[string]*hubQueue{}, byType: map[string]map[*hubQueue]struct{}{}, anyType: map[*hubQueue]struct{}{},
	}
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.ready = make(chan struct{})
	h.wg.Add(1)
	go h.run()
	if !s.hub.CompareAndSwap(nil, h) {
		h.cancel()
		h.wg.Wait()
		return nil, herr.New(herr.FailedPrecondition, "the service runs a hub already")
	}
	return h, nil
}

// run sets the hub up, then runs its loops until Close.
func (h *Hub) run() {
	defer h.wg.Done()
	if !h.setUp() {
		return
	}
	close(h.ready)
	h.wg.Add(4)
	go h.receiveLoop()
	go h.heartbeatLoop()
	go h.spillLoop()
	go h.subLoop()
}

// setUp registers the process, trying until it is done or the hub is
// closed: a store that is down when the server starts does not stop it,
// and streams wait for it (waitReady). It reports whether it succeeded.
// The hub subscription is made when the first queue needs it (hubsub.go).
func (h *Hub) setUp() bool {
	for failures := 0; ; failures++ {
		err := h.setUpOnce()
		if err == nil {
			return true
		}
		if h.ctx.Err() != nil {
			// Closed while setting up (a server that stops at once, as
			// herald serve on an address in use): nothing to warn about.
			return false
		}
		h.log(slog.LevelWarn, "hub-setup", "the stream hub cannot set up yet; non-durable streams wait for it", "err", err)
		if sleep(h.ctx, min(time.Duration(failures+1)*200*time.Millisecond, 5*time.Second)) != nil {
			return false
		}
	}
}

func (h *Hub) setUpOnce() error {
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	s := h.svc
	err := s.cfg.Store.RegisterProcess(ctx, leasestore.Process{ID: h.cfg.ProcessID, Subscription: h.sub})
	if err != nil && herr.CodeOf(err) != herr.AlreadyExists {
		return err
	}
	return nil
}

// hubReadyWait bounds how long a stream waits for the hub to set up.
const hubReadyWait = 5 * time.Second

// waitReady waits until the hub is set up: herr.Unavailable when it is
// not within hubReadyWait, ctx's error when ctx ends first.
func (h *Hub) waitReady(ctx context.Context) error {
	select {
	case <-h.ready:
		return nil
	default:
	}
	t := time.NewTimer(hubReadyWait)
	defer t.Stop()
	select {
	case <-h.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return herr.New(herr.Unavailable, "the message broker or the lease store is unavailable, so streams cannot open; retry with backoff")
	}
}

// ProcessID returns the id the hub registered its process with.
func (h *Hub) ProcessID() string { return h.cfg.ProcessID }

// Close stops the hub: it ends the streams it serves (their clients
// reconnect, to this process or another), writes every queue's waiting
// events to the store and releases the queue (leasestore.ReleasedHome),
// so that a reconnect anywhere takes it over with its backlog, and
// deletes the hub subscription (first, with a bound of its own, 3 s, even
// when ctx is done) and the process record. Events the broker
// delivers after that go to no queue of this process. ctx bounds the
// store and broker calls.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	qs := make([]*hubQueue, 0, len(h.queues))
	for _, q := range h.queues {
		qs = append(qs, q)
	}
	h.mu.Unlock()
	h.svc.hub.CompareAndSwap(h, nil)
	h.cancel()
	h.wg.Wait()
	select {
	case <-h.ready:
	default:
		return nil // never set up: nothing to hand back
	}
	h.subs.mu.Lock()
	exists := h.subs.exists
	h.subs.mu.Unlock()
	if exists {
		// First, and bounded on its own: the receive loop has stopped,
		// so the subscription serves nothing more, while the hand-backs
		// below take one store write per queue and may use up ctx (10,000
		// queues on PostgreSQL took more than 10 s, docs/benchmarks.md).
		// Left behind, it would collect every event of the deployment
		// until the reaper finds it. A broker that does not answer must
		// not use up the time the store's writes need either.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		h.svc.deleteSubscription(dctx, h.sub)
		cancel()
	}
	var errs []error
	for _, q := range qs {
		if err := h.release(ctx, q); err != nil {
			errs = append(errs, err)
		}
	}
	if err := h.svc.cfg.Store.DeleteProcess(ctx, h.cfg.ProcessID, time.Time{}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// release ends q's streams here and hands its events and the queue to the
// store (Close).
func (h *Hub) release(ctx context.Context, q *hubQueue) error {
	q.mu.Lock()
	state := q.state
	q.gone = &ConsumerCancelledError{Err: errors.New("the process serving the stream shut down")}
	q.signal()
	streams := q.streamList()
	q.mu.Unlock()
	// The streams' unsettled events go first: they are the oldest.
	var es []hubEntry
	for _, st := range streams {
		st.fail(q.gone)
		es = append(es, st.takeUnsettled()...)
	}
	q.mu.Lock()
	es = append(append(es, q.takeAll()...), q.spill...)
	q.spill = nil
	q.mu.Unlock()
	if err := h.spillEntries(ctx, q.id, es); err != nil && herr.CodeOf(err) != herr.NotFound {
		return err
	}
	if state == stateLeaving {
		return nil // another process has it
	}
	_, err := h.svc.cfg.Store.SetHome(ctx, q.id, h.cfg.ProcessID, leasestore.ReleasedHome)
	switch herr.CodeOf(err) {
	case herr.NotFound, herr.Aborted:
		return nil
	}
	return err
}

func (q *hubQueue) streamList() []*Stream {
	out := make([]*Stream, 0, len(q.streams))
	for st := range q.streams {
		out = append(out, st)
	}
	return out
}

// register adds q to the index, so that dispatch feeds it.
func (h *Hub) register(q *hubQueue) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return herr.New(herr.Unavailable, "the server is shutting down; reconnect")
	}
	if old, ok := h.queues[q.id]; ok && old != q {
		h.unindex(old)
	}
	h.queues[q.id] = q
	h.index(q)
	return nil
}

// index adds q under its groups' event types. Callers hold h.mu and q's
// groups must not change meanwhile.
func (h *Hub) index(q *hubQueue) {
	if len(q.groups) == 0 {
		h.anyType[q] = struct{}{}
		return
	}
	for _, g := range q.groups {
		m := h.byType[g.EventType]
		if m == nil {
			m = map[*hubQueue]struct{}{}
			h.byType[g.EventType] = m
		}
		m[q] = struct{}{}
	}
}

func (h *Hub) unindex(q *hubQueue) {
	delete(h.anyType, q)
	for _, g := range q.groups {
		if m := h.byType[g.EventType]; m != nil {
			delete(m, q)
			if len(m) == 0 {
				delete(h.byType, g.EventType)
			}
		}
	}
}

// unregister forgets q (if it is still the queue registered under its id).
func (h *Hub) unregister(q *hubQueue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queues[q.id] == q {
		delete(h.queues, q.id)
		h.unindex(q)
	}
}

// LiveStreams returns how many streams the hub serves from hub queue id,
// and whether the queue is registered here.
func (h *Hub) LiveStreams(id string) (int, bool) {
	q := h.local(id)
	if q == nil {
		return 0, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.streams), true
}

// local returns the queue registered under id, or nil.
func (h *Hub) local(id string) *hubQueue {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.queues[id]
}

// setGroups moves q to new groups in the index.
func (h *Hub) setGroups(q *hubQueue, groups filter.Groups) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q.mu.Lock()
	registered := h.queues[q.id] == q
	if registered {
		h.unindex(q)
	}
	q.groups = groups
	if registered {
		h.index(q)
	}
	// What the queue holds is judged by the new filters, as a broker
	// subscription's backlog would be: events they reject are dropped.
	keep := q.buf[:0]
	for _, e := range q.buf {
		if groups.Match(e.ev.event.EventType, e.ev.event.Resource.ResourceID) {
			keep = append(keep, e)
		}
	}
	clear(q.buf[len(keep):])
	q.buf = keep
	q.mu.Unlock()
}

// receiveLoop takes batches from the hub subscription, feeds the queues
// they match and acks them: custody passes to the queues' memory.
func (h *Hub) receiveLoop() {
	defer h.wg.Done()
	b := h.svc.cfg.Broker
	failures := 0
	for h.waitSubscription() {
		msgs, err := b.Receive(h.ctx, h.sub, pubsubx.ReceiveParams{Max: h.cfg.Batch, Wait: h.cfg.ReceiveWait})
		if err != nil {
			if h.ctx.Err() != nil {
				return
			}
			failures++
			if herr.CodeOf(err) == herr.NotFound {
				// Deleted while idle (subLoop), or by the reaper: subLoop
				// makes it again when queues need it.
				h.lostSubscription()
				continue
			}
			h.log(slog.LevelWarn, "hub-receive", "the hub cannot receive from its subscription; retrying", "subscription", h.sub, "err", err)
			_ = sleep(h.ctx, min(time.Duration(failures)*100*time.Millisecond, 5*time.Second))
			continue
		}
		failures = 0
		if len(msgs) == 0 {
			continue
		}
		h.dispatch(msgs)
		if err := b.Ack(context.WithoutCancel(h.ctx), h.sub, msgs); err != nil {
			// Their redelivery duplicates them in the queues: at least once.
			h.log(slog.LevelWarn, "hub-ack", "the hub could not ack what it received", "subscription", h.sub, "err", err)
		}
	}
}

// dispatch appends each message to the queues whose filters it passes.
func (h *Hub) dispatch(msgs []*pubsubx.Message) {
	var (
		wantSpill bool
		match     []*pubsubx.Message
		targets   [][]*hubQueue
	)
	h.mu.RLock()
	for _, m := range msgs {
		typ, res := m.EventType(), m.ResourceID()
		var qs []*hubQueue
		for q := range h.byType[typ] {
			if q.matches(typ, res) {
				qs = append(qs, q)
			}
		}
		for q := range h.anyType {
			qs = append(qs, q)
		}
		if len(qs) > 0 {
			match = append(match, m)
			targets = append(targets, qs)
		}
	}
	h.mu.RUnlock()
	if len(match) == 0 {
		return
	}
	in, _, err := h.svc.resolveAll(h.ctx, h.sub, match, nil)
	if err != nil {
		// resolveAll nacked them: they come back.
		return
	}
	byMsg := make(map[*pubsubx.Message][]*hubQueue, len(match))
	for i, m := range match {
		byMsg[m] = targets[i]
	}
	for _, e := range in {
		ev, err := newHubEvent(e.Body)
		if err != nil {
			h.log(slog.LevelError, "hub-poison", "poison event: no transport can deliver it; non-durable queues drop it", "err", err)
			continue
		}
		for _, q := range byMsg[e.Handle.(*pubsubx.Message)] {
			if q.push(ev) {
				wantSpill = true
			}
		}
	}
	if wantSpill {
		h.wakeSpiller()
	}
}

func (q *hubQueue) matches(typ, res string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.groups.Match(typ, res)
}

// newHubEvent decodes a stored event once for every stream it reaches.
func newHubEvent(body []byte) (*hubEvent, error) {
	ev, err := DecodeConsumerEvent(body)
	if err == nil {
		err = ev.deliverable()
	}
	if err != nil {
		return nil, err
	}
	return &hubEvent{body: body, event: ev, id: ev.ID, published: ev.PublishedAt}, nil
}

// wakeSpiller tells the spill loop there is work.
func (h *Hub) wakeSpiller() {
	select {
	case h.spillC <- struct{}{}:
	default:
	}
}

// spillLoop writes the events queued for the store (queues leaving or
// shared), a batch per queue per round.
func (h *Hub) spillLoop() {
	defer h.wg.Done()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.spillC:
		}
		h.mu.RLock()
		qs := make([]*hubQueue, 0, len(h.queues))
		for _, q := range h.queues {
			qs = append(qs, q)
		}
		h.mu.RUnlock()
		for _, q := range qs {
			q.mu.Lock()
			es, over := q.spill, q.overflow
			q.spill, q.overflow = nil, nil
			q.mu.Unlock()
			h.deadLetterOverflow(q, over)
			if len(es) == 0 {
				continue
			}
			err := h.spillEntries(h.ctx, q.id, es)
			switch {
			case herr.CodeOf(err) == herr.NotFound:
				h.forget(q, errHubQueueGone(q.id))
			case err != nil:
				h.log(slog.LevelWarn, "hub-spill", "could not write a non-durable queue's events to the store; retrying", queueAttr(NonDurable, q.id), errAttr(NonDurable, q.id, err))
				q.mu.Lock()
				q.spill = append(es, q.spill...)
				q.mu.Unlock()
				_ = sleep(h.ctx, 100*time.Millisecond)
				h.wakeSpiller()
			}
		}
	}
}

// deadLetterOverflow writes the events q's limit pushed out to the
// dead-letter queue, reason MAXLEN, never delivered (delivery count 0 for
// those no stream was handed). A failure loses them, and is logged.
func (h *Hub) deadLetterOverflow(q *hubQueue, es []hubEntry) {
	if len(es) == 0 {
		return
	}
	us := make([]leasestore.Unreceived, 0, len(es))
	for _, e := range es {
		if e.ev.id != "" {
			us = append(us, leasestore.Unreceived{ID: e.ev.id, Body: e.ev.body})
		}
	}
	err := h.svc.cfg.Store.DeadLetterUnreceived(h.ctx, q.id, us, leasestore.ReasonMaxLen)
	switch {
	case err == nil:
		q.mu.Lock()
		q.dropped += int64(len(es))
		q.mu.Unlock()
	case herr.CodeOf(err) == herr.NotFound:
		h.forget(q, errHubQueueGone(q.id))
	default:
		h.log(slog.LevelWarn, "hub-overflow", "could not dead-letter the events a non-durable queue had no room for; they are lost", queueAttr(NonDurable, q.id), errAttr(NonDurable, q.id, err), "events", len(es))
	}
}

// spillEntries writes es to queue's backlog in the store; what does not
// fit the queue's room is dropped, and logged.
func (h *Hub) spillEntries(ctx context.Context, queue string, es []hubEntry) error {
	if len(es) == 0 {
		return nil
	}
	in := make([]leasestore.Incoming, len(es))
	for i, e := range es {
		in[i] = leasestore.Incoming{Body: e.ev.body, PublishedAt: e.ev.published}
	}
	n, err := h.svc.cfg.Store.Spill(ctx, queue, in)
	if err == nil && n < len(in) {
		h.svc.cfg.Logger.Warn("a non-durable queue's store backlog is full: its oldest events beyond it were dropped", queueAttr(NonDurable, queue), "dropped", len(in)-n)
	}
	return err
}

// forget unregisters q and ends its streams with err.
func (h *Hub) forget(q *hubQueue, err error) {
	h.unregister(q)
	q.mu.Lock()
	if q.gone == nil {
		q.gone = err
	}
	q.buf, q.spill = nil, nil
	q.signal()
	streams := q.streamList()
	q.mu.Unlock()
	for _, st := range streams {
		st.fail(err)
	}
}

func errHubQueueGone(id string) error {
	return herr.New(herr.NotFound, "the non-durable queue is gone: start a fresh stream with filter_groups and no reconnect token")
}

// heartbeatLoop writes the process record every Heartbeat, handles the
// notices it brings, and ends the queues past their grace window.
func (h *Hub) heartbeatLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.beat()
		h.sweep()
	}
}

func (h *Hub) beat() {
	st := h.svc.cfg.Store
	notices, err := st.Heartbeat(h.ctx, h.cfg.ProcessID)
	if herr.CodeOf(err) == herr.NotFound {
		// The reaper took this process for dead (a long pause): register
		// again. Its queues still name it as their home.
		err = st.RegisterProcess(h.ctx, leasestore.Process{ID: h.cfg.ProcessID, Subscription: h.sub})
	}
	if err != nil {
		if h.ctx.Err() == nil {
			h.log(slog.LevelWarn, "hub-heartbeat", "the hub's heartbeat failed; retrying", "process", h.cfg.ProcessID, "err", err)
		}
		return
	}
	for _, n := range notices {
		switch n.Kind {
		case leasestore.NoticeClaim:
			h.handOver(n.Queue, n.From)
		case leasestore.NoticeEvict:
			if q := h.local(n.Queue); q != nil {
				q.evictStreams()
			}
		case leasestore.NoticeGone:
			if q := h.local(n.Queue); q != nil {
				h.forget(q, errHubQueueGone(q.id))
			}
		}
	}
}

// sweep ends queues whose grace window passed with no stream, and
// forgets queues whose hand-over settled.
func (h *Hub) sweep() {
	now := h.svc.cfg.Now()
	grace := h.svc.cfg.Streams.ReconnectGrace
	h.mu.RLock()
	qs := make([]*hubQueue, 0, len(h.queues))
	for _, q := range h.queues {
		qs = append(qs, q)
	}
	h.mu.RUnlock()
	for _, q := range qs {
		q.mu.Lock()
		var expired, settled bool
		switch q.state {
		case stateLive:
			since := q.detachedAt
			if since.IsZero() && len(q.streams) == 0 {
				since = q.createdAt
			}
			expired = !q.claiming && len(q.streams) == 0 && !since.IsZero() && now.Sub(since) >= grace
		case stateLeaving:
			settled = now.After(q.leaveUntil) && len(q.spill) == 0
		}
		if expired && q.gone == nil {
			// No stream may attach while the record goes.
			q.gone = errHubQueueGone(q.id)
		}
		q.mu.Unlock()
		switch {
		case expired:
			_, err := h.svc.cfg.Store.DeleteIfHome(h.ctx, q.id, h.cfg.ProcessID)
			switch {
			case err == nil, herr.CodeOf(err) == herr.NotFound, herr.CodeOf(err) == herr.Aborted:
				h.forget(q, errHubQueueGone(q.id))
			default:
				h.log(slog.LevelWarn, "hub-reap", "could not delete a non-durable queue past its grace window; retrying", queueAttr(NonDurable, q.id), errAttr(NonDurable, q.id, err))
			}
		case settled:
			h.unregister(q)
		}
	}
}

// handOver answers another process's claim of queue id (see
// docs/streams-at-scale.md): with no stream here the queue goes to to,
// its events spilled to the store; with streams here it becomes shared.
func (h *Hub) handOver(id, to string) {
	q := h.local(id)
	if q == nil || to == h.cfg.ProcessID {
		return
	}
	ctx := h.ctx
	st := h.svc.cfg.Store
	q.mu.Lock()
	if q.state != stateLive || q.claiming {
		q.mu.Unlock()
		return
	}
	if len(q.streams) == 0 {
		q.state = stateLeaving
		q.leaveUntil = h.svc.cfg.Now().Add(2 * h.cfg.Heartbeat)
		es := q.takeAll()
		q.mu.Unlock()
		if err := h.spillEntries(ctx, id, es); err != nil && herr.CodeOf(err) != herr.NotFound {
			h.svc.cfg.Logger.Warn("could not hand a non-durable queue's events over; they are lost", queueAttr(NonDurable, id), errAttr(NonDurable, id, err))
		}
		if _, err := st.SetHome(ctx, id, h.cfg.ProcessID, to); err != nil {
			switch herr.CodeOf(err) {
			case herr.NotFound, herr.Aborted:
			default:
				h.svc.cfg.Logger.Warn("could not hand a non-durable queue over; the claimant takes it when this process's answer is overdue", queueAttr(NonDurable, id), errAttr(NonDurable, id, err))
			}
		}
		return
	}
	q.mu.Unlock()
	if _, err := st.ShareQueue(ctx, id, h.cfg.ProcessID); err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			h.forget(q, errHubQueueGone(id))
		}
		return
	}
	q.mu.Lock()
	q.state = stateShared
	q.spill = append(q.takeAll(), q.spill...)
	q.mu.Unlock()
	h.wakeSpiller()
	// Its streams here reconnect into the shared queue: the notifications
	// API's "broker cancelled" error, with the backlog intact.
	q.evictStreams()
}

// evictStreams ends the queue's streams here as the broker cancelling
// their consumer would; the queue stays.
func (q *hubQueue) evictStreams() {
	q.mu.Lock()
	streams := q.streamList()
	q.mu.Unlock()
	for _, st := range streams {
		st.fail(&ConsumerCancelledError{Err: errors.New("the stream's consumer was taken away")})
	}
}

// log writes a line at level, at most once per lograte interval for key.
func (h *Hub) log(level slog.Level, key, msg string, args ...any) {
	h.svc.warnings.Log(h.ctx, h.svc.cfg.Logger, level, "hub:"+key, msg, args...)
}
