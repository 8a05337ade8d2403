package drivertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// Sizes of the concurrent-receivers test.
const (
	concurrentMessages  = 200
	concurrentReceivers = 4 // split over two clients
	concurrentMax       = 10
)

// testConcurrentReceivers: four goroutines on two clients receive and ack
// 200 messages from one subscription. Every message arrives at least once
// (duplicates are allowed, at least once, and logged) and none is left.
func testConcurrentReceivers(t *testing.T, f *fixture) {
	b := f.broker()
	clients := []*pubsubx.Broker{b, f.secondClient(b)}
	sub := f.subscribe(b, "concurrent", nil)
	sent := f.messages(concurrentMessages, "herald.test", "/concurrent")
	f.sendParallel(b, sent, 8)

	ctx, cancel := context.WithTimeout(f.ctx, livenessBound)
	defer cancel()
	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		failures []error
		wg       sync.WaitGroup
	)
	for i := range concurrentReceivers {
		c := clients[i%len(clients)]
		wg.Go(func() {
			for ctx.Err() == nil {
				batch, err := c.Receive(ctx, sub, pubsubx.ReceiveParams{Max: concurrentMax, Wait: pollWait})
				if err == nil && len(batch) > concurrentMax {
					err = errors.New("receive returned more than max messages")
				}
				if err == nil && len(batch) > 0 {
					err = c.Ack(f.ctx, sub, batch) // not ctx: settle what was taken even when done
				}
				mu.Lock()
				if err != nil && ctx.Err() == nil {
					failures = append(failures, err)
				}
				for _, m := range batch {
					seen[eventID(m)]++
				}
				if len(seen) >= len(sent) || len(failures) > 0 {
					cancel() // done: release the other receivers
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	require.Empty(t, failures, "receivers failed")
	missing := []string{}
	duplicates := 0
	for _, id := range ids(sent) {
		switch n := seen[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			duplicates += n - 1
		}
	}
	require.Empty(t, missing, "messages never received by any of %d receivers", concurrentReceivers)
	require.Len(t, seen, len(sent), "received messages that were never sent")
	t.Logf("%d messages over %d receivers: %d duplicate deliveries", len(sent), concurrentReceivers, duplicates)
	for _, c := range clients {
		f.expectEmpty(c, sub)
	}
}

// testPublishOrder: where the backend promises publish order, a single
// receiver sees messages in send order, across batches and acks.
func testPublishOrder(t *testing.T, f *fixture) {
	if !f.h.Features().PublishOrder {
		t.Log("not applicable: the backend does not promise publish order (Features.PublishOrder is false)")
		return
	}
	b := f.broker()
	sub := f.subscribe(b, "order", nil)
	sent := f.messages(50, "herald.test", "/order")
	f.send(b, sent...) // one after another: each Send returned before the next

	var got []*pubsubx.Message
	giveUp := time.Now().Add(livenessBound)
	for len(got) < len(sent) && time.Now().Before(giveUp) {
		batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 7, Wait: pollWait})
		require.NoError(t, err, "Receive")
		f.checkBatch(batch, 7)
		f.ack(b, sub, batch)
		got = append(got, batch...)
	}
	require.Equal(t, ids(sent), ids(got), "a single receiver should see send order")
	f.expectEmpty(b, sub)
}
