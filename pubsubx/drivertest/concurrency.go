package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
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

// Sizes of the concurrent-first-use test: as many creators at once as a
// burst of streams opening on a fresh deployment makes.
const (
	firstUseCreators = 40 // split over two clients
	firstUseSenders  = 4
)

// testConcurrentFirstUse: on a fresh topic (nothing created on the broker
// yet), 40 subscriptions are created at once from two clients while
// messages are sent. Every call succeeds: a broker resource that a driver
// makes lazily (the topic, an exchange, a stream) is made once and the
// concurrent callers wait for it; none fails, and none answers NotFound
// for a resource another caller is still making. Then every subscription
// delivers a message sent after they all exist.
func testConcurrentFirstUse(t *testing.T, f *fixture) {
	b := f.broker()
	clients := []*pubsubx.Broker{b, f.secondClient(b)}
	names := make([]string, firstUseCreators)
	for i := range names {
		names[i] = subName("first-use")
		f.deleteAtCleanup(b, names[i])
	}
	early := f.messages(firstUseSenders, "herald.test", "/first-use/early")
	start := make(chan struct{})
	createErrs := make([]error, len(names))
	sendErrs := make([]error, len(early))
	var wg sync.WaitGroup
	for i, name := range names {
		c := clients[i%len(clients)]
		wg.Go(func() {
			<-start
			createErrs[i] = c.CreateSubscription(f.ctx, name, nil)
		})
	}
	for i, m := range early {
		c := clients[i%len(clients)]
		wg.Go(func() {
			<-start
			sendErrs[i] = c.Send(f.ctx, m)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range createErrs {
		require.NoError(t, err, "CreateSubscription %d of %d, made at once on a fresh topic (code %s)", i+1, len(names), herr.CodeOf(err))
	}
	for i, err := range sendErrs {
		require.NoError(t, err, "Send %d of %d, made while the first subscriptions were created (code %s)", i+1, len(early), herr.CodeOf(err))
	}

	// Each subscription delivers what is sent now (and perhaps some of the
	// early messages, which raced with its creation). The subscriptions
	// are read at once, each until the message arrives.
	later := f.message("herald.test", "/first-use/later")
	f.send(b, later)
	sent := map[string]bool{eventID(later): true}
	for _, m := range early {
		sent[eventID(m)] = true
	}
	ctx, cancel := context.WithTimeout(f.ctx, livenessBound)
	defer cancel()
	recvErrs := make([]error, len(names))
	for i, name := range names {
		c := clients[i%len(clients)]
		wg.Go(func() { recvErrs[i] = receiveOne(ctx, c, name, eventID(later), sent) })
	}
	wg.Wait()
	for i, err := range recvErrs {
		require.NoError(t, err, "subscription %d of %d (%s)", i+1, len(names), names[i])
	}
}

// receiveOne receives from sub, acking what arrives, until the message
// with event id want did; a message whose id is not in sent, or a
// failed call, is an error.
func receiveOne(ctx context.Context, b *pubsubx.Broker, sub, want string, sent map[string]bool) error {
	for {
		batch, err := b.Receive(ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: pollWait})
		if err != nil {
			return fmt.Errorf("receive: %w (before message %s arrived)", err, want)
		}
		if len(batch) > 0 {
			if err := b.Ack(ctx, sub, batch); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
		}
		found := false
		for _, m := range batch {
			if !sent[eventID(m)] {
				return fmt.Errorf("delivered message %s, which was never sent", eventID(m))
			}
			found = found || eventID(m) == want
		}
		if found {
			return nil
		}
	}
}
