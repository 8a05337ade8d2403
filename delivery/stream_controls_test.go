package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit"
)

// TestStreamExtendAndDelayedNack drives the WebSocket bridge's Stream
// controls on the injectable clock: an extended event outlives the ack
// timeout with its session; a delayed nack is not delivered again before
// its delay while new events flow.
func TestStreamExtendAndDelayedNack(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Now())
	b := setup(t, setupOpts{now: clock.Now, streams: delivery.StreamConfig{SessionTTL: 24 * time.Hour, Batch: 10}})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer st.Close(ctx)
	b.publish(t, "a.b", 0, 2)
	ds := next(t, st)
	require.Equal(t, []int{0, 1}, ns(t, ds))

	rep, err := st.Extend(ctx, []int64{ds[0].Tag, ds[0].Tag, 99}, 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, delivery.ExtendReport{Extended: 1, Skipped: 2}, rep, "a repeated and an unknown tag are skipped")
	_, err = st.Extend(ctx, []int64{ds[0].Tag}, 0)
	require.Equal(t, herr.OutOfRange, herr.CodeOf(err))

	// Past the ack timeout, event 1 is delivered again; event 0 is not.
	clock.Advance(delivery.DefaultStreamAckTimeout)
	again := next(t, st)
	require.Equal(t, []int{1}, ns(t, again), "only the event not extended comes back")
	require.EqualValues(t, 2, again[0].DeliveryCount)
	srep, err := st.Ack(ctx, ds[0].Tag, ds[1].Tag)
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Acked: 1, Skipped: 1}, srep, "the extended event settles; the old delivery of event 1 does not")

	// A delayed nack: new events flow; the nacked one waits.
	bad := delivery.MaxNackDelay + time.Second
	_, err = st.SettleDelayed(ctx, nil, []int64{again[0].Tag}, &bad)
	require.Equal(t, herr.OutOfRange, herr.CodeOf(err))
	require.Equal(t, 1, st.Unsettled(), "a refused delay settles nothing")
	delay := 30 * time.Second
	srep, err = st.SettleDelayed(ctx, nil, []int64{again[0].Tag}, &delay)
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Nacked: 1}, srep)
	b.publish(t, "a.b", 2, 1)
	require.Equal(t, []int{2}, ns(t, next(t, st)), "new work flows while the nacked event waits")
	clock.Advance(delay)
	late := next(t, st)
	require.Equal(t, []int{1}, ns(t, late), "due after its delay")
	require.EqualValues(t, 3, late[0].DeliveryCount)
}

// TestSessionExtendAndDelayedNack: the same controls on a persisted
// session (the API Gateway bridge).
func TestSessionExtendAndDelayedNack(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Now())
	b := setup(t, setupOpts{now: clock.Now})
	ctx := t.Context()
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 2)
	ds := poll(t, b, root, st, 10)
	st.Tag(ds)
	require.Equal(t, []int{0, 1}, ns(t, ds))

	rep, err := b.svc.ExtendTags(ctx, st, []int64{ds[0].Tag, 42}, 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, delivery.ExtendReport{Extended: 1, Skipped: 1}, rep)
	require.Len(t, st.Tags, 2, "extending settles nothing")

	for range 20 { // past the ack timeout, heartbeating
		clock.Advance(delivery.DefaultStreamAckTimeout / 20)
		require.NoError(t, b.svc.TouchSession(ctx, st, 0))
	}
	again := poll(t, b, root, st, 10)
	require.Equal(t, []int{1}, ns(t, again), "only the event not extended comes back")
	st.Tag(again)

	ackRefs, nackRefs, _, srep := st.Take([]int64{ds[0].Tag}, []int64{again[0].Tag})
	delay := 20 * time.Second
	srep, err = b.svc.SettleRefsDelayed(ctx, st, ackRefs, nackRefs, &delay, srep)
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Acked: 1, Nacked: 1}, srep)
	b.publish(t, "a.b", 2, 1)
	require.Equal(t, []int{2}, ns(t, poll(t, b, root, st, 10)), "new work flows while the nacked event waits")
	clock.Advance(delay)
	require.NoError(t, b.svc.TouchSession(ctx, st, 0))
	require.Equal(t, []int{1}, ns(t, poll(t, b, root, st, 10)), "due after its delay")
}
