package rabbit

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Receiving (package doc, "Delivery semantics"). Each subscription that is
// being received from has a feed: a channel of its own with one consumer
// whose prefetch bounds what the server pushes ahead of Receive. A
// consumer stays registered while Receives keep coming, so a steady
// reader costs RabbitMQ one delivery and a share of one multiple-ack per
// message instead of a consumer registered and cancelled, and a channel
// opened and closed, per Receive.

// startGrace is how long a Receive that registers the consumer waits for
// the first push even when its own wait is 0: the server pushes what is
// ready right after consume-ok, one round trip later.
const startGrace = 50 * time.Millisecond

// gatherGap and gatherMax make "what is available at once" whole: the
// server pushes a burst (what was ready when the consumer registered,
// what a publisher's batch brought) one message after the other, so a
// Receive holding fewer than max while a burst is still arriving (the
// last message came less than gatherGap ago, and the consumer has room
// for more) waits until gatherGap passes without a new one, for at most
// gatherMax, or until it holds max. Otherwise it returns at once.
const (
	gatherGap = 10 * time.Millisecond
	gatherMax = 100 * time.Millisecond
)

// errRetired is a feed's error once it can no longer be used (its channel
// closed, the server cancelled its consumer, or it was released); Receive
// then opens a fresh feed, which finds out why.
var errRetired = errors.New("rabbit: feed retired")

// feed is one subscription's consumer in this Broker. Its channel carries
// the consumer's deliveries and their acks and nacks; every delivery the
// server sent and nobody settled is in unsettled, so the feed always knows
// which acks it may merge into one multiple-ack.
type feed struct {
	b     *broker
	queue string
	ch    *amqp.Channel
	// rpc serializes the synchronous methods on ch (qos, consume, cancel,
	// the settle barrier, close): amqp091 matches a reply to whichever
	// call waits, so two at once on one channel could take each other's.
	// It is never taken with mu held.
	rpc sync.Mutex

	mu        sync.Mutex
	consuming bool   // a consumer is registered (tag)
	changing  bool   // a consumer is being registered or cancelled: wait on wake
	stopping  bool   // the feed itself cancels the consumer (so its end is no fault)
	tag       string // the consumer's tag while consuming
	pumped    chan struct{}
	buf       []amqp.Delivery     // delivered to the consumer, not yet returned: held
	unsettled map[uint64]struct{} // delivered and not settled: buf and handed out
	wake      chan struct{}       // closed and replaced when buf or the state changes
	lastPush  time.Time           // when the last delivery came
	receivers int                 // Receives in progress
	last      time.Time           // when the last Receive returned
	idle      *time.Timer         // releases the feed hold after the last Receive
	releasing bool                // release runs: Receives wait, then take a new feed
	retired   bool                // removed from b.feeds; ch closes once nothing is unsettled
	settling  int                 // settles between their acks and their barrier
	closed    bool                // ch is being closed
}

// signalLocked wakes the Receives waiting on f.
func (f *feed) signalLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// feedFor returns queue's feed, opening one (a channel, no consumer yet)
// when there is none.
func (b *broker) feedFor(ctx context.Context, queue string) (*feed, error) {
	b.mu.Lock()
	f := b.feeds[queue]
	b.mu.Unlock()
	if f != nil {
		return f, nil
	}
	ch, err := b.sub.channel(ctx)
	if err != nil {
		return nil, err
	}
	f = &feed{b: b, queue: queue, ch: ch, unsettled: map[uint64]struct{}{}, wake: make(chan struct{})}
	b.mu.Lock()
	if g := b.feeds[queue]; g != nil {
		b.mu.Unlock()
		b.sub.release(ch) // no consumer ran on it
		return g, nil
	}
	if b.closed {
		b.mu.Unlock()
		b.sub.release(ch)
		return nil, errClosed
	}
	b.feeds[queue] = f
	b.mu.Unlock()
	return f, nil
}

