package pubsubx

import (
	"context"
	"sync"
)

// BatchSender is implemented by a Broker that can send several messages in
// one go through its broker's batch API (SNS PublishBatch, JetStream async
// publish, RabbitMQ pipelined publisher confirms, …).
//
// SendBatch sends msgs in slice order: on a broker that keeps publish order
// (the driver's documented order guarantee), a single receiver sees them in
// that order. It returns one error per message, len(msgs) long, index for
// index; a nil entry means the broker accepted that message, exactly as a
// nil error from Send does. One message failing does not stop the others
// (but once ctx ends, the messages not yet accepted fail with ctx's
// error). The round trips overlap: a batch costs about one round trip,
// not one per message.
type BatchSender interface {
	SendBatch(ctx context.Context, msgs []*Message) []error
}

// sendBatchFallbackConcurrency bounds the parallel sends of SendBatch's
// fallback for a broker that keeps no publish order.
const sendBatchFallbackConcurrency = 16

// Ordering is implemented by a Broker to declare whether it keeps publish
// order; SendBatch's fallback uses it. A Broker without it is taken as
// keeping order, so the fallback sends one message at a time.
type Ordering interface {
	// KeepsPublishOrder reports whether a single receiver of a
	// subscription sees messages in the order they were sent.
	KeepsPublishOrder() bool
}

// SendBatch sends msgs to b in order, with one result per message (see
// BatchSender). It uses b's SendBatch where b implements BatchSender.
// Otherwise it sends through Send: one at a time, in order, unless b
// declares (Ordering) that it keeps no publish order, in which case up
// to 16 sends overlap, since order cannot be observed anyway.
func SendBatch(ctx context.Context, b Broker, msgs []*Message) []error {
	if len(msgs) == 0 {
		return nil
	}
	if bs, ok := b.(BatchSender); ok {
		return bs.SendBatch(ctx, msgs)
	}
	errs := make([]error, len(msgs))
	if o, ok := b.(Ordering); ok && !o.KeepsPublishOrder() {
		sem := make(chan struct{}, sendBatchFallbackConcurrency)
		var wg sync.WaitGroup
		for i, m := range msgs {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs[i] = b.Send(ctx, m)
			}()
		}
		wg.Wait()
		return errs
	}
	for i, m := range msgs {
		errs[i] = b.Send(ctx, m)
	}
	return errs
}
