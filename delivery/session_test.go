package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/leasestore"
)

// openDurable creates durable queue "q" and opens a session on it.
func openDurable(t *testing.T, b *bundle) *delivery.SessionState {
	t.Helper()
	_, err := b.svc.CreateQueue(t.Context(), root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	opened, err := b.svc.OpenSession(t.Context(), root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, 0)
	st, created := opened.State, opened.Created
	require.NoError(t, err)
	require.False(t, created, "a durable session never creates its queue")
	require.Equal(t, "q", st.Queue)
	require.NotEmpty(t, st.Session)
	return st
}

func poll(t *testing.T, b *bundle, p *auth.Principal, st *delivery.SessionState, limit int) []delivery.Delivery {
	t.Helper()
	ds, err := b.svc.PollSession(t.Context(), delivery.PollParams{Principal: p, State: st, Limit: limit, Wait: 5 * time.Millisecond})
	require.NoError(t, err)
	return ds
}

func ns(t testing.TB, ds []delivery.Delivery) []int {
	t.Helper()
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = nOf(t, d)
	}
	return out
}

func tags(ds []delivery.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Tag
	}
	return out
}

// settle runs Take and SettleRefs on st and requires success.
func settleSession(t *testing.T, b *bundle, st *delivery.SessionState, acks, nacks []int64) delivery.SettleReport {
	t.Helper()
	ackRefs, nackRefs, _, rep := st.Take(acks, nacks)
	rep, err := b.svc.SettleRefs(t.Context(), st, ackRefs, nackRefs, rep)
	require.NoError(t, err)
	return rep
}

// TestSessionDurable drives a durable stateless session: poll with a limit
// and the MaxUnsettled cap, tags, acks before nacks, unknown tags, a nack
// redelivered with its delivery count one higher.
func TestSessionDurable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{streams: delivery.StreamConfig{MaxUnsettled: 4}})
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 6)

	ds := poll(t, b, root, st, 3)
	require.Equal(t, []int{0, 1, 2}, ns(t, ds))
	for _, d := range ds {
		require.Zero(t, d.Tag, "PollSession assigns no tags")
		require.NotEmpty(t, d.Ref.LeaseID, "a delivery names its lease")
		require.EqualValues(t, 1, d.DeliveryCount)
	}
	require.Zero(t, st.NextTag, "PollSession does not change the state")
	require.Empty(t, st.Tags)
	st.Tag(ds)
	require.Equal(t, []int64{1, 2, 3}, tags(ds))
	require.Len(t, st.Tags, 3)
	require.Equal(t, ds[1].Ref, st.Tags[2])

	// MaxUnsettled 4 with 3 unsettled: one more, whatever the limit.
	more := poll(t, b, root, st, 10)
	require.Equal(t, []int{3}, ns(t, more))
	st.Tag(more)
	require.Equal(t, []int64{4}, tags(more))
	require.Empty(t, poll(t, b, root, st, 10), "the session holds MaxUnsettled unsettled events")

	// Acks first: tag 1 is in both lists and is acknowledged; 99 and the
	// second 1 are skipped; 2 is nacked.
	rep := settleSession(t, b, st, []int64{1, 99}, []int64{2, 1})
	require.Equal(t, delivery.SettleReport{Acked: 1, Nacked: 1, Skipped: 2}, rep)
	require.Len(t, st.Tags, 2)
	rep = settleSession(t, b, st, []int64{1}, []int64{2})
	require.Equal(t, delivery.SettleReport{Skipped: 2}, rep, "settled tags are unknown now")

	// Room for two: the nacked event first, counted, then the next new one.
	ds = poll(t, b, root, st, 10)
	require.Equal(t, []int{1, 4}, ns(t, ds))
	require.Equal(t, []int64{2, 1}, []int64{ds[0].DeliveryCount, ds[1].DeliveryCount})
	st.Tag(ds)
	require.Equal(t, []int64{5, 6}, tags(ds), "a redelivery has a new tag")
	rep = settleSession(t, b, st, []int64{3, 4, 5, 6}, nil)
	require.Equal(t, delivery.SettleReport{Acked: 4}, rep)
	ds = poll(t, b, root, st, 10)
	require.Equal(t, []int{5}, ns(t, ds))
	c, err := b.store.GetConsumer(t.Context(), "q")
	require.NoError(t, err)
	require.EqualValues(t, 5, c.Committed)
	require.EqualValues(t, 1, c.InFlight)

	_, err = b.svc.PollSession(t.Context(), delivery.PollParams{Principal: root, State: st, Limit: 0})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	_, err = b.svc.PollSession(t.Context(), delivery.PollParams{Principal: root, State: &delivery.SessionState{Queue: "q"}, Limit: 1})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
}

