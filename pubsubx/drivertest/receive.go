package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// boundedN is the max of the bounded-receive tests; they send 3×boundedN.
const boundedN = 5

// testBoundedReceive: Receive(max=N) returns at most N, and three of them
// get all of 3N waiting messages at once. A driver that prefetched and
// kept the rest would strand them until the ack deadline and come up
// short here, since the default deadline is far longer than pollWait.
func testBoundedReceive(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "bounded", nil)
	sent := f.messages(3*boundedN, "herald.test", "/bounded")
	f.send(b, sent...)

	var got []*pubsubx.Message
	for i := range 3 {
		batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: boundedN, Wait: pollWait})
		require.NoError(t, err, "Receive %d", i+1)
		f.checkBatch(batch, boundedN)
		got = append(got, batch...)
	}
	require.ElementsMatch(t, ids(sent), ids(got), "three Receive(max=%d) calls should return all %d waiting messages, each once", boundedN, 3*boundedN)

	// All are in flight now: nothing is left to receive until settled.
	f.expectEmpty(b, sub)
	f.ack(b, sub, got)
	f.expectEmpty(b, sub)
}

// testReceiveFromSecondClient: after one client received N of 3N, a
// second client (another handler instance) gets the other 2N and none of
// the first client's N, which stay hidden until settled: at once, or,
// where the first client may hold what it did not return
// (Features.ReceiveHold), once that hold has passed, which bounds it.
func testReceiveFromSecondClient(t *testing.T, f *fixture) {
	hold := f.h.Features().ReceiveHold
	b := f.broker()
	sub := f.subscribe(b, "second", nil)
	sent := f.messages(3*boundedN, "herald.test", "/second")
	f.send(b, sent...)

	first, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: boundedN, Wait: pollWait})
	require.NoError(t, err, "Receive on the first client")
	f.checkBatch(first, boundedN)
	require.NotEmpty(t, first, "Receive on the first client returned nothing with %d messages waiting", len(sent))

	c2 := f.secondClient(b)
	held := time.Now().Add(hold) // the first client's hold ends by then
	var second []*pubsubx.Message
	for len(second) < len(sent)-len(first) {
		batch, err := c2.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: len(sent), Wait: pollWait})
		require.NoError(t, err, "Receive on the second client")
		f.checkBatch(batch, len(sent))
		if len(batch) == 0 && !time.Now().Before(held) {
			break // stranded: the assertion below says how many
		}
		second = append(second, batch...)
	}
	require.ElementsMatch(t, ids(sent), append(ids(first), ids(second)...),
		"the second client should get exactly the %d messages the first did not receive", len(sent)-len(first))

	f.ack(b, sub, first)
	require.NoError(t, c2.Ack(f.ctx, sub, second), "Ack on the second client")
	f.expectEmpty(b, sub)
}

// testReceiveNothing: with nothing available, Receive returns no message
// and no error once the wait passes, and at once with a zero wait (the
// delivery layer's default).
func testReceiveNothing(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "nothing", nil)
	for _, wait := range []time.Duration{0, quietWait} {
		batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: wait})
		require.NoError(t, err, "Receive on an empty subscription (wait %s)", wait)
		require.Empty(t, batch, "Receive on an empty subscription (wait %s)", wait)
	}
}

// testAck: acked messages are gone: nothing is received afterwards, and
// nacking an already-acked message is harmless (no error, no redelivery).
func testAck(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "ack", nil)
	sent := f.messages(10, "herald.test", "/ack")
	f.send(b, sent...)
	got := f.receiveUntil(b, sub, 10, hasAll(sent))
	require.Len(t, got, len(sent), "no redelivery expected before the ack deadline")

	f.ack(b, sub, got)
	f.expectEmpty(b, sub)
	require.NoError(t, b.Nack(f.ctx, sub, got), "Nack of acked messages")
	f.expectEmpty(b, sub)
}

// testNack: a nacked message is available again at once: the very next
// Receive returns it, unchanged, while acked ones stay gone.
func testNack(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "nack", nil)
	sent := f.messages(3, "herald.test", "/nack")
	f.send(b, sent...)
	got := distinct(f.receiveUntil(b, sub, 10, hasAll(sent)))

	nacked := got[eventID(sent[1])]
	require.NoError(t, b.Nack(f.ctx, sub, []*pubsubx.Message{nacked}), "Nack")
	f.ack(b, sub, []*pubsubx.Message{got[eventID(sent[0])], got[eventID(sent[2])]})

	again, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: pollWait})
	require.NoError(t, err, "Receive after Nack")
	require.Equal(t, []string{eventID(sent[1])}, ids(again), "the Receive right after a Nack should return the nacked message")
	require.Equal(t, sent[1].Body, again[0].Body, "redelivered body")
	require.Equal(t, sent[1].Metadata, again[0].Metadata, "redelivered metadata")
	f.ack(b, sub, again)
	f.expectEmpty(b, sub)
}
