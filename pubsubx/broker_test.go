package pubsubx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// missingTopic is a driver whose CreateSubscription finds a resource
// under the subscription missing, as a broker whose topic another caller
// is still creating answers.
type missingTopic struct{ driver.Broker }

func (missingTopic) CreateSubscription(context.Context, string, filter.Groups) error {
	return herr.New(herr.NotFound, "topic does not exist")
}

// TestCreateSubscriptionNeverNotFound: a NotFound from a driver's
// CreateSubscription names no resource of the caller's (the subscription
// is what it creates): the portable layer answers Unavailable, which
// clients retry, never a 404.
func TestCreateSubscriptionNeverNotFound(t *testing.T) {
	t.Parallel()
	inner := mem.New(0)
	t.Cleanup(func() { _ = inner.Close() })
	b := pubsubx.NewBroker(missingTopic{inner.Driver()})
	err := b.CreateSubscription(t.Context(), "sub", nil)
	require.Error(t, err)
	require.Equal(t, herr.Unavailable.String(), herr.CodeOf(err).String(), "%v", err)
	require.True(t, herr.Retryable(err))
}
