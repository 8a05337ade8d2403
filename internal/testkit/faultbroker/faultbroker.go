// Package faultbroker wraps a pubsubx driver so that a test can make
// publishing fail on purpose: refuse some messages, fail every one, or
// never answer until the caller's context ends. It is the broker side of
// Herald's fault injection; the lease store's side is the point hook of
// leasestore/internal/faults, which its conformance suite drives. Only
// tests import it.
package faultbroker

import (
	"context"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Broker is a driver.Broker whose SendBatch asks Fault about each message
// first. Every other method is the wrapped broker's.
type Broker struct {
	driver.Broker
	// Fault decides a message's fate: a non-nil error fails that message
	// and it is not sent; nil sends it through the wrapped broker, in its
	// batch order with the others. Fault may block on ctx (see Hang). A
	// nil Fault sends everything.
	Fault func(ctx context.Context, m *pubsubx.Message) error
}

// Wrap returns a function that wraps a driver with fault, the shape
// inmem.Options.Wrap and the transport tests' setup take.
func Wrap(fault func(ctx context.Context, m *pubsubx.Message) error) func(driver.Broker) driver.Broker {
	return func(b driver.Broker) driver.Broker { return &Broker{Broker: b, Fault: fault} }
}

// SendBatch implements driver.Broker.
func (b *Broker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	errs := make([]error, len(msgs))
	if b.Fault == nil {
		return b.Broker.SendBatch(ctx, msgs)
	}
	pass := make([]*pubsubx.Message, 0, len(msgs))
	at := make([]int, 0, len(msgs))
	for i, m := range msgs {
		if errs[i] = b.Fault(ctx, m); errs[i] == nil {
			pass, at = append(pass, m), append(at, i)
		}
	}
	if len(pass) > 0 {
		for j, err := range b.Broker.SendBatch(ctx, pass) {
			errs[at[j]] = err
		}
	}
	return errs
}

// Fail fails every message with err.
func Fail(err error) func(context.Context, *pubsubx.Message) error {
	return func(context.Context, *pubsubx.Message) error { return err }
}

// Hang answers no message until ctx ends, then fails it with
// herr.DeadlineExceeded and detail: a broker that stopped answering.
func Hang(detail string) func(context.Context, *pubsubx.Message) error {
	return func(ctx context.Context, _ *pubsubx.Message) error {
		<-ctx.Done()
		return herr.Wrap(herr.DeadlineExceeded, ctx.Err(), detail)
	}
}
