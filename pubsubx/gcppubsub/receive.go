package gcppubsub

import (
	"context"
	"slices"
	"sort"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

const (
	// minPoll and maxPoll bound the pause between two empty pull rounds
	// of one Receive; it doubles from the first to the second.
	minPoll = 10 * time.Millisecond
	maxPoll = 200 * time.Millisecond

	// maxPullMessages is Pub/Sub's limit on one Pull.
	maxPullMessages = 1000

	// maxAckIDs bounds the ack ids of one Acknowledge or
	// ModifyAckDeadline request (Pub/Sub limits the request to 512 KB).
	maxAckIDs = 500

	// pullGrace is how long a pull in flight may outlive the caller's
	// context, so that messages the server already handed out reach
	// Receive and can be handed back rather than stranded until their ack
	// deadline.
	pullGrace = 2 * time.Second

	// retireGrace is added to an old generation's ack deadline: once this
	// process has taken nothing from it for that long, it is deleted.
	retireGrace = 10 * time.Second

	// dedupeMargin: a message that an old generation holds and that was
	// published more than this after the next generation's createdLabel
	// is also in that generation (if its filter passes it), so it is
	// acked in the old one and not returned. The margin covers clock skew
	// between the host that created the generation and Pub/Sub.
	dedupeMargin = time.Minute
)

// handle is the Handle of a received message: where it came from and its
// ack id there.
type handle struct {
	base  string
	gen   uint64
	ackID string
}

// Receive returns up to max messages of subscription name, oldest
// generation first, polling with synchronous Pull (never StreamingPull,
// which hands out more than it is asked for) until one is available or
// wait passes. Every Pull asks for at most what is still missing, so
// nothing is received that is not returned.
func (b *broker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	max, wait := p.Max, p.Wait
	if max < 1 {
		return nil, herr.New(herr.InvalidArgument, "receive: max must be at least 1")
	}
	if b.isClosed() {
		return nil, errClosed
	}
	base, err := b.baseOf(name)
	if err != nil {
		return nil, err
	}
	st := b.state(base)
	end := time.Now().Add(wait)
	delay := minPoll
	for {
		if b.isClosed() {
			return nil, errClosed
		}
		out, err := b.round(ctx, name, base, st, max)
		if err != nil || len(out) > 0 {
			return out, err
		}
		remaining := time.Until(end)
		if remaining <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(delay, remaining))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, b.wrap(ctx, ctx.Err(), "gcppubsub: receive")
		case <-t.C:
		}
		delay = min(2*delay, maxPoll)
	}
}

// round pulls once from every known generation, oldest first, then probes
// for newer ones, until max messages are in hand.
func (b *broker) round(ctx context.Context, name, base string, st *subState, max int) ([]*pubsubx.Message, error) {
	for attempt := 0; ; attempt++ {
		gens, err := b.knownGens(ctx, base, st)
		if err != nil {
			return nil, b.wrap(ctx, err, "gcppubsub: listing subscriptions failed")
		}
		if len(gens) == 0 {
			return nil, notFound(name)
		}
		var out []*pubsubx.Message
		stale := false
		for i, g := range gens {
			if len(out) >= max {
				break
			}
			old := i < len(gens)-1
			var dropAfter time.Time
			if old {
				// Best effort: without the label, nothing is dropped.
				if t, ok, err := b.createdAt(ctx, base, st, gens[i+1]); err == nil && ok {
					dropAfter = t.Add(b.dedupeMargin)
				}
			}
			msgs, err := b.pullGen(ctx, base, g, max-len(out), dropAfter)
			if codeOf(err) == codes.NotFound {
				st.forget(g)
				stale = true
				continue
			}
			if err != nil {
				return b.partial(ctx, out, err)
			}
			out = append(out, msgs...)
			if old {
				b.noteOld(ctx, base, st, g, gens[len(gens)-1], len(msgs))
			}
		}
		// Probe for generations newer than the newest known: another
		// process may have updated the filter.
		for next := gens[len(gens)-1] + 1; len(out) < max; next++ {
			msgs, err := b.pullGen(ctx, base, next, max-len(out), time.Time{})
			if codeOf(err) == codes.NotFound {
				break
			}
			if err != nil {
				return b.partial(ctx, out, err)
			}
			st.add(next)
			out = append(out, msgs...)
		}
		if !stale || len(out) > 0 || attempt > 0 {
			if stale {
				st.invalidate()
			}
			return out, nil
		}
		// A generation vanished and nothing came in: list again now, so
		// that a deleted subscription is NotFound rather than empty.
		st.invalidate()
	}
}

