package delivery_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
)

// TestStreamOpensShed: past StreamConfig.MaxOpening opens in progress a
// new open of any kind is refused at once with Unavailable and a
// Retry-After of 1–3 s; once an open finishes the next one succeeds, and streams already open
// keep delivering.
func TestStreamOpensShed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{streams: delivery.StreamConfig{MaxOpening: 1}})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	open, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err, "one open at a time is within the bound")
	t.Cleanup(func() { _ = open.Close(t.Context()) })

	release, err := delivery.HoldOpen(b.svc)
	require.NoError(t, err)
	_, err = b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	var shed *delivery.OpensShedError
	require.True(t, errors.As(err, &shed), "got %v", err)
	require.Equal(t, herr.Unavailable, herr.CodeOf(err))
	ra, ok := herr.RetryAfterOf(err)
	require.True(t, ok)
	require.GreaterOrEqual(t, ra, time.Second)
	require.LessOrEqual(t, ra, 3*time.Second)
	_, err = b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.NonDurable, FilterGroups: groupsOf("a.b")})
	require.ErrorAs(t, err, &shed, "every kind counts against the one bound")
	require.EqualValues(t, 2, b.svc.OpensShed())

	b.publish(t, "a.b", 0, 1)
	require.Len(t, next(t, open), 1, "the open stream is not touched")

	release()
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err, "room again once an open finished")
	require.NoError(t, st.Close(t.Context()))
}
