package rabbit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// lease is one Receive's channel and its unsettled deliveries. The channel
// stays open while any is unsettled; its timer closes it at the ack
// deadline, which makes RabbitMQ requeue them.
type lease struct {
	c  *conn
	ch *amqp.Channel
	// consumed marks a channel that ran a consumer: it is closed, never
	// pooled, once settled, so a delivery the client did not see can never
	// linger on a reused channel.
	consumed bool

	mu      sync.Mutex
	pending int
	expired bool
	timer   *time.Timer
}

// expire closes the channel if anything is still unsettled. The close
// (a round trip) runs after l.mu is released: once expired is set, no
// settle touches the channel.
func (l *lease) expire() {
	l.mu.Lock()
	expire := l.pending > 0 && !l.expired
	if expire {
		l.expired = true
	}
	l.mu.Unlock()
	if expire {
		_ = l.ch.Close()
	}
}

// done is called, without l.mu, once the last delivery is settled and the
// lease marked expired (so nothing else uses the channel).
func (l *lease) done() {
	l.timer.Stop() // if it already fired, expire sees pending == 0
	if l.consumed {
		_ = l.ch.Close()
		return
	}
	l.c.release(l.ch)
}

// handle is a received message's receipt.
type handle struct {
	lease   *lease
	queue   string
	tag     uint64
	settled atomic.Bool
}

// maxPrefetch is the largest prefetch count AMQP can express (a short).
const maxPrefetch = 65535

// burstIdle ends a burst of deliveries that basic.get-ok's message count
// announced: a gap this long means another receiver took the rest.
const burstIdle = 50 * time.Millisecond

