package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// A publish must not depend on how fast any consumer reads. A broker that
// bounds what one subscription holds (the in-memory broker's
// reject-publish bound, package pubsubx/mem) refuses an event for a
// subscription that is full — its consumer is slow, stuck, or gone — and
// stores it for every other one (pubsubx.SubscriptionsFullError). Reported
// as a failure, that made every publish of the types such a consumer
// reads answer success:false once it fell behind (one SSE client that
// never read failed 644 of 2,000 publishes), and a publisher that retried
// sent the event again to everyone else. Instead the event goes to the
// dead-letter queue of each full subscription's consumer, reason MAXLEN
// (leasestore.Store.DeadLetterUnreceived), where an operator can replay it
// once the consumer has caught up, and the publish succeeds: the event is
// in every queue it was published to, or in that queue's dead-letter
// queue. Only when that write fails does the publish report the broker's
// refusal (success:false), and the event is then in no such consumer's
// hands, nor reported sent.

// maxSubscriptionOwners bounds the subscription→consumer cache; past it
// the cache starts over.
const maxSubscriptionOwners = 10_000

// subscriptionOwners maps broker subscription names to the consumers
// that own them, read from the store's consumer list on a miss.
type subscriptionOwners struct {
	mu     sync.Mutex
	owners map[string]owner
}

// owner is the consumer that owns a subscription.
type owner struct {
	id   string
	kind StreamKind // how logs name it: a non-durable queue's id is its reconnect token
}

// subscriptionOwner returns the consumer that owns subscription sub; a
// zero owner when no consumer record names it.
func (s *Service) subscriptionOwner(ctx context.Context, sub string) (owner, error) {
	o := &s.owners
	o.mu.Lock()
	own, ok := o.owners[sub]
	o.mu.Unlock()
	if ok {
		return own, nil
	}
	cs, err := s.cfg.Store.ListConsumers(ctx)
	if err != nil {
		return owner{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owners == nil || len(o.owners)+len(cs) > maxSubscriptionOwners {
		o.owners = make(map[string]owner, len(cs))
	}
	for _, c := range cs {
		kind := Durable
		if c.Type == leasestore.TypeNonDurableQueue {
			kind = NonDurable
		}
		o.owners[c.Subscription] = owner{id: c.ID, kind: kind}
	}
	return o.owners[sub], nil
}

// deadLetterOverflow puts msg, which the subscriptions of full did not
// take, into their consumers' dead-letter queues (see above). nil means
// the event is safe everywhere it was published to; otherwise the error
// to report (full itself when this function has no lease store, as a
// publish-only function has none).
func (s *Service) deadLetterOverflow(ctx context.Context, msg *pubsubx.Message, full *pubsubx.SubscriptionsFullError) error {
	if s.cfg.Store == nil {
		return full
	}
	id := msg.Metadata[pubsubx.AttrEventID]
	if id == "" {
		return full
	}
	body, err := s.resolve(ctx, "", msg)
	if err != nil {
		return errors.Join(full, err)
	}
	for _, sub := range full.Subscriptions {
		own, err := s.subscriptionOwner(ctx, sub)
		if err != nil {
			return errors.Join(full, err)
		}
		if own.id == "" {
			// No consumer record owns it, so there is no dead-letter queue
			// to keep the event in: whoever reads the subscription would
			// lose it. Report the refusal, as a broker bound does.
			return full
		}
		err = s.cfg.Store.DeadLetterUnreceived(ctx, own.id, []leasestore.Unreceived{{ID: id, Body: body}}, leasestore.ReasonMaxLen)
		if herr.CodeOf(err) == herr.NotFound {
			continue // the consumer is gone, and its subscription with it
		}
		if err != nil {
			return errors.Join(full, err)
		}
		s.warnings.Log(ctx, s.cfg.Logger, slog.LevelWarn, "overflow\x00"+own.id,
			"a consumer's broker subscription is full: events published for it go to its dead-letter queue (reason MAXLEN) until it catches up",
			queueAttr(own.kind, own.id), "event_type", msg.EventType(), slog.String("err", full.Error()))
	}
	return nil
}
