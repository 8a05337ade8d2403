package drivertest

import (
	"sort"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// sendParallel sends msgs from workers goroutines, as a batch publish does,
// requiring every Send to succeed.
func (f *fixture) sendParallel(b *pubsubx.Broker, msgs []*pubsubx.Message, workers int) {
	f.t.Helper()
	errs := make([]error, len(msgs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				errs[i] = b.Send(f.ctx, msgs[i])
			}
		})
	}
	for i := range msgs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		require.NoError(f.t, err, "Send %s", eventID(msgs[i]))
	}
}

// receiveUntil receives from sub in batches of at most max until done
// reports true for everything received so far (duplicates included). It
// settles nothing. It fails, naming what it has, when livenessBound passes
// first, when a Receive fails, or when a batch is larger than max.
func (f *fixture) receiveUntil(b *pubsubx.Broker, sub string, max int, done func([]*pubsubx.Message) bool) []*pubsubx.Message {
	f.t.Helper()
	giveUp := time.Now().Add(livenessBound)
	var got []*pubsubx.Message
	for !done(got) {
		if time.Now().After(giveUp) {
			require.FailNowf(f.t, "messages did not arrive", "subscription %s: still waiting after %s; received %d: %v", sub, livenessBound, len(got), ids(got))
		}
		batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: max, Wait: pollWait})
		require.NoError(f.t, err, "Receive %s", sub)
		f.checkBatch(batch, max)
		got = append(got, batch...)
	}
	return got
}

// checkBatch asserts what every Receive result must satisfy.
func (f *fixture) checkBatch(batch []*pubsubx.Message, max int) {
	f.t.Helper()
	require.LessOrEqual(f.t, len(batch), max, "Receive(max=%d) returned too many", max)
	for _, m := range batch {
		require.NotNil(f.t, m, "Receive returned a nil message")
		require.NotNil(f.t, m.Handle, "received message %s has no Handle", eventID(m))
	}
}

// hasAll is a receiveUntil condition: every event id of want was received.
func hasAll(want []*pubsubx.Message) func([]*pubsubx.Message) bool {
	return func(got []*pubsubx.Message) bool {
		seen := distinct(got)
		for _, w := range want {
			if _, ok := seen[eventID(w)]; !ok {
				return false
			}
		}
		return true
	}
}

// hasCount is a receiveUntil condition: n distinct event ids were received.
func hasCount(n int) func([]*pubsubx.Message) bool {
	return func(got []*pubsubx.Message) bool { return len(distinct(got)) >= n }
}

// distinct indexes msgs by event id, keeping the first of duplicates.
func distinct(msgs []*pubsubx.Message) map[string]*pubsubx.Message {
	out := make(map[string]*pubsubx.Message, len(msgs))
	for _, m := range msgs {
		if _, dup := out[eventID(m)]; !dup {
			out[eventID(m)] = m
		}
	}
	return out
}

// sortedKeys returns the keys of m, sorted, for readable failures.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// receiveAll receives from sub until every message of mustHave arrived and
// then until a Receive comes back empty, acking each batch, and returns
// everything received by event id. A broker that filters less than the
// subscription's groups delivers more than mustHave; this collects that too.
func (f *fixture) receiveAll(b *pubsubx.Broker, sub string, mustHave []*pubsubx.Message) map[string]*pubsubx.Message {
	f.t.Helper()
	const max = 10
	got := f.receiveUntil(b, sub, max, hasAll(mustHave))
	f.ack(b, sub, got)
	for {
		batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: max, Wait: quietWait})
		require.NoError(f.t, err, "Receive %s", sub)
		f.checkBatch(batch, max)
		if len(batch) == 0 {
			return distinct(got)
		}
		f.ack(b, sub, batch)
		got = append(got, batch...)
		require.Less(f.t, len(got), 10_000, "subscription %s never runs dry", sub)
	}
}

// receiveExactly is receiveAll that also requires nothing but want to
// arrive.
func (f *fixture) receiveExactly(b *pubsubx.Broker, sub string, want ...*pubsubx.Message) map[string]*pubsubx.Message {
	f.t.Helper()
	got := f.receiveAll(b, sub, want)
	require.ElementsMatch(f.t, ids(want), sortedKeys(got), "subscription %s delivered other messages than expected", sub)
	return got
}

// ack acks msgs on sub, requiring success.
func (f *fixture) ack(b *pubsubx.Broker, sub string, msgs []*pubsubx.Message) {
	f.t.Helper()
	if len(msgs) == 0 {
		return
	}
	require.NoError(f.t, b.Ack(f.ctx, sub, msgs), "Ack %d messages on %s", len(msgs), sub)
}

// expectEmpty requires a Receive on sub to return no message: everything
// sent was received and settled, or is still in flight.
func (f *fixture) expectEmpty(b *pubsubx.Broker, sub string) {
	f.t.Helper()
	batch, err := b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: quietWait})
	require.NoError(f.t, err, "Receive %s", sub)
	require.Empty(f.t, ids(batch), "subscription %s should hold nothing receivable", sub)
}