// Receive takes up to max messages; see the package doc.
func (b *broker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	max, wait := p.Max, p.Wait
	if max < 1 {
		return nil, herr.New(herr.InvalidArgument, "receive: max must be at least 1")
	}
	queue, err := b.prepare(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	ch, err := b.sub.channel(ctx)
	if err != nil {
		return nil, err
	}
	// basic.get takes no context: a receive that outlives ctx is
	// abandoned, and its channel closed once take returns (never while it
	// still runs: amqp091 must not see a channel closed under a call),
	// which requeues whatever it took.
	type taken struct {
		ds       []amqp.Delivery
		consumed bool
		err      error
	}
	done := make(chan taken, 1)
	go func() {
		ds, consumed, err := take(ctx, ch, queue, max, wait)
		done <- taken{ds, consumed, err}
	}()
	var tk taken
	select {
	case tk = <-done:
	case <-ctx.Done():
		go func() {
			<-done
			_ = ch.Close()
		}()
		return nil, wrap(ctx.Err(), "RabbitMQ did not answer before the deadline")
	}
	ds, consumed, err := tk.ds, tk.consumed, tk.err
	if err != nil {
		// Closing the channel requeues anything taken before the error.
		_ = ch.Close()
		if isNotFound(err) {
			return nil, notFound(name)
		}
		return nil, wrap(err, "cannot receive from RabbitMQ")
	}
	if len(ds) == 0 {
		if consumed {
			_ = ch.Close()
		} else {
			b.sub.release(ch)
		}
		return nil, nil
	}
	l := &lease{c: b.sub, ch: ch, consumed: consumed, pending: len(ds)}
	l.timer = time.AfterFunc(b.ackDeadline, l.expire)
	out := make([]*pubsubx.Message, len(ds))
	for i, d := range ds {
		out[i] = &pubsubx.Message{
			Body:     d.Body,
			Metadata: metadataOf(d.Headers),
			Handle:   &handle{lease: l, queue: queue, tag: d.DeliveryTag},
		}
	}
	return out, nil
}

// take gets the first message with basic.get, or waits for it with a
// prefetch-1 consumer. basic.get-ok tells how many more are ready: a few
// are taken with basic.get, a burst with a consumer whose prefetch is
// exactly the number wanted, so it can never be sent more than max in all.
// consumed reports whether a consumer ran on ch.
func take(ctx context.Context, ch *amqp.Channel, queue string, max int, wait time.Duration) (ds []amqp.Delivery, consumed bool, err error) {
	ds, ready, err := getUpTo(ch, queue, 1)
	if err != nil {
		return nil, false, err
	}
	if len(ds) == 0 {
		if wait <= 0 {
			return nil, false, nil
		}
		consumed = true
		ds, err = consumeUpTo(ctx, ch, queue, 1, wait)
		if err != nil || len(ds) == 0 || max == 1 {
			return ds, consumed, err
		}
		// The consumer does not say what else is ready; basic.get does.
		more, r, err := getUpTo(ch, queue, 1)
		if err != nil {
			return nil, consumed, err
		}
		ds, ready = append(ds, more...), r
	}
	need := min(ready, max-len(ds), maxPrefetch)
	if need <= 0 {
		return ds, consumed, nil
	}
	var more []amqp.Delivery
	if need <= 2 {
		more, _, err = getUpTo(ch, queue, need)
	} else {
		consumed = true
		more, err = consumeUpTo(ctx, ch, queue, need, burstIdle)
	}
	if err != nil {
		return nil, consumed, err
	}
	return append(ds, more...), consumed, nil
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

// getUpTo takes up to n ready messages with basic.get and returns how
// many were still ready after the last one (basic.get-ok's count), which
// also spares the final empty round trip.
func getUpTo(ch *amqp.Channel, queue string, n int) ([]amqp.Delivery, int, error) {
	var out []amqp.Delivery
	ready := 0
	for len(out) < n {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return out, 0, nil
		}
		out = append(out, d)
		ready = int(d.MessageCount)
		if ready == 0 {
			break
		}
	}
	return out, ready, nil
}

// consumeUpTo receives up to n messages with a consumer of prefetch n:
// it waits up to first for the first one and burstIdle between later ones,
// then cancels the consumer and drains the delivery channel, which amqp091
// closes after the cancel-ok: every delivery the server sent is returned,
// so none is held unseen, and the prefetch keeps them at most n. A
// consumer cancelled by the server (the queue was deleted) is NotFound.
func consumeUpTo(ctx context.Context, ch *amqp.Channel, queue string, n int, first time.Duration) ([]amqp.Delivery, error) {
	if err := ch.Qos(n, 0, false); err != nil {
		return nil, err
	}
	tag := consumerTag()
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(first)
	defer t.Stop()
	var out []amqp.Delivery
collect:
	for len(out) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				if ch.IsClosed() {
					return nil, amqp.ErrClosed
				}
				return nil, &amqp.Error{Code: amqp.NotFound, Reason: "consumer cancelled by the server"}
			}
			out = append(out, d)
			t.Reset(burstIdle)
		case <-t.C:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	if err := ch.Cancel(tag, false); err != nil {
		return nil, err
	}
	for d := range deliveries {
		out = append(out, d)
	}
	if err := ctx.Err(); err != nil {
		// The caller is gone: give back what arrived (requeue keeps its
		// position) rather than return it.
		for _, d := range out {
			_ = ch.Nack(d.DeliveryTag, false, true)
		}
		return nil, err
	}
	return out, nil
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

	// Settle lease by lease, in the order given, then make a round trip on
	// each lease's channel: it returns once the server has applied the
	// acks, and its passive declare tells a deleted queue.
	var leases []*lease
	byLease := map[*lease][]*handle{}
	for _, h := range hs {
		if _, ok := byLease[h.lease]; !ok {
			leases = append(leases, h.lease)
		}
		byLease[h.lease] = append(byLease[h.lease], h)
	}
	touched := false
	for _, l := range leases {
		sent, err := l.settle(byLease[l], ack)
		if err != nil {
			return err
		}
		touched = touched || sent
		if sent {
			if err := l.barrier(ctx, queue); err != nil {
				if isNotFound(err) {
					return notFound(name)
				}
				return wrap(err, "cannot settle messages")
			}
		}
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

// settle acks or nacks hs, all of l, skipping the ones settled before and
// all of them when l expired. It reports whether it sent anything.
func (l *lease) settle(hs []*handle, ack bool) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.expired {
		return false, nil
	}
	sent := false
	for _, h := range hs {
		if h.settled.Swap(true) {
			continue
		}
		var err error
		if ack {
			err = l.ch.Ack(h.tag, false)
		} else {
			err = l.ch.Nack(h.tag, false, true)
		}
		if err != nil {
			// The channel died (connection lost): RabbitMQ requeues what
			// it held, so the outcome is a redelivery.
			return false, herr.Wrap(herr.Unavailable, err, "lost the RabbitMQ channel; the messages will be redelivered")
		}
		sent = true
		l.pending--
	}
	return sent, nil
}

// barrier waits for the server to process everything sent on l's channel
// so far and checks that queue still exists, until ctx ends; the channel
// goes back to the pool (or is closed) once nothing on it is unsettled,
// also when the caller stopped waiting.
func (l *lease) barrier(ctx context.Context, queue string) error {
	_, err := bounded(ctx, func() (struct{}, error) {
		_, err := l.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		l.mu.Lock()
		finish := false
		if l.pending == 0 && !l.expired && l.ch != nil {
			finish = err == nil
			l.expired = true // settled for good: later settles are no-ops
		}
		l.mu.Unlock()
		if finish {
			l.done()
		}
		return struct{}{}, err
	}, nil)
	return err
}
