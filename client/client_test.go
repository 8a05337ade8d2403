package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

func TestPublishPullAcknowledge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, []client.FilterGroup{{EventType: "shop.order.placed"}})
	require.NoError(t, err)
	require.Equal(t, client.DurableConsumer, d.Type)

	e, err := client.NewEvent("shop.order.placed", "/orders/1", map[string]int{"id": 1})
	require.NoError(t, err)
	e.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	res, err := b.c.Publish(ctx, e)
	require.NoError(t, err)
	require.True(t, res.Success)
	assert.Equal(t, "shop.order.placed", res.Event.Type())
	assert.Equal(t, "/orders/1", res.Event.Subject())
	assert.Equal(t, e.Time(), res.Event.Time())

	batch := make([]event.Event, 0, 3)
	for i := 2; i <= 3; i++ {
		e, err := client.NewEvent("shop.order.placed", fmt.Sprintf("/orders/%d", i), map[string]int{"id": i})
		require.NoError(t, err)
		batch = append(batch, e)
	}
	bad := event.New()
	bad.SetType("not a type!")
	batch = append(batch, bad)
	results, err := b.c.PublishBatch(ctx, batch)
	require.NoError(t, err)
	require.Len(t, results, 3)
	assert.True(t, results[0].Success)
	assert.True(t, results[1].Success)
	assert.False(t, results[2].Success, "an invalid event fails alone")
	assert.NotEmpty(t, results[2].FailureReason)

	l, err := b.c.Pull(ctx, d.ID, client.PullOptions{Limit: 10, Visibility: 30 * time.Second, WorkerID: "w1"})
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Len(t, l.Events, 3)
	seen := map[int]bool{}
	for _, ev := range l.Events {
		assert.Equal(t, "shop.order.placed", ev.Type())
		var data map[string]int
		require.NoError(t, ev.DataAs(&data))
		assert.Equal(t, fmt.Sprintf("/orders/%d", data["id"]), ev.Subject())
		seen[data["id"]] = true
		assert.NotEmpty(t, ev.ID())
		assert.Contains(t, ev.Extensions(), "sequence")
	}
	assert.Equal(t, map[int]bool{1: true, 2: true, 3: true}, seen)
	ack, err := b.c.Acknowledge(ctx, d.ID, l, client.AckOK)
	require.NoError(t, err)
	assert.Equal(t, client.OutcomeCommitted, ack.Outcome)
	require.NotNil(t, ack.Committed)

	// Caught up: nil lease, nil error.
	l, err = b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w1"})
	require.NoError(t, err)
	assert.Nil(t, l)

	got, err := b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.Equal(t, ack.Committed, got.Committed)
	assert.Zero(t, got.InFlight)
}

func TestConsumerManagement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	list, err := b.c.ListConsumers(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, d.ID, list[0].ID)

	p, err := b.c.PauseConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.True(t, p.Paused)
	_, err = b.c.Pull(ctx, d.ID, client.PullOptions{})
	assert.Equal(t, 409, client.StatusCode(err), "a paused consumer answers 409: %v", err)
	r, err := b.c.ResumeConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.False(t, r.Paused)

	require.NoError(t, b.c.DeleteConsumer(ctx, d.ID))
	_, err = b.c.GetConsumer(ctx, d.ID)
	assert.True(t, client.IsNotFound(err), "%v", err)
	var he *client.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "not_found", he.Code)

	_, err = b.c.CreateConsumer(ctx, []client.FilterGroup{{EventType: "a", Filters: []client.ResourceFilter{{FilterType: client.FilterEq}}}})
	assert.Equal(t, 422, client.StatusCode(err), "an eq filter needs a resource id: %v", err)
}

func TestWrongTokenIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, err := client.New(b.h.URL, client.WithToken("wrong-token"))
	require.NoError(t, err)
	_, err = c.ListConsumers(testContext(t))
	assert.Equal(t, 401, client.StatusCode(err))
	assert.NotContains(t, err.Error(), "wrong-token", "errors never repeat a token")
}

// TestConsume runs three workers over 30 events; the handler fails the
// first delivery of every batch that holds event 7, so that batch comes
// again with a higher attempt. Every event is then committed once.
func TestConsume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	const n = 30
	for i := range n {
		b.publish(t, "shop.order.placed", fmt.Sprintf("/orders/%d", i), map[string]int{"id": i})
	}

	var mu sync.Mutex
	done := map[int]bool{}
	failedOnce := false
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = b.c.Consume(cctx, d.ID, func(_ context.Context, l *client.Lease) error {
		mu.Lock()
		defer mu.Unlock()
		ids := make([]int, len(l.Events))
		for i, ev := range l.Events {
			var data struct{ ID int }
			require.NoError(t, ev.DataAs(&data))
			ids[i] = data.ID
		}
		for _, id := range ids {
			if id == 7 && !failedOnce {
				failedOnce = true
				return errors.New("downstream unavailable")
			}
		}
		for _, id := range ids {
			assert.False(t, done[id], "event %d committed twice", id)
			done[id] = true
		}
		if len(done) == n {
			cancel()
		}
		return nil
	}, client.ConsumeOptions{Workers: 3, Limit: 4, Visibility: 60 * time.Second, IdleBackoff: 10 * time.Millisecond, MaxIdleBackoff: 50 * time.Millisecond})
	require.NoError(t, err, "a graceful stop returns nil")
	assert.True(t, failedOnce)
	assert.Len(t, done, n)

	got, err := b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.Zero(t, got.InFlight, "every batch in hand was acknowledged before Consume returned")
	require.NotNil(t, got.Committed)
}

