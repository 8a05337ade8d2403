package delivery

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// Lag is what a consumer has not been handed yet: its broker
// subscription's backlog (pubsubx.Broker.Backlog). Events leased or
// waiting for redelivery are a consumer's InFlight and Requeued, not its
// lag.
type Lag struct {
	// Events counts the events ready at the broker for the consumer
	// (SQS's approximation on SNS/SQS).
	Events int64
	// Oldest is when the oldest of them was published; zero when the
	// broker does not tell (every broker but the in-memory one) or there
	// is none.
	Oldest time.Time
}

const (
	// lagTimeout bounds one backlog lookup: a console refreshing its
	// overview would rather show "unknown" than wait on a slow broker.
	lagTimeout = 2 * time.Second
	// lagLookups bounds the backlog lookups one listing makes at once.
	lagLookups = 8
)

// Lags returns the lag of each consumer of cs, index for index: nil
// where it is unknown (a queue served by a process's hub or shared, which
// has no subscription of its own; a broker that cannot tell; a lookup
// that failed or took longer than 2 s, logged at debug level). It never
// fails: a lag is a hint for an operator, not part of a consumer.
func (s *Service) Lags(ctx context.Context, cs []*leasestore.Consumer) []*Lag {
	out := make([]*Lag, len(cs))
	sem := make(chan struct{}, lagLookups)
	var wg sync.WaitGroup
	for i, c := range cs {
		if c == nil || c.Subscription == "" {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = s.lag(ctx, c.Subscription)
		}()
	}
	wg.Wait()
	return out
}

func (s *Service) lag(ctx context.Context, subscription string) *Lag {
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	b, err := s.cfg.Broker.Backlog(ctx, subscription)
	if err != nil {
		if !errors.Is(err, pubsubx.ErrNoBacklog) && herr.CodeOf(err) != herr.NotFound {
			s.cfg.Logger.DebugContext(ctx, "backlog lookup failed", "subscription", subscription, "err", err)
		}
		return nil
	}
	return &Lag{Events: b.Messages, Oldest: b.Oldest}
}