// partial returns what a round already holds when a later pull of the
// round fails: those messages are out of the subscription's reach until
// their ack deadline, so they go to the caller, and the error recurs on
// the next call. With nothing in hand, or when the caller has gone away
// (then what it holds is nacked), the error is returned.
func (b *broker) partial(ctx context.Context, out []*pubsubx.Message, err error) ([]*pubsubx.Message, error) {
	if len(out) > 0 && ctx.Err() == nil {
		return out, nil
	}
	if len(out) > 0 {
		b.handBack(ctx, out)
	}
	return nil, b.wrap(ctx, err, "gcppubsub: receive failed")
}

// handBack nacks received messages the caller will not get, so that they
// are available again at once rather than after their ack deadline.
// Failures are ignored: then the ack deadline brings them back.
func (b *broker) handBack(ctx context.Context, msgs []*pubsubx.Message) {
	byGen := map[uint64][]string{}
	var base string
	for _, m := range msgs {
		h := m.Handle.(*handle)
		base = h.base
		byGen[h.gen] = append(byGen[h.gen], h.ackID)
	}
	for g, ids := range byGen {
		_ = b.settleIDs(context.WithoutCancel(ctx), b.path(base, g), ids, false)
	}
}

// pullGen pulls up to n messages from generation g of base. Messages
// published after dropAfter (when set) are acked there and left out. If
// the caller's context ends while the pull is in flight, what it brought
// is nacked and the context's error returned.
func (b *broker) pullGen(ctx context.Context, base string, g uint64, n int, dropAfter time.Time) ([]*pubsubx.Message, error) {
	path := b.path(base, g)
	pctx, cancel := detach(ctx, rpcTimeout, pullGrace)
	defer cancel()
	// ReturnImmediately: answer at once, even with nothing. Without it the
	// server holds the pull open until messages arrive, and a pull cut off
	// by the caller's deadline may already have taken messages that then
	// stay hidden until their ack deadline. Pub/Sub discourages the flag
	// for throughput, not correctness; Receive's poll loop does the waiting.
	//lint:ignore SA1019 deliberate: see above.
	req := &pb.PullRequest{Subscription: path, MaxMessages: int32(min(n, maxPullMessages)), ReturnImmediately: true}
	resp, err := b.sub.Pull(pctx, req)
	if err != nil {
		return nil, err
	}
	var (
		out  []*pubsubx.Message
		drop []string
	)
	for _, rm := range resp.GetReceivedMessages() {
		if !dropAfter.IsZero() && rm.GetMessage().GetPublishTime().AsTime().After(dropAfter) {
			drop = append(drop, rm.GetAckId())
			continue
		}
		md := rm.GetMessage().GetAttributes()
		if md == nil {
			md = map[string]string{}
		}
		out = append(out, &pubsubx.Message{
			Body:     rm.GetMessage().GetData(),
			Metadata: md,
			Handle:   &handle{base: base, gen: g, ackID: rm.GetAckId()},
		})
	}
	if len(drop) > 0 {
		// If this fails they come back after the ack deadline and are
		// dropped again.
		_ = b.settleIDs(context.WithoutCancel(ctx), path, drop, true)
	}
	if err := ctx.Err(); err != nil && len(out) > 0 {
		b.handBack(ctx, out)
		return nil, err
	}
	return out, nil
}

// detach returns a context for one RPC that ends after timeout, or grace
// after parent ends, whichever is first.
func detach(parent context.Context, timeout, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), timeout)
	stop := context.AfterFunc(parent, func() { time.AfterFunc(grace, cancel) })
	return ctx, func() { stop(); cancel() }
}