// TestConsumeGracefulStop cancels Consume while the handler holds a batch:
// the batch is finished and acknowledged, and nothing new is pulled.
func TestConsumeGracefulStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "", nil)
	b.publish(t, "a.b", "", nil)

	inHandler := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	var handlerCtxErr error
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- b.c.Consume(cctx, d.ID, func(hctx context.Context, l *client.Lease) error {
			calls.Add(1)
			close(inHandler)
			<-release
			handlerCtxErr = hctx.Err()
			return nil
		}, client.ConsumeOptions{Limit: 1})
	}()
	<-inHandler
	cancel()
	close(release)
	require.NoError(t, <-errc)
	assert.NoError(t, handlerCtxErr, "the handler's context outlives the stop")
	assert.Equal(t, int32(1), calls.Load(), "no batch is pulled after the stop")

	got, err := b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.Zero(t, got.InFlight, "the batch in hand was acknowledged")
	require.NotNil(t, got.Committed)
	assert.Equal(t, "001.00000000000000000001", *got.Committed)
}

func TestConsumeStopsOnDeletedConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	err := b.c.Consume(ctx, "no-such-consumer", func(context.Context, *client.Lease) error { return nil }, client.ConsumeOptions{Workers: 2})
	assert.True(t, client.IsNotFound(err), "%v", err)
}

func TestDurableQueueStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	q, err := b.c.EnsureQueue(ctx, "orders-"+t.Name(), []client.FilterGroup{{EventType: "shop.order.placed"}})
	require.NoError(t, err)
	assert.True(t, q.Created)
	again, err := b.c.EnsureQueue(ctx, q.ID, nil)
	require.NoError(t, err)
	assert.False(t, again.Created)
	assert.Equal(t, "shop.order.placed", again.FilterGroups[0].EventType, "an existing queue answers with its own filters")

	for i := range 3 {
		b.publish(t, "shop.order.placed", fmt.Sprintf("/orders/%d", i), map[string]int{"id": i})
	}
	b.publish(t, "shop.other", "", nil) // filtered out

	var mu sync.Mutex
	acked := map[int]bool{}
	ids := map[int]string{} // event id by message id: the same on a redelivery
	nacked := false
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = b.c.Stream(cctx, q.ID, func(_ context.Context, d *client.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, "shop.order.placed", d.Event.Type)
		assert.NotZero(t, d.DeliveryTag)
		var m struct{ ID int }
		require.NoError(t, json.Unmarshal(d.Event.Message, &m))
		assert.NotEmpty(t, d.Event.ID)
		if id, seen := ids[m.ID]; seen {
			assert.Equal(t, id, d.Event.ID, "a redelivery carries the event's id")
		}
		ids[m.ID] = d.Event.ID
		assert.Equal(t, fmt.Sprintf("/orders/%d", m.ID), d.Event.ResourceID)
		if m.ID == 1 && !nacked {
			nacked = true
			return errors.New("try again")
		}
		acked[m.ID] = true
		if len(acked) == 3 {
			cancel()
		}
		return nil
	})
	require.NoError(t, err)
	assert.True(t, nacked)
	assert.Len(t, acked, 3)

	got, err := b.c.GetConsumer(ctx, q.ID)
	require.NoError(t, err)
	assert.Zero(t, got.InFlight, "every event was settled before Stream returned")

	require.NoError(t, b.c.UpdateQueue(ctx, q.ID, []client.FilterGroup{{EventType: "shop.order.placed"}}, []client.FilterGroup{{EventType: "shop.other"}}))
	err = b.c.UpdateQueue(ctx, q.ID, []client.FilterGroup{{EventType: "wrong"}}, nil)
	assert.Equal(t, 422, client.StatusCode(err))
	require.NoError(t, b.c.DeleteQueue(ctx, q.ID))
	err = b.c.Stream(ctx, q.ID, func(context.Context, *client.Delivery) error { return nil })
	assert.True(t, client.IsNotFound(err), "a deleted queue ends the stream: %v", err)
	assert.True(t, client.IsNotFound(b.c.DeleteQueue(ctx, q.ID)))
}

