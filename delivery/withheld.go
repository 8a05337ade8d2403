package delivery

import (
	"fmt"
	"sync"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Events a principal may not read (docs/limits.md, "Events a principal
// may not read"). The store never hands such an event to the principal
// (leasestore.PullParams.Withhold): it is not shown, not settled, and not
// counted as a delivery, so however often the principal pulls, the
// others get exactly what they would have got without it.

// WithheldRetryAfter is the Retry-After of a durable-consumer pull
// refused (403) because the destination's next event is one the caller
// may not read: nothing the caller can do changes that, only a worker
// that may read the event, so it should not ask again at once.
const WithheldRetryAfter = 5 * time.Second

// pullWithhold returns the leasestore.PullParams.Withhold of a
// durable-consumer pull by p: an event whose type p may not receive
// (an event whose type cannot be read is withheld too, from every
// principal that may not receive every type). nil when p may receive
// every type: nothing to check, and no event to decode.
func pullWithhold(p *auth.Principal) func([]byte) bool {
	if p.CanReceiveAll() {
		return nil
	}
	return func(e []byte) bool { return !p.CanReceive(eventType(e)) }
}

// withheldError is what a durable-consumer pull answers for the store's
// *leasestore.WithheldError: 403 naming the event's type, with
// WithheldRetryAfter.
func withheldError(w *leasestore.WithheldError) error {
	typ := eventType(w.Event)
	return &herr.Error{
		Code: herr.PermissionDenied, Err: w, RetryAfter: WithheldRetryAfter,
		Message: fmt.Sprintf("the next event of this destination is of type %q, which the caller may not receive (%s%s): pull with a principal that may; the event, and the events after it, wait for one", typ, auth.PermReceivePrefix, typ),
	}
}

// withholder is the leasestore.PullParams.Withhold of one stream pull by a
// principal that may not receive every type. It decodes each event the
// store asks about once and keeps the result, so that leaseDeliveries,
// which needs the decoded event to deliver it, does not decode it again
// (decoding is the largest cost of a stream's push loop,
// docs/benchmarks.md). An event that does not decode, or breaks the
// publish rules, is not withheld: it is poison, which leaseDeliveries
// dead-letters whoever pulled it.
type withholder struct {
	p *auth.Principal

	mu      sync.Mutex
	decoded map[*byte]decodedEvent // by the address of the body's first byte
}

type decodedEvent struct {
	ev  *ConsumerEvent
	err error // DecodeConsumerEvent's or deliverable's
}

// newWithholder returns the withholder of p's pulls, or nil when p may
// receive every type.
func newWithholder(p *auth.Principal) *withholder {
	if p.CanReceiveAll() {
		return nil
	}
	return &withholder{p: p, decoded: map[*byte]decodedEvent{}}
}

// params sets pp.Withhold to w (unset for a nil w).
func (w *withholder) params(pp leasestore.PullParams) leasestore.PullParams {
	if w != nil {
		pp.Withhold = w.withhold
	}
	return pp
}

func (w *withholder) withhold(body []byte) bool {
	d := w.decode(body)
	return d.err == nil && !w.p.CanReceive(d.ev.EventType)
}

// decode returns body decoded, from what an earlier call kept if it saw
// the same body.
func (w *withholder) decode(body []byte) decodedEvent {
	if w != nil && len(body) > 0 {
		w.mu.Lock()
		d, ok := w.decoded[&body[0]]
		w.mu.Unlock()
		if ok {
			return d
		}
	}
	ev, err := DecodeConsumerEvent(body)
	if err == nil {
		err = ev.deliverable()
	}
	d := decodedEvent{ev: ev, err: err}
	if w != nil && len(body) > 0 {
		w.mu.Lock()
		w.decoded[&body[0]] = d
		w.mu.Unlock()
	}
	return d
}