// noteOld tracks an old generation g from which this round took taken
// messages, and deletes it once this process has taken nothing from it
// for its ack deadline plus retireGrace, while newest still exists. By
// then every message another receiver held from it has been settled or
// has come back (its ack deadline passed), and would have been taken.
// Pulls further apart than the ack deadline restart the count: between
// them another process may have taken what this one never saw. Errors are
// ignored: the next round tries again.
func (b *broker) noteOld(ctx context.Context, base string, st *subState, g, newest uint64, taken int) {
	now := time.Now()
	st.mu.Lock()
	since, ok := st.emptySince[g]
	if last, seen := st.lastSeen[g]; ok && (!seen || now.Sub(last) > b.opts.AckDeadline) {
		ok = false // a gap in the observations
	}
	st.lastSeen[g] = now
	switch {
	case taken > 0:
		delete(st.emptySince, g)
	case !ok:
		st.emptySince[g] = now
	}
	st.mu.Unlock()
	if taken > 0 || !ok || now.Sub(since) < b.opts.AckDeadline+b.retireGrace {
		return
	}
	var sg *pb.Subscription
	err := b.rpc(ctx, func(ctx context.Context) error {
		var err error
		sg, err = b.sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: b.path(base, g)})
		return err
	})
	if codeOf(err) == codes.NotFound {
		st.forget(g)
		return
	}
	// Another process may have created g with a longer ack deadline.
	if err != nil || now.Sub(since) < time.Duration(sg.GetAckDeadlineSeconds())*time.Second+b.retireGrace {
		return
	}
	// Only retire while a newer generation exists: if the whole name was
	// deleted and created again, this g is the new incarnation's.
	err = b.rpc(ctx, func(ctx context.Context) error {
		_, err := b.sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: b.path(base, newest)})
		return err
	})
	if err != nil {
		return
	}
	if b.deleteGen(ctx, base, g) == nil {
		st.forget(g)
	}
}

// Ack acknowledges msgs, received from subscription name, for good.
func (b *broker) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, true)
}

// Nack makes msgs available again at once (ModifyAckDeadline to 0).
func (b *broker) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, false)
}

// settle acks or nacks msgs, grouped by generation. Settling a message
// twice, or one whose ack deadline passed, is harmless. A generation that
// is gone makes the call herr.NotFound only when the whole subscription
// is gone; an old generation retired after draining held nothing left to
// settle.
func (b *broker) settle(ctx context.Context, name string, msgs []*pubsubx.Message, ack bool) error {
	if b.isClosed() {
		return errClosed
	}
	base, err := b.baseOf(name)
	if err != nil {
		return err
	}
	byGen := map[uint64][]string{}
	foreign := false
	for _, m := range msgs {
		h, ok := m.Handle.(*handle)
		if !ok {
			return herr.New(herr.InvalidArgument, "gcppubsub: message was not received from a gcppubsub broker")
		}
		if h.base != base {
			foreign = true
			continue
		}
		byGen[h.gen] = append(byGen[h.gen], h.ackID)
	}
	gone := false
	if !foreign {
		gens := make([]uint64, 0, len(byGen))
		for g := range byGen {
			gens = append(gens, g)
		}
		sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
		for _, g := range gens {
			err := b.settleIDs(ctx, b.path(base, g), byGen[g], ack)
			if codeOf(err) == codes.NotFound {
				gone = true
				continue
			}
			if err != nil {
				return b.wrap(ctx, err, "gcppubsub: settling messages failed")
			}
		}
	}
	if !foreign && !gone {
		return nil
	}
	gens, err := b.listGens(ctx, base)
	if err != nil {
		return b.wrap(ctx, err, "gcppubsub: listing subscriptions failed")
	}
	if len(gens) == 0 {
		return notFound(name)
	}
	b.state(base).set(gens)
	if foreign {
		return herr.New(herr.InvalidArgument, "gcppubsub: a message was not received from subscription %q", name)
	}
	return nil
}

// settleIDs acknowledges (ack) or nacks ackIDs on one generation, in
// requests of at most maxAckIDs.
func (b *broker) settleIDs(ctx context.Context, path string, ackIDs []string, ack bool) error {
	for chunk := range slices.Chunk(ackIDs, maxAckIDs) {
		err := b.rpc(ctx, func(ctx context.Context) error {
			if ack {
				return b.sub.Acknowledge(ctx, &pb.AcknowledgeRequest{Subscription: path, AckIds: chunk})
			}
			return b.sub.ModifyAckDeadline(ctx, &pb.ModifyAckDeadlineRequest{Subscription: path, AckIds: chunk, AckDeadlineSeconds: 0})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
