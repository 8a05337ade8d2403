package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// testBacklogReport: a driver that reports a subscription's backlog
// (driver.BacklogReporter) counts the messages that match the
// subscription and were not received, none once they are received and
// acked, and answers NotFound for a subscription that does not exist. A
// driver that cannot tell answers pubsubx.ErrNoBacklog. The counts of
// brokers that count eventually (SQS) are waited for.
func testBacklogReport(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "backlog", filter.Groups{{EventType: "backlog.a"}})
	if _, err := b.Backlog(f.ctx, sub); errors.Is(err, pubsubx.ErrNoBacklog) {
		t.Logf("the driver does not report backlogs")
		return
	}
	want := f.messages(3, "backlog.a", "")
	f.send(b, want...)
	f.send(b, f.messages(2, "backlog.other", "")...)
	waitBacklog(t, f, b, sub, 3)
	got := f.receiveExactly(b, sub, want...)
	msgs := make([]*pubsubx.Message, 0, len(got))
	for _, m := range got {
		msgs = append(msgs, m)
	}
	f.ack(b, sub, msgs)
	waitBacklog(t, f, b, sub, 0)

	_, err := b.Backlog(f.ctx, subName("backlog-missing"))
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "Backlog of a missing subscription: %v", err)
}

// waitBacklog waits until sub's backlog counts n messages.
func waitBacklog(t *testing.T, f *fixture, b *pubsubx.Broker, sub string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bl, err := b.Backlog(f.ctx, sub)
		require.NoError(t, err, "Backlog")
		if bl.Messages == n {
			if n > 0 && !bl.Oldest.IsZero() {
				require.WithinDuration(t, time.Now(), bl.Oldest, time.Hour, "Oldest is a publish time")
			}
			return
		}
		require.True(t, time.Now().Before(deadline), "the backlog reads %d messages, want %d", bl.Messages, n)
		time.Sleep(100 * time.Millisecond)
	}
}