// start registers the consumer: basic.qos with the broker's prefetch,
// then basic.consume. Called with f.changing set and f.mu not held.
func (f *feed) start() error {
	f.rpc.Lock()
	defer f.rpc.Unlock()
	if err := f.ch.Qos(f.b.prefetch, 0, false); err != nil {
		return err
	}
	tag := consumerTag()
	ds, err := f.ch.Consume(f.queue, tag, false, false, false, false, nil)
	if err != nil {
		return err
	}
	pumped := make(chan struct{})
	f.mu.Lock()
	f.consuming, f.stopping, f.tag, f.pumped = true, false, tag, pumped
	f.mu.Unlock()
	go f.pump(ds, pumped)
	return nil
}

// pump moves the consumer's deliveries into f.buf until amqp091 closes
// the delivery channel: after the cancel-ok of the feed's own cancel (then
// every delivery the server sent is in buf), or when the server cancels
// the consumer (its queue was deleted) or the channel closes, which
// retire the feed.
func (f *feed) pump(ds <-chan amqp.Delivery, pumped chan struct{}) {
	defer close(pumped)
	for d := range ds {
		f.mu.Lock()
		f.buf = append(f.buf, d)
		f.unsettled[d.DeliveryTag] = struct{}{}
		f.lastPush = time.Now()
		f.signalLocked()
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopping {
		// Not our cancel: the queue is gone or the channel closed. What
		// the channel held goes back to the queue when it closes (so the
		// held messages are dropped here, not returned: they would come
		// again); a fresh feed finds out what happened.
		for _, d := range f.buf {
			delete(f.unsettled, d.DeliveryTag)
		}
		f.buf = nil
		f.consuming = false
		f.retireLocked()
		f.signalLocked()
	}
}

// receive takes up to max held messages, waiting up to wait for the first
// one; see Broker.Receive.
func (f *feed) receive(ctx context.Context, max int, wait time.Duration) ([]amqp.Delivery, *batch, error) {
	deadline := time.Now().Add(wait)
	var gathering time.Time // when this Receive first found messages held
	f.mu.Lock()
	f.receivers++
	defer func() {
		f.receivers--
		f.last = time.Now()
		if f.receivers == 0 && !f.retired {
			if f.idle == nil {
				f.idle = time.AfterFunc(f.b.hold, f.release)
			} else {
				f.idle.Reset(f.b.hold)
			}
		}
		f.mu.Unlock()
	}()
	for {
		var left time.Duration
		switch {
		case len(f.buf) > 0:
			if len(f.buf) < max && f.consuming && len(f.unsettled) < f.b.prefetch {
				if gathering.IsZero() {
					gathering = time.Now()
				}
				left = min(gatherGap-time.Since(f.lastPush), gatherMax-time.Since(gathering))
				if left > 0 {
					break // a burst is arriving: wait for the rest
				}
			}
			n := min(max, len(f.buf))
			ds := slices.Clone(f.buf[:n])
			f.buf = slices.Delete(f.buf, 0, n)
			return ds, f.newBatchLocked(ds), nil
		case f.retired:
			return nil, nil, errRetired
		case f.releasing:
			// Wait for release to put the held messages back before a
			// new feed's consumer can overtake them.
			if left = time.Until(deadline); left <= 0 {
				return nil, nil, nil
			}
		case !f.consuming && !f.changing:
			f.changing = true
			f.mu.Unlock()
			// amqp091's round trips take no context: a caller that
			// stops waiting leaves the registration to finish alone.
			_, err := bounded(ctx, func() (struct{}, error) {
				err := f.start()
				f.mu.Lock()
				f.changing = false
				if err != nil {
					// A channel exception (404: no such queue) closed
					// the channel: retire the feed.
					f.abandonLocked()
				}
				f.signalLocked()
				f.mu.Unlock()
				return struct{}{}, err
			}, nil)
			f.mu.Lock()
			if err != nil {
				return nil, nil, err
			}
			// The server pushes what is ready one round trip after
			// consume-ok: give it that even when the caller would not
			// wait.
			deadline = later(deadline, time.Now().Add(startGrace))
			continue
		default:
			if left = time.Until(deadline); left <= 0 {
				return nil, nil, nil
			}
		}
		wake := f.wake
		f.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		f.mu.Lock()
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// stopLocked cancels the consumer, if one runs, and waits until every
// delivery the server sent before cancel-ok is in f.buf. It unlocks f.mu
// for the round trip and returns with it held; while it runs, f.changing
// keeps Receives from registering a new consumer.
func (f *feed) stopLocked() error {
	for f.changing {
		wake := f.wake
		f.mu.Unlock()
		<-wake
		f.mu.Lock()
	}
	if !f.consuming {
		return nil
	}
	f.changing, f.stopping = true, true
	tag, pumped := f.tag, f.pumped
	f.mu.Unlock()
	f.rpc.Lock()
	err := f.ch.Cancel(tag, false)
	f.rpc.Unlock()
	if err == nil {
		<-pumped
	}
	f.mu.Lock()
	f.consuming, f.changing = false, false
	f.signalLocked()
	if err != nil {
		f.abandonLocked()
	}
	return err
}

// abandonLocked gives up a feed whose channel failed a method: it closes
// the channel, whatever is unsettled on it, since RabbitMQ returns to the
// queue everything a closed channel held, and a consumer whose cancel
// failed may still be registered, its window full of messages nobody
// would ever settle. Handles still out fail their settle (Unavailable:
// the messages come again).
func (f *feed) abandonLocked() {
	for _, d := range f.buf {
		delete(f.unsettled, d.DeliveryTag)
	}
	f.buf = nil
	f.retireLocked()
	if !f.closed {
		f.closed = true
		go func() {
			f.rpc.Lock()
			defer f.rpc.Unlock()
			_ = f.ch.Close()
		}()
	}
}

// requeue nacks tags with requeue, together with every held message, so
// that they all go back to their original positions in the queue, before
// anything later: the consumer is cancelled first (and registered again by
// the next Receive), since messages it would push meanwhile would overtake
// the requeued ones. The caller has marked tags' handles settled; they
// stay in f.unsettled until their nacks are sent, so that no merged ack
// covers them meanwhile.
func (f *feed) requeue(tags []uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.stopLocked(); err != nil {
		return err
	}
	for _, d := range f.buf {
		tags = append(tags, d.DeliveryTag)
	}
	f.buf = nil
	var err error
	for _, t := range tags {
		if _, ok := f.unsettled[t]; !ok {
			continue
		}
		delete(f.unsettled, t)
		if e := f.ch.Nack(t, false, true); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// release ends the feed's hold once no Receive came for b.hold: the held
// messages go back to the queue for any client and the feed retires (its
// channel closes once what it handed out is settled). A Receive that came
// meanwhile re-arms the timer instead.
func (f *feed) release() {
	f.mu.Lock()
	if f.retired || f.releasing {
		f.mu.Unlock()
		return
	}
	if left := f.b.hold - time.Since(f.last); f.receivers > 0 || left > 0 {
		if f.receivers == 0 {
			f.idle.Reset(left)
		}
		f.mu.Unlock()
		return
	}
	f.releasing = true // Receives wait from here on
	f.mu.Unlock()
	_ = f.requeue(nil)
	f.mu.Lock()
	f.retireLocked() // and then open a new feed
	f.signalLocked()
	f.mu.Unlock()
}

// retireLocked removes f from its broker's feeds, so the next Receive
// opens a new one, and closes its channel once nothing on it is unsettled.
func (f *feed) retireLocked() {
	if !f.retired {
		f.retired = true
		f.b.mu.Lock()
		if f.b.feeds[f.queue] == f {
			delete(f.b.feeds, f.queue)
		}
		f.b.mu.Unlock()
	}
	f.closeIfDoneLocked()
}

// closeIfDoneLocked closes a retired feed's channel once no consumer runs
// and nothing on it is unsettled (the server requeues whatever a closed
// channel held, so closing earlier would redeliver leased messages).
func (f *feed) closeIfDoneLocked() {
	if f.retired && !f.closed && !f.consuming && !f.changing && f.settling == 0 && len(f.unsettled) == 0 && len(f.buf) == 0 {
		f.closed = true
		go func() {
			f.rpc.Lock()
			defer f.rpc.Unlock()
			_ = f.ch.Close()
		}()
	}
}

func (f *feed) closeIfDone() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeIfDoneLocked()
}

// batch is what one Receive returned: its timer requeues whatever is
// still unsettled at the ack deadline.
type batch struct {
	f       *feed
	handles []*handle
	timer   *time.Timer
	pending atomic.Int32
}

func (f *feed) newBatchLocked(ds []amqp.Delivery) *batch {
	bt := &batch{f: f, handles: make([]*handle, len(ds))}
	for i, d := range ds {
		bt.handles[i] = &handle{batch: bt, queue: f.queue, tag: d.DeliveryTag, d: d}
	}
	bt.pending.Store(int32(len(ds)))
	bt.timer = time.AfterFunc(f.b.ackDeadline, bt.expire)
	return bt
}

// expire requeues the batch's unsettled messages at the ack deadline;
// settling them later is a no-op.
func (bt *batch) expire() {
	f := bt.f
	f.mu.Lock()
	var tags []uint64
	for _, h := range bt.handles {
		if _, ok := f.unsettled[h.tag]; ok && !h.settled.Swap(true) {
			tags = append(tags, h.tag)
		}
	}
	f.mu.Unlock()
	if len(tags) > 0 {
		_ = f.requeue(tags)
		f.closeIfDone()
	}
}

// handle is a received message's receipt.
type handle struct {
	batch   *batch
	queue   string
	tag     uint64
	d       amqp.Delivery // to hold it again when nacked
	settled atomic.Bool
}

// Receive takes up to max messages; see the package doc.
func (b *broker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	if p.Max < 1 {
		return nil, herr.New(herr.InvalidArgument, "receive: max must be at least 1")
	}
	queue, err := b.prepare(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	// A retired feed (its channel died, or its hold was released just
	// now) is replaced once; a fresh feed's failure is the answer.
	for attempt := 0; ; attempt++ {
		f, err := b.feedFor(ctx, queue)
		if err != nil {
			return nil, err
		}
		ds, bt, err := f.receive(ctx, p.Max, p.Wait)
		switch {
		case errors.Is(err, errRetired) && attempt == 0:
			continue
		case errors.Is(err, errRetired):
			return nil, herr.New(herr.Unavailable, "lost the RabbitMQ channel while receiving; retry")
		case isNotFound(err):
			return nil, notFound(name)
		case err != nil:
			return nil, wrap(err, "cannot receive from RabbitMQ")
		}
		if len(ds) == 0 {
			return nil, nil
		}
		out := make([]*pubsubx.Message, len(ds))
		for i, d := range ds {
			out[i] = &pubsubx.Message{Body: d.Body, Metadata: metadataOf(d.Headers), Handle: bt.handles[i]}
		}
		return out, nil
	}
}

// metadataOf returns the string headers of a delivery (nil when none).
func metadataOf(h amqp.Table) map[string]string {
	if len(h) == 0 {
		return nil
	}
	md := make(map[string]string, len(h))
	for k, v := range h {
		if s, ok := v.(string); ok {
			md[k] = s
		}
	}
	return md
}

func consumerTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "herald-receive-" + hex.EncodeToString(b)
}

// Ack acks msgs with basic.ack.
func (b *broker) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, true)
}

// Nack requeues msgs with basic.nack requeue=true.
func (b *broker) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, false)
}

