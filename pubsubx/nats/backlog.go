package nats

import (
	"context"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Backlog implements driver.BacklogReporter from the consumer's info
// (one request to the server): NumPending counts the stream's messages
// that match the consumer's filter and were never delivered to it (those
// delivered and waiting for redelivery are not counted). JetStream's consumer info does not say
// how old the oldest is: Oldest stays zero.
func (b *broker) Backlog(ctx context.Context, name string) (driver.Backlog, error) {
	js, err := b.begin(ctx, name, nil)
	if err != nil {
		return driver.Backlog{}, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	c, err := js.Consumer(ctx, b.opts.Stream, consumerName(name))
	if err != nil {
		if codeOf(err) == herr.NotFound {
			return driver.Backlog{}, notFound(name)
		}
		return driver.Backlog{}, wrap(err, "cannot look up the subscription")
	}
	info := c.CachedInfo()
	return driver.Backlog{Messages: int64(info.NumPending)}, nil
}
