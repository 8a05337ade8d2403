package rabbit

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldevents/herald/pubsubx/driver"
)

// Backlog implements driver.BacklogReporter with a passive declare of the
// subscription's queue, whose answer counts the messages ready in it
// (not those delivered and unacknowledged). RabbitMQ does not say how old
// the oldest is: Oldest stays zero.
func (b *broker) Backlog(ctx context.Context, name string) (driver.Backlog, error) {
	if err := ctx.Err(); err != nil {
		return driver.Backlog{}, err
	}
	if b.isClosed() {
		return driver.Backlog{}, errClosed
	}
	if err := checkSubscription(name); err != nil {
		return driver.Backlog{}, err
	}
	var out driver.Backlog
	found := true
	err := b.sub.do(ctx, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queueName(b.exchange, name), true, false, false, false, nil)
		if isNotFound(err) {
			found = false
			return nil
		}
		out.Messages = int64(q.Messages)
		return err
	})
	if err != nil {
		return driver.Backlog{}, wrap(err, "cannot read the subscription's queue")
	}
	if !found {
		return driver.Backlog{}, notFound(name)
	}
	return out, nil
}
