package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/ordertest"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// TestPublishBatchKeepsOrder: the events of one batch reach a broker that
// keeps publish order (the in-memory broker) in batch order, so a single
// worker pulls them in that order; an invalid event in the middle fails
// alone, with its own result, and the events around it are published.
// RabbitMQ and NATS JetStream run the same check in their packages.
func TestPublishBatchKeepsOrder(t *testing.T) {
	t.Parallel()
	broker := mem.New(time.Hour)
	t.Cleanup(func() { require.NoError(t, broker.Close()) })
	ordertest.PublishBatchKeepsOrder(t, broker)
}