func (b *broker) settle(ctx context.Context, name string, msgs []*pubsubx.Message, ack bool) error {
	queue, err := b.prepare(ctx, name, nil)
	if err != nil {
		return err
	}
	hs := make([]*handle, len(msgs))
	foreign := false
	for i, m := range msgs {
		h, ok := m.Handle.(*handle)
		if !ok {
			return herr.New(herr.InvalidArgument, "message was not received from a RabbitMQ broker")
		}
		hs[i] = h
		foreign = foreign || h.queue != queue
	}
	if foreign || len(hs) == 0 {
		exists, err := b.queueExists(ctx, queue)
		if err != nil {
			return err
		}
		if !exists {
			return notFound(name)
		}
		if foreign {
			return herr.New(herr.InvalidArgument, "message was not received from subscription %q", name)
		}
		return nil
	}

	// Settle feed by feed (a subscription has one per Broker, more only
	// across a reconnect), then make a round trip on each feed's channel:
	// it returns once the server has applied the acks, and its passive
	// declare tells a deleted queue.
	var feeds []*feed
	byFeed := map[*feed][]*handle{}
	for _, h := range hs {
		f := h.batch.f
		if _, ok := byFeed[f]; !ok {
			feeds = append(feeds, f)
		}
		byFeed[f] = append(byFeed[f], h)
	}
	touched := false
	for _, f := range feeds {
		sent, err := f.settle(ctx, byFeed[f], ack)
		if sent {
			barrier := err
			if err == nil {
				barrier = f.barrier(ctx)
			}
			f.mu.Lock()
			f.settling--
			f.closeIfDoneLocked()
			f.mu.Unlock()
			if err == nil && barrier != nil {
				if isNotFound(barrier) {
					return notFound(name)
				}
				return wrap(barrier, "cannot settle messages")
			}
		}
		if err != nil {
			if c := herr.CodeOf(err); c == herr.Canceled || c == herr.DeadlineExceeded {
				return err
			}
			return herr.Wrap(herr.Unavailable, err, "lost the RabbitMQ channel; the messages will be redelivered")
		}
		touched = touched || sent
	}
	if !touched {
		// Everything was settled before or expired: still report a
		// missing subscription.
		exists, err := b.queueExists(ctx, queue)
		if err != nil {
			return err
		}
		if !exists {
			return notFound(name)
		}
	}
	return nil
}

