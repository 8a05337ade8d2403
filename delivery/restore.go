package delivery

import (
	"context"

	"github.com/heraldevents/herald/herr"
)

// RestoreSubscriptions makes sure every stored consumer has its broker
// subscription, creating the missing ones at the head of the topic. It
// returns how many it created.
//
// The local adapter calls it at start when its broker lives in the process
// (mem://) and its store in a file: the consumers come back from the file,
// their subscriptions do not, and without this every pull would answer 404
// until the consumer was re-created. Events published while Herald was down
// are gone either way, as they always are with an in-memory broker.
func (s *Service) RestoreSubscriptions(ctx context.Context) (int, error) {
	cs, err := s.cfg.Store.ListConsumers(ctx)
	if err != nil {
		return 0, err
	}
	created := 0
	for _, c := range cs {
		if c.Subscription == "" {
			continue // a hub queue reads its home's hub subscription
		}
		err := s.cfg.Broker.CreateSubscription(ctx, c.Subscription, c.Filters)
		switch {
		case err == nil:
			created++
		case herr.CodeOf(err) != herr.AlreadyExists:
			return created, brokerErr(err)
		}
	}
	return created, nil
}