// TestStreamReconnects cuts the connection under a durable and a
// non-durable stream: both reconnect (the durable one by queue id, the
// non-durable one with its reconnect token) and get what was published
// after the cut.
func TestStreamReconnects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	proxy := newCutProxy(t, b.h.URL)
	pc, err := client.New(proxy.URL(), client.WithToken(b.h.Token))
	require.NoError(t, err)
	t.Cleanup(pc.Close)
	q, err := b.c.EnsureQueue(ctx, "reconnect-"+t.Name(), []client.FilterGroup{{EventType: "durable.ev"}})
	require.NoError(t, err)

	t.Run("durable", func(t *testing.T) {
		got := make(chan int, 10)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- pc.Stream(cctx, q.ID, func(_ context.Context, d *client.Delivery) error {
				var m struct{ N int }
				_ = json.Unmarshal(d.Event.Message, &m)
				got <- m.N
				return nil
			}, client.WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond))
		}()
		b.publish(t, "durable.ev", "", map[string]int{"n": 1})
		require.Equal(t, 1, <-got)
		proxy.cut()
		b.publish(t, "durable.ev", "", map[string]int{"n": 2})
		for n := 0; n != 2; {
			select {
			case n = <-got: // 1 may come again: its ack may have been cut off
				require.Contains(t, []int{1, 2}, n)
			case err := <-errc:
				t.Fatalf("Stream ended instead of reconnecting: %v", err)
			}
		}
		cancel()
		require.NoError(t, <-errc)
	})

	t.Run("non-durable", func(t *testing.T) {
		tokens := make(chan string, 10)
		got := make(chan int, 10)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- pc.StreamNonDurable(cctx, []client.FilterGroup{{EventType: "nd.ev"}}, func(_ context.Context, d *client.Delivery) error {
				var m struct{ N int }
				_ = json.Unmarshal(d.Event.Message, &m)
				got <- m.N
				return nil
			}, client.OnReconnectToken(func(tok string) { tokens <- tok }),
				client.WithReconnectBackoff(10*time.Millisecond, 50*time.Millisecond))
		}()
		first := <-tokens // the queue exists: publishing now reaches it
		b.publish(t, "nd.ev", "", map[string]int{"n": 1})
		require.Equal(t, 1, <-got)
		proxy.cut()
		var again string
		select {
		case again = <-tokens: // reattached
		case err := <-errc:
			t.Fatalf("StreamNonDurable ended instead of reconnecting: %v", err)
		}
		assert.Equal(t, first, again, "the reconnect resumes the same queue")
		b.publish(t, "nd.ev", "", map[string]int{"n": 2})
		select {
		case n := <-got:
			require.Equal(t, 2, n)
		case err := <-errc:
			t.Fatalf("StreamNonDurable ended instead of reconnecting: %v", err)
		}
		cancel()
		require.NoError(t, <-errc)
	})
}

func TestStreamNonDurableHandlerErrorStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	ready := make(chan struct{})
	errc := make(chan error, 1)
	boom := errors.New("boom")
	go func() {
		errc <- b.c.StreamNonDurable(ctx, nil, func(context.Context, *client.Delivery) error { return boom },
			client.OnReconnectToken(func(string) { close(ready) }))
	}()
	<-ready
	b.publish(t, "any.type", "", nil)
	assert.ErrorIs(t, <-errc, boom)
}

// TestDeadLetters dead-letters an event (delivery limit 1: its first
// redelivery would pass it), lists, replays and discards it.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *local.Config) { c.DeliveryLimit = 1 })
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "poison.pill", "/p/1", map[string]int{"n": 1})

	deadLetter := func() {
		t.Helper()
		l, err := b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w"})
		require.NoError(t, err)
		require.NotNil(t, l)
		res, err := b.c.Acknowledge(ctx, d.ID, l, client.AckFailed)
		require.NoError(t, err)
		require.Equal(t, client.OutcomeRequeued, res.Outcome)
		l, err = b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w"})
		require.NoError(t, err)
		require.Nil(t, l, "the redelivery passes the limit: dead-lettered")
	}
	deadLetter()
	dls, err := b.c.AllDeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "DELIVERY_LIMIT", dls[0].Reason)
	assert.Equal(t, d.ID, dls[0].OriginQueue)
	assert.Equal(t, "poison.pill", dls[0].Event.Type)
	assert.Equal(t, "/p/1", dls[0].ResourceID)

	var progress []int
	out, err := b.c.ActOnDeadLetters(ctx, []client.DeadLetterAction{{ID: dls[0].ID, Action: client.ActionReplay}}, func(n int) { progress = append(progress, n) })
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, client.OutcomeReplayed, out[0].Outcome)
	assert.Equal(t, []int{1}, progress)
	l, err := b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w2"})
	require.NoError(t, err)
	require.NotNil(t, l, "the replayed event is back on its consumer")
	require.Len(t, l.Events, 1)
	_, err = b.c.Acknowledge(ctx, d.ID, l, client.AckFailed)
	require.NoError(t, err)
	_, err = b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w2"})
	require.NoError(t, err)

	dls, err = b.c.AllDeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	out, err = b.c.DiscardDeadLetters(ctx, dls[0].ID)
	require.NoError(t, err)
	assert.Equal(t, client.OutcomeDiscarded, out[0].Outcome)
	dls, err = b.c.AllDeadLetters(ctx)
	require.NoError(t, err)
	assert.Empty(t, dls)
}
