package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// Per-event keys in a batch (leasestore.PublishEach).
var idempotencyEachCases = []conformanceCase{
	{"IdempotencyEach/ReplayReuseAndNew", testEachReplayReuseNew},
	{"IdempotencyEach/NotPublishedReleased", testEachNotPublished},
	{"IdempotencyEach/CrashBeforePublish", testEachCrashBeforePublish},
	{"IdempotencyEach/CrashAfterPublish", testEachCrashAfterPublish},
	{"IdempotencyEach/KeyTwiceRefused", testEachKeyTwice},
	{"IdempotencyEach/SharedWithSingle", testEachSharedWithSingle},
}

// eachReqs returns n requests of one fresh principal, each with its own
// key, fingerprint "fp-i" and plan "plan-i".
func eachReqs(n int) []leasestore.KeyRequest {
	p := "principal-" + uuid.NewString()
	out := make([]leasestore.KeyRequest, n)
	for i := range out {
		out[i] = leasestore.KeyRequest{
			Principal: p, Key: fmt.Sprintf("key-%d-%s", i, uuid.NewString()),
			Fingerprint: fmt.Appendf(nil, "fp-%d", i), Plan: fmt.Appendf(nil, "plan-%d", i),
		}
	}
	return out
}

// eachBroker records PublishEach's calls: the plans of each call.
type eachBroker struct {
	mu    sync.Mutex
	calls [][]string
	// refuse names plans the broker refuses (published false).
	refuse map[string]bool
	// unbounded counts calls with claims whose context had no deadline.
	unbounded int
}

func (f *eachBroker) publish(ctx context.Context, claimed []int, plans [][]byte) ([][]byte, []bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := ctx.Deadline(); len(claimed) > 0 && (!ok || ctx.Err() != nil) {
		f.unbounded++
	}
	var sent []string
	results := make([][]byte, len(claimed))
	published := make([]bool, len(claimed))
	for k, p := range plans {
		sent = append(sent, string(p))
		results[k] = []byte("result-of-" + string(p))
		published[k] = !f.refuse[string(p)]
	}
	f.calls = append(f.calls, sent)
	return results, published, nil
}

func (f *eachBroker) sent() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.calls...)
}

func testEachReplayReuseNew(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	var broker eachBroker
	rs := eachReqs(2)
	outs, err := b.stores[0].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for i, o := range outs {
		require.NoError(t, o.Err)
		require.True(t, o.Claimed)
		require.False(t, o.Replayed)
		require.NoError(t, o.RecordErr)
		require.Equal(t, fmt.Sprintf("plan-%d", i), string(o.Plan))
	}
	require.Equal(t, [][]string{{"plan-0", "plan-1"}}, broker.sent(), "one broker call for the batch")
	require.Equal(t, 2, countRecords(t, b, "i:"), "one record per keyed event")

	// Again on the other client: key 0 repeated as it was, key 1 with
	// another event, and a new key 2.
	again := append(eachReqs(3)[2:], rs...)
	again[0].Principal = rs[0].Principal
	again[2].Fingerprint = []byte("fp-other")
	again[1].Plan = []byte("plan-repeat") // a repeat plans afresh; the first plan answers
	outs, err = b.stores[1].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: again, Publish: broker.publish})
	require.NoError(t, err)
	require.True(t, outs[0].Claimed, "the new key publishes")
	require.True(t, outs[1].Replayed, "the repeated key answers its first result")
	require.False(t, outs[1].Claimed)
	require.Equal(t, "plan-0", string(outs[1].Plan))
	require.Equal(t, "result-of-plan-0", string(outs[1].Result))
	var reused *leasestore.KeyReusedError
	require.ErrorAs(t, outs[2].Err, &reused, "a key with another event is refused")
	require.False(t, outs[2].Claimed)
	require.Equal(t, [][]string{{"plan-0", "plan-1"}, {"plan-2"}}, broker.sent(), "only the new key's event is sent")
	require.Zero(t, broker.unbounded, "the publish is bounded by the claims' holds")
}

func testEachNotPublished(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	broker := eachBroker{refuse: map[string]bool{"plan-1": true}}
	rs := eachReqs(2)
	outs, err := b.store.PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	require.True(t, outs[0].Claimed)
	require.True(t, outs[1].Claimed)
	require.Equal(t, 1, countRecords(t, b, "i:"), "the refused event's key is released")

	broker.refuse = nil
	outs, err = b.store.PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	require.True(t, outs[0].Replayed)
	require.True(t, outs[1].Claimed, "the refused event is published on the retry")
	require.Equal(t, [][]string{{"plan-0", "plan-1"}, {"plan-1"}}, broker.sent())

	// A failed Publish releases every key it was given.
	rs = eachReqs(2)
	_, err = b.store.PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: func(context.Context, []int, [][]byte) ([][]byte, []bool, error) {
		return nil, nil, errInjected
	}})
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, 2, countRecords(t, b, "i:"))
}