// TestSessionUntake: a settlement that failed is put back and succeeds
// when repeated.
func TestSessionUntake(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 2)
	ds := poll(t, b, root, st, 2)
	st.Tag(ds)
	_, _, taken, _ := st.Take([]int64{1}, []int64{2})
	require.Empty(t, st.Tags)
	require.Len(t, taken, 2)
	st.Untake(taken) // as after a failed SettleRefs
	require.Len(t, st.Tags, 2)
	require.Equal(t, ds[0].Ref, st.Tags[1])
	ackRefs, nackRefs, _, rep := st.Take([]int64{1}, []int64{2})
	rep, err := b.svc.SettleRefs(t.Context(), st, ackRefs, nackRefs, rep)
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Acked: 1, Nacked: 1}, rep)
	rep, err = b.svc.SettleRefs(t.Context(), st, nil, nil, delivery.SettleReport{Skipped: 3})
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Skipped: 3}, rep, "nothing to settle: the report as given")
}

// TestSessionStaleGeneration: an ack of an event handed to someone else
// since (the session lapsed) is skipped; the store has the last word.
func TestSessionStaleGeneration(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Now())
	b := setup(t, setupOpts{now: clock.Now})
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 1)
	ds := poll(t, b, root, st, 1)
	st.Tag(ds)
	clock.Advance(delivery.DefaultSessionTTL)

	opened, err := b.svc.OpenSession(t.Context(), root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, 0)
	other := opened.State
	require.NoError(t, err)
	again := poll(t, b, root, other, 1)
	require.Equal(t, []int{0}, ns(t, again))
	require.EqualValues(t, 2, again[0].DeliveryCount)

	rep := settleSession(t, b, st, []int64{1}, nil)
	require.Equal(t, delivery.SettleReport{Skipped: 1}, rep)
	other.Tag(again)
	rep = settleSession(t, b, other, []int64{1}, nil)
	require.Equal(t, delivery.SettleReport{Acked: 1}, rep)
}

// TestSessionNonDurable: a fresh non-durable session creates its queue;
// its deliveries are tagged but not recorded, and acknowledged once sent.
func TestSessionNonDurable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	opened, err := b.svc.OpenSession(ctx, root, delivery.StreamRequest{
		FilterGroups: filter.Groups{{EventType: "a.b"}},
	}, 0)
	st, created := opened.State, opened.Created
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, delivery.NonDurable, st.Kind)
	b.publish(t, "a.b", 0, 3)
	b.publish(t, "x.y", 10, 1)

	ds := poll(t, b, root, st, 10)
	require.Equal(t, []int{0, 1, 2}, ns(t, ds))
	st.Tag(ds)
	require.Equal(t, []int64{1, 2, 3}, tags(ds))
	require.Empty(t, st.Tags, "a non-durable session records no tags")
	require.EqualValues(t, 3, st.NextTag)
	c, err := b.store.GetConsumer(ctx, st.Queue)
	require.NoError(t, err)
	require.EqualValues(t, 3, c.InFlight)
	require.NoError(t, b.svc.AckDeliveries(ctx, st, ds))
	c, err = b.store.GetConsumer(ctx, st.Queue)
	require.NoError(t, err)
	require.Zero(t, c.InFlight)
	require.EqualValues(t, 3, c.Committed)
	require.NoError(t, b.svc.AckDeliveries(ctx, st, nil))

	// Tags of a non-durable session are not settled by tag.
	rep := settleSession(t, b, st, []int64{1}, []int64{2})
	require.Equal(t, delivery.SettleReport{Skipped: 2}, rep)

	// Reconnecting with the token reattaches to the same queue.
	require.NoError(t, b.svc.CloseSession(ctx, st))
	opened, err = b.svc.OpenSession(ctx, root, delivery.StreamRequest{ReconnectToken: st.Queue}, 0)
	st2, created := opened.State, opened.Created
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, st.Queue, st2.Queue)
	require.NotEqual(t, st.Session, st2.Session)
	b.publish(t, "a.b", 3, 1)
	require.Equal(t, []int{3}, ns(t, poll(t, b, root, st2, 10)))
}

