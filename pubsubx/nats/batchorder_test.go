package nats_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/ordertest"
)

// TestPublishBatchKeepsOrder: a batch publish through delivery reaches
// the real server in batch order, so a single worker of a durable
// consumer pulls the events in that order; an invalid event fails alone
// (internal/ordertest).
func TestPublishBatchKeepsOrder(t *testing.T) {
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err)
	b, err := h.MakeBroker(t.Context(), t)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	ordertest.PublishBatchKeepsOrder(t, b)
}
