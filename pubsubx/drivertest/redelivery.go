package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// Ack deadlines of the redelivery test.
const (
	// shortAckDeadline is what the test asks a ShortAckDeadline harness for.
	shortAckDeadline = time.Second
	// maxDefaultAckDeadline is the longest Features.AckDeadline the test
	// waits out when the harness cannot make a short one.
	maxDefaultAckDeadline = 10 * time.Second
)

// testRedelivery: a message received and abandoned (neither acked nor
// nacked, as by a handler that crashed) is delivered again, unchanged,
// once its ack deadline passes.
func testRedelivery(t *testing.T, f *fixture) {
	var (
		b        *pubsubx.Broker
		deadline time.Duration
	)
	if s, ok := f.h.(ShortAckDeadline); ok {
		var err error
		b, err = s.MakeBrokerWithAckDeadline(f.ctx, t, shortAckDeadline)
		require.NoError(t, err, "MakeBrokerWithAckDeadline")
		t.Cleanup(func() { closeQuietly(t, b) })
		deadline = shortAckDeadline
	} else if d := f.h.Features().AckDeadline; d > 0 && d <= maxDefaultAckDeadline {
		b, deadline = f.broker(), d
	} else {
		t.Logf("not applicable: the harness cannot make a short ack deadline (no ShortAckDeadline) and Features.AckDeadline is %s (exercised only when ≤ %s)", d, maxDefaultAckDeadline)
		return
	}

	sub := f.subscribe(b, "redeliver", nil)
	sent := f.messages(2, "herald.test", "/redeliver")
	f.send(b, sent...)
	first := f.receiveUntil(b, sub, 10, hasAll(sent))

	// Abandon first. A broker may make the deadline longer than asked (its
	// minimum); waiting up to three times the longer of the two and 10 s
	// still tells a late redelivery from a lost message.
	bound := 3*max(deadline, maxDefaultAckDeadline) + pollWait
	giveUp := time.Now().Add(bound)
	var again []*pubsubx.Message
	for !hasAll(sent)(again) && time.Now().Before(giveUp) {
		batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: pollWait})
		require.NoError(t, err, "Receive while waiting for redelivery")
		f.checkBatch(batch, 10)
		again = append(again, batch...)
	}
	require.ElementsMatch(t, ids(first), ids(again), "abandoned messages should be redelivered once their ack deadline (%s) passed", deadline)
	for _, m := range again {
		orig := distinct(sent)[eventID(m)]
		require.Equal(t, orig.Body, m.Body, "redelivered Body")
		require.Equal(t, orig.Metadata, m.Metadata, "redelivered Metadata")
	}
	f.ack(b, sub, again)
	f.expectEmpty(b, sub)
}