// TestOpenSessionErrors: the same checks and codes as OpenStream.
func TestOpenSessionErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	open := func(p *auth.Principal, r delivery.StreamRequest) error {
		_, err := b.svc.OpenSession(ctx, p, r, 0)
		return err
	}
	require.Equal(t, herr.NotFound, herr.CodeOf(open(root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "nope"})))
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(open(root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "bad id"})))
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(open(root, delivery.StreamRequest{ReconnectToken: "tok en"})))
	require.Equal(t, herr.NotFound, herr.CodeOf(open(root, delivery.StreamRequest{ReconnectToken: "unknown"})))
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(open(&auth.Principal{ID: "p", Permissions: []string{"receive:*"}},
		delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})))
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(open(&auth.Principal{ID: "p", Permissions: []string{auth.PermReadEvents}}, delivery.StreamRequest{})))
	require.Empty(t, b.broker.subscriptions(), "refused sessions made nothing")
}

// TestSessionStateJSON: the state survives a JSON round trip (int64 map
// keys included) and settles afterwards.
func TestSessionStateJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 2)
	st.NextTag = 1 << 40 // tags past 2^32 survive too
	ds := poll(t, b, root, st, 2)
	st.Tag(ds)
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	require.Contains(t, string(raw), fmt.Sprintf(`"%d":`, int64(1<<40)+1))
	require.Contains(t, string(raw), `"next_tag":`)
	var back delivery.SessionState
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, *st, back)
	rep := settleSession(t, b, &back, []int64{ds[0].Tag, ds[1].Tag}, nil)
	require.Equal(t, delivery.SettleReport{Acked: 2}, rep)
}

// TestSessionCloseRequeues: closing puts unsettled events back at once;
// closing again is not an error; the closed session is cancelled.
func TestSessionCloseRequeues(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 2)
	ds := poll(t, b, root, st, 2)
	st.Tag(ds)
	require.NoError(t, b.svc.CloseSession(ctx, st))
	require.Empty(t, st.Tags)
	require.NoError(t, b.svc.CloseSession(ctx, st), "CloseSession is idempotent")
	c, err := b.store.GetConsumer(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Requeued, "the session's events wait for redelivery at once")

	_, err = b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: st, Limit: 1})
	require.Equal(t, herr.Internal, herr.CodeOf(err), "%v", err)
	require.Equal(t, delivery.ConsumerCancelledMessage, herr.MessageOf(err))
	var cancelled *delivery.ConsumerCancelledError
	require.ErrorAs(t, err, &cancelled, "matched by type, not by message")

	opened, err := b.svc.OpenSession(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, 0)
	st2 := opened.State
	require.NoError(t, err)
	again := poll(t, b, root, st2, 5)
	require.Equal(t, []int{0, 1}, ns(t, again))
	require.Equal(t, []int64{2, 2}, []int64{again[0].DeliveryCount, again[1].DeliveryCount})
}

// TestSessionTTLLapse: a session not polled within its ttl is cancelled;
// its events go to the next session.
func TestSessionTTLLapse(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(time.Now())
	b := setup(t, setupOpts{now: clock.Now})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	opened, err := b.svc.OpenSession(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, time.Minute)
	st := opened.State
	require.NoError(t, err)
	b.publish(t, "a.b", 0, 1)
	clock.Advance(time.Minute - time.Millisecond)
	ds, err := b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: st, Limit: 1, Wait: 5 * time.Millisecond, TTL: time.Minute}) // the heartbeat
	require.NoError(t, err)
	st.Tag(ds)
	clock.Advance(time.Minute - time.Millisecond)
	_, err = b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: st, Limit: 1, TTL: time.Minute})
	require.NoError(t, err, "polled within its ttl")

	clock.Advance(time.Minute)
	_, err = b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: st, Limit: 1, TTL: time.Minute})
	require.Equal(t, herr.Internal, herr.CodeOf(err), "%v", err)
	require.Equal(t, delivery.ConsumerCancelledMessage, herr.MessageOf(err))
	require.NoError(t, b.svc.CloseSession(ctx, st), "closing a lapsed session is not an error")

	opened, err = b.svc.OpenSession(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, 0)
	st2 := opened.State
	require.NoError(t, err)
	again := poll(t, b, root, st2, 1)
	require.Equal(t, []int{0}, ns(t, again))
	require.EqualValues(t, 2, again[0].DeliveryCount)
}

