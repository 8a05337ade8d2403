package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
)

// hour is a broker wait no test outlives: a redelivery that sat it out
// would fail the test on next's 30 s guard.
const hour = time.Hour

// TestNackInterruptsTheBrokerWait: the notifications API says a nacked message "is
// requeued and redelivered immediately, possibly on the same stream". A
// Next already waiting at an empty broker returns the nacked event
// without waiting out StreamConfig.PollWait, however the nack and the
// pull interleave.
func TestNackInterruptsTheBrokerWait(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{deliveryLimit: 10, streams: delivery.StreamConfig{Batch: 1, PollWait: hour}})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer st.Close(ctx)
	b.publish(t, "a.b", 0, 1)

	d := next(t, st)[0]
	for count := int64(2); count <= 8; count++ {
		// Next is waiting at the (now empty) broker when the nack lands.
		got := make(chan []delivery.Delivery, 1)
		go func() { got <- next(t, st) }()
		if count == 2 {
			<-b.broker.receiving // the first wait at the empty broker
		}
		_, err := st.Nack(ctx, d.Tag)
		require.NoError(t, err)
		select {
		case ds := <-got:
			require.Len(t, ds, 1)
			d = ds[0]
			require.Equal(t, 0, nOf(t, d))
			require.Equal(t, count, d.DeliveryCount)
		case <-time.After(30 * time.Second):
			t.Fatalf("delivery %d waited for the broker's poll wait", count)
		}
	}

}

// TestClosedStreamHandsBackWhatItsWaitReceived: a broker receive left
// running by a nack or a cancelled Next may receive an event after the
// stream stopped pulling. Close hands it back to the broker, so the next
// session gets it at once, not after the broker's ack deadline (an hour
// here).
func TestClosedStreamHandsBackWhatItsWaitReceived(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{streams: delivery.StreamConfig{Batch: 10, PollWait: hour}})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)

	// A Next that gives up while its broker receive waits on.
	nextCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := st.Next(nextCtx); done <- err }()
	<-b.broker.receiving
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	// The receive still running takes the next event; Close hands it back.
	b.publish(t, "a.b", 7, 1)
	require.NoError(t, st.Close(ctx))

	st2, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer st2.Close(ctx)
	ds := next(t, st2)
	require.Len(t, ds, 1)
	require.Equal(t, 7, nOf(t, ds[0]))
	require.EqualValues(t, 1, ds[0].DeliveryCount, "it was never delivered before")
}

// TestReconnectTokenStaysOutOfErrorText: a non-durable queue's id is its
// reconnect token; the errors a lost session produces (which transports
// log) carry no more of it than a short prefix.
func TestReconnectTokenStaysOutOfErrorText(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.NonDurable})
	require.NoError(t, err)
	defer st.Close(ctx)
	token := st.QueueID()
	n, err := b.store.EvictSessions(ctx, token)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = st.Next(ctx)
	require.Error(t, err)
	require.Equal(t, delivery.ConsumerCancelledMessage, herr.MessageOf(err))
	require.NotContains(t, err.Error(), token)
	require.Contains(t, err.Error(), token[:7]+"…")
}