// settle acks or requeues hs, all of f, skipping the ones settled before
// or requeued at their deadline. It reports whether it did anything.
//
// A nack on a live feed keeps the messages: they go back among the held
// ones, in delivery-tag order (which is queue order), so the next Receive
// returns them first, as a requeue would, without a round trip, without
// cancelling the consumer and without RabbitMQ delivering them again.
// They are held like the rest: released to other clients with the hold,
// or by RabbitMQ when the connection ends. A feed being released or
// retired requeues them at RabbitMQ instead (requeue).
//
// Acks are merged: when every delivery the channel still has unsettled
// below the highest tag of hs is in hs, one basic.ack with multiple=true
// settles them all (contiguous batches of one reader, the common case);
// otherwise each is acked alone.
func (f *feed) settle(ctx context.Context, hs []*handle, ack bool) (bool, error) {
	f.mu.Lock()
	var (
		tags []uint64
		ds   []amqp.Delivery // of tags
	)
	for _, h := range hs {
		if _, ok := f.unsettled[h.tag]; !ok || h.settled.Swap(true) {
			continue
		}
		tags = append(tags, h.tag)
		ds = append(ds, h.d)
		if h.batch.pending.Add(-1) == 0 {
			h.batch.timer.Stop()
		}
	}
	if len(tags) == 0 {
		f.mu.Unlock()
		return false, nil
	}
	f.settling++ // the caller's barrier decrements it
	if !ack && !f.retired && !f.releasing && !f.closed {
		f.buf = append(f.buf, ds...)
		slices.SortFunc(f.buf, func(a, b amqp.Delivery) int { return cmp.Compare(a.DeliveryTag, b.DeliveryTag) })
		f.signalLocked()
		f.mu.Unlock()
		return true, nil
	}
	if !ack {
		f.mu.Unlock()
		_, err := bounded(ctx, func() (struct{}, error) { return struct{}{}, f.requeue(tags) }, nil)
		return true, err
	}
	defer f.mu.Unlock()
	for _, t := range tags {
		delete(f.unsettled, t)
	}
	top := slices.Max(tags)
	merge := true
	for t := range f.unsettled {
		if t < top {
			merge = false
			break
		}
	}
	var err error
	if merge {
		err = f.ch.Ack(top, true)
	} else {
		for _, t := range tags {
			if e := f.ch.Ack(t, false); e != nil && err == nil {
				err = e
			}
		}
	}
	return true, err
}

// barrier waits for the server to process everything sent on f's channel
// so far and checks that the queue still exists, until ctx ends.
func (f *feed) barrier(ctx context.Context) error {
	_, err := bounded(ctx, func() (struct{}, error) {
		f.rpc.Lock()
		defer f.rpc.Unlock()
		_, err := f.ch.QueueDeclarePassive(f.queue, true, false, false, false, nil)
		return struct{}{}, err
	}, nil)
	return err
}

// maxPrefetch is the largest prefetch count AMQP can express (a short).
const maxPrefetch = 65535