// testEachCrashBeforePublish: a crash after the claims and before the
// publish loses nothing: after the holds, a repeat takes every key over
// and publishes each first plan, once.
func testEachCrashBeforePublish(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	var broker eachBroker
	rs := eachReqs(2)
	stop := crashAt(t, faults.KeyPublish, rs[1].Key)
	_, err := b.stores[0].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.ErrorIs(t, err, errInjected)
	stop()
	require.Empty(t, broker.sent(), "the crash came before the publish")

	repeat := append([]leasestore.KeyRequest(nil), rs...)
	for i := range repeat {
		repeat[i].Plan = []byte("plan-repeat")
	}
	outs, err := b.stores[1].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: repeat, Publish: broker.publish})
	require.NoError(t, err)
	for _, o := range outs {
		var busy *leasestore.KeyBusyError
		require.ErrorAs(t, o.Err, &busy, "a repeat in the hold publishes nothing")
		requireCode(t, herr.Aborted, o.Err)
	}
	require.Equal(t, [][]string{nil}, broker.sent())

	b.clock.Advance(leasestore.DefaultIdempotencyHold)
	outs, err = b.stores[1].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: repeat, Publish: broker.publish})
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.TakenOver)
		require.NoError(t, o.RecordErr)
	}
	require.Equal(t, [][]string{nil, {"plan-0", "plan-1"}}, broker.sent(), "not lost, published once, as first planned")

	outs, err = b.stores[0].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.Replayed)
	}
	require.Len(t, broker.sent(), 3)
	require.Empty(t, broker.sent()[2])
}

// testEachCrashAfterPublish: a crash after the publish and before the
// results are recorded loses nothing; the takeover publishes the same
// plans again (the same event ids), never new ones.
func testEachCrashAfterPublish(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	var broker eachBroker
	rs := eachReqs(2)
	stop := crashAt(t, faults.KeyComplete, rs[0].Key)
	_, err := b.stores[0].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.ErrorIs(t, err, errInjected)
	stop()
	require.Equal(t, [][]string{{"plan-0", "plan-1"}}, broker.sent())

	b.clock.Advance(leasestore.DefaultIdempotencyHold)
	outs, err := b.stores[1].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.TakenOver)
	}
	require.Equal(t, [][]string{{"plan-0", "plan-1"}, {"plan-0", "plan-1"}}, broker.sent(), "the same plans again")

	outs, err = b.stores[0].PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.Replayed)
	}
}

func testEachKeyTwice(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	var broker eachBroker
	rs := eachReqs(2)
	rs[1].Key = rs[0].Key
	_, err := b.store.PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	requireCode(t, herr.InvalidArgument, err)
	rs = eachReqs(2)
	rs[1].Principal = "another-" + uuid.NewString()
	_, err = b.store.PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	requireCode(t, herr.InvalidArgument, err)
	require.Empty(t, broker.sent())
	require.Zero(t, countRecords(t, b, "i:"), "a refused batch writes nothing")
}

// testEachSharedWithSingle: an event's key is the same key as a single
// keyed publish's (PublishOnce), both ways.
func testEachSharedWithSingle(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	var single fakeBroker
	var broker eachBroker
	rs := eachReqs(2)
	_, err := b.store.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: rs[0], Publish: single.publish("single")})
	require.NoError(t, err)
	outs, err := b.store.PublishEach(b.ctx, leasestore.KeyedEvents{Keys: rs, Publish: broker.publish})
	require.NoError(t, err)
	require.True(t, outs[0].Replayed)
	require.Equal(t, "single", string(outs[0].Result))
	require.True(t, outs[1].Claimed)
	o, err := b.store.PublishOnce(b.ctx, leasestore.KeyedPublish{KeyRequest: rs[1], Publish: single.publish("again")})
	require.NoError(t, err)
	require.True(t, o.Replayed)
	require.Equal(t, "result-of-plan-1", string(o.Result))
	require.Equal(t, []string{"plan-0"}, single.sends())
	require.Equal(t, [][]string{{"plan-1"}}, broker.sent())
}