// TestSessionQueueDeleted: a deleted queue is NOT_FOUND for every step
// but close.
func TestSessionQueueDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 1)
	ds := poll(t, b, root, st, 1)
	st.Tag(ds)
	require.NoError(t, b.svc.DeleteQueue(ctx, root, "q"))

	_, err := b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: st, Limit: 1})
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	ackRefs, nackRefs, _, rep := st.Take([]int64{1}, nil)
	_, err = b.svc.SettleRefs(ctx, st, ackRefs, nackRefs, rep)
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	require.Equal(t, herr.NotFound, herr.CodeOf(b.svc.AckDeliveries(ctx, st, ds)))
	require.NoError(t, b.svc.CloseSession(ctx, st))

	// A non-durable queue gone says so in its own words.
	opened, err := b.svc.OpenSession(ctx, root, delivery.StreamRequest{}, 0)
	nd := opened.State
	require.NoError(t, err)
	_, err = b.store.DeleteConsumer(ctx, nd.Queue)
	require.NoError(t, err)
	_, err = b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: nd, Limit: 1})
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	require.Contains(t, herr.MessageOf(err), "non-durable queue is gone")
}

// TestSessionPrincipalFilter: events of types the principal may not
// receive are never returned and never settled by it: they go back to the
// queue, for a session that may read them.
func TestSessionPrincipalFilter(t *testing.T) {
	t.Parallel()
	const limit = 2
	b := setup(t, setupOpts{deliveryLimit: limit})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	orders := &auth.Principal{ID: "orders", Permissions: []string{auth.PermConsumeDurableQueues, "receive:orders.*"}}
	opened, err := b.svc.OpenSession(ctx, orders, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, 0)
	st := opened.State
	require.NoError(t, err)
	b.publish(t, "users.a", 0, 2)
	for range limit + 3 {
		require.Empty(t, poll(t, b, orders, st, 10), "nothing readable")
	}
	c, err := b.store.GetConsumer(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, c.Committed, "the unreadable events were not settled")
	require.EqualValues(t, 2, c.Requeued, "they wait for another session")

	b.publish(t, "orders.a", 2, 1)
	ds := poll(t, b, orders, st, 10)
	require.Equal(t, []int{2}, ns(t, ds))

	// A session that may read everything gets the withheld events.
	opened, err = b.svc.OpenSession(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"}, 0)
	rootSt := opened.State
	require.NoError(t, err)
	got := poll(t, b, root, rootSt, 10)
	require.ElementsMatch(t, []int{0, 1}, ns(t, got))
	for _, d := range got {
		require.EqualValues(t, 1, d.DeliveryCount, "the other session's polls were not deliveries")
	}
	dls, _, err := b.store.ListDeadLetters(ctx, 10, "")
	require.NoError(t, err)
	require.Empty(t, dls, "nothing was dead-lettered")
}

// lambda is one stateless invocation's view of the shared connection. Its
// methods run on goroutines other than the test's, so they return errors
// instead of failing the test.
type lambda struct {
	ctx   context.Context
	store *leasestore.Store
	conn  string
}

func (l *lambda) read() (*leasestore.Connection, *delivery.SessionState, error) {
	c, err := l.store.GetConnection(l.ctx, l.conn)
	if err != nil {
		return nil, nil, err
	}
	var st delivery.SessionState
	if err := json.Unmarshal(c.Data, &st); err != nil {
		return nil, nil, err
	}
	return c, &st, nil
}

// update applies change to st and writes it to c, re-reading the
// connection and re-applying change until the conditional write wins; it
// returns how many writes were refused.
func (l *lambda) update(c *leasestore.Connection, st *delivery.SessionState, change func(*delivery.SessionState)) (int, error) {
	for aborted := 0; ; aborted++ {
		change(st)
		data, err := json.Marshal(st)
		if err != nil {
			return aborted, err
		}
		c.Data = data
		err = l.store.UpdateConnection(l.ctx, c)
		if herr.CodeOf(err) != herr.Aborted {
			return aborted, err
		}
		if c, st, err = l.read(); err != nil {
			return aborted, err
		}
	}
}

// TestSessionTwoLambdas races two stateless invocations on one connection,
// each polling with its own copy of the stored state and persisting its
// tags (re-read and re-applied on a lost write) before it "sends", then
// acknowledging what it sent the same way: every event is delivered
// exactly once and every tag is issued once.
func TestSessionTwoLambdas(t *testing.T) {
	t.Parallel()
	const events = 120
	b := setup(t, setupOpts{})
	ctx := t.Context()
	st := openDurable(t, b)
	data, err := json.Marshal(st)
	require.NoError(t, err)
	const connID = "L0SM9cOFvHcCIhw="
	_, err = b.store.CreateConnection(ctx, connID, data)
	require.NoError(t, err)
	b.publish(t, "a.b", 0, events)

	var (
		mu      sync.Mutex
		sent    = map[int]int{}   // event n → times sent
		tagged  = map[int64]int{} // tag → times sent
		total   int
		aborted int
	)
	l := &lambda{ctx: ctx, store: b.store, conn: connID}
	step := func() (bool, error) {
		c, st, err := l.read()
		if err != nil {
			return false, err
		}
		ds, err := b.svc.PollSession(ctx, delivery.PollParams{Principal: root, State: st, Limit: 7, Wait: time.Millisecond})
		if err != nil || len(ds) == 0 {
			return false, err
		}
		// Persist the tags first, then send.
		n, err := l.update(c, st, func(st *delivery.SessionState) { st.Tag(ds) })
		if err != nil {
			return false, err
		}
		mu.Lock()
		aborted += n
		for _, d := range ds {
			var m struct{ N int }
			if err := json.Unmarshal(d.Event.Message, &m); err != nil {
				mu.Unlock()
				return false, err
			}
			sent[m.N]++
			tagged[d.Tag]++
		}
		total += len(ds)
		done := total == events
		mu.Unlock()
		// The client acks what it got (another frame, another
		// invocation): take and persist, then settle.
		if c, st, err = l.read(); err != nil {
			return false, err
		}
		var ackRefs, nackRefs []leasestore.EventRef
		var rep delivery.SettleReport
		n, err = l.update(c, st, func(st *delivery.SessionState) {
			ackRefs, nackRefs, _, rep = st.Take(tags(ds), nil)
		})
		if err != nil {
			return false, err
		}
		mu.Lock()
		aborted += n
		mu.Unlock()
		rep, err = b.svc.SettleRefs(ctx, st, ackRefs, nackRefs, rep)
		if err == nil && rep != (delivery.SettleReport{Acked: len(ds)}) {
			err = fmt.Errorf("settle report %+v, want %d acked", rep, len(ds))
		}
		return done, err
	}
	run := func() error {
		for {
			mu.Lock()
			done := total == events
			mu.Unlock()
			if done {
				return nil
			}
			if _, err := step(); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a guard against a hung test
	defer cancel()
	l.ctx = ctx
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = run() })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	t.Logf("%d lost writes re-applied", aborted)

	require.Len(t, sent, events)
	for n, k := range sent {
		require.Equal(t, 1, k, "event %d sent %d times", n, k)
	}
	var issued []int64
	for tag, k := range tagged {
		require.Equal(t, 1, k, "tag %d issued %d times", tag, k)
		issued = append(issued, tag)
	}
	slices.Sort(issued)
	require.Len(t, issued, events)
	require.EqualValues(t, 1, issued[0])
	require.EqualValues(t, events, issued[len(issued)-1], "tags 1…events, no gaps")
	_, final, err := l.read()
	require.NoError(t, err)
	require.EqualValues(t, events, final.NextTag)
	require.Empty(t, final.Tags)
	c, err := b.store.GetConsumer(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, events, c.Committed)
	require.Zero(t, c.InFlight)
}

// TestSessionTagIdempotent: Tag applied again to a state that already
// holds tags for the same leases (a write that landed although the caller
// saw it fail) reuses those tags instead of issuing a second set; a
// redelivery (a new generation of the lease) still gets a new tag.
func TestSessionTagIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	st := openDurable(t, b)
	b.publish(t, "a.b", 0, 3)
	ds := poll(t, b, root, st, 3)
	require.Len(t, ds, 3)
	st.Tag(ds)
	require.Equal(t, []int64{1, 2, 3}, tags(ds))

	again := slices.Clone(ds)
	for i := range again {
		again[i].Tag = 0
	}
	st.Tag(again)
	require.Equal(t, []int64{1, 2, 3}, tags(again), "the same leases keep their tags")
	require.EqualValues(t, 3, st.NextTag)
	require.Len(t, st.Tags, 3)

	rep := settleSession(t, b, st, nil, []int64{2})
	require.Equal(t, delivery.SettleReport{Nacked: 1}, rep)
	re := poll(t, b, root, st, 3)
	require.Len(t, re, 1)
	st.Tag(re)
	require.Equal(t, []int64{4}, tags(re), "a redelivery is a new lease generation: a new tag")
}
