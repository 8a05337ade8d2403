package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

var root = &auth.Principal{ID: "root", Permissions: []string{auth.PermAll}}

// bundle is a Service over the in-memory broker and store.
type bundle struct {
	svc    *delivery.Service
	store  *leasestore.Store
	broker *recordingBroker
}

type setupOpts struct {
	deliveryLimit int
	streams       delivery.StreamConfig
	now           func() time.Time // the store's clock (default time.Now)
}

func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	var broker *recordingBroker
	if o.streams.PollWait == 0 {
		o.streams.PollWait = 5 * time.Millisecond
	}
	svc := inmem.New(t, inmem.Options{
		AckDeadline: time.Hour,
		Wrap: func(d driver.Broker) driver.Broker {
			broker = &recordingBroker{Broker: d, live: map[string]bool{}, receiving: make(chan struct{}, 100)}
			return broker
		},
		Store:  leasestore.Options{DeliveryLimit: o.deliveryLimit, Now: o.now},
		Config: delivery.Config{Streams: o.streams},
	})
	return &bundle{svc: svc.Service, store: svc.Store, broker: broker}
}

// recordingBroker tracks which subscriptions exist, and signals on
// receiving each time a Receive starts waiting.
type recordingBroker struct {
	driver.Broker
	mu        sync.Mutex
	live      map[string]bool
	receiving chan struct{}
}

// Send sends one message through the driver, bypassing the Service.
func (b *recordingBroker) Send(ctx context.Context, m *pubsubx.Message) error {
	return b.SendBatch(ctx, []*pubsubx.Message{m})[0]
}

func (b *recordingBroker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	select {
	case b.receiving <- struct{}{}:
	default:
	}
	return b.Broker.Receive(ctx, name, p)
}

func (b *recordingBroker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	err := b.Broker.CreateSubscription(ctx, name, groups)
	if err == nil {
		b.mu.Lock()
		b.live[name] = true
		b.mu.Unlock()
	}
	return err
}

func (b *recordingBroker) DeleteSubscription(ctx context.Context, name string) error {
	err := b.Broker.DeleteSubscription(ctx, name)
	if err == nil {
		b.mu.Lock()
		delete(b.live, name)
		b.mu.Unlock()
	}
	return err
}

func (b *recordingBroker) subscriptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for n := range b.live {
		out = append(out, n)
	}
	return out
}

// publish publishes events of type typ with messages {"n": from…}.
func (b *bundle) publish(t *testing.T, typ string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := b.svc.Publish(t.Context(), root, delivery.Event{EventType: typ, Message: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		require.NoError(t, err)
	}
}

func nOf(t testing.TB, d delivery.Delivery) int {
	t.Helper()
	var m struct{ N int }
	require.NoError(t, json.Unmarshal(d.Event.Message, &m))
	return m.N
}

// next calls Next with a deadline that only guards against a hung test.
func next(t *testing.T, st *delivery.Stream) []delivery.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ds, err := st.Next(ctx)
	require.NoError(t, err)
	return ds
}

func TestSettleSemantics(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{streams: delivery.StreamConfig{Batch: 1}})
	ctx := t.Context()
	q, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	require.True(t, q.Created)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	b.publish(t, "a.b", 0, 3)

	d0 := next(t, st)[0]
	require.Equal(t, 0, nOf(t, d0))
	require.EqualValues(t, 1, d0.DeliveryCount)
	require.EqualValues(t, 1, d0.Tag)

	// A nacked event comes back at once, on the same stream, counted.
	rep, err := st.Nack(ctx, d0.Tag)
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Nacked: 1}, rep)
	again := next(t, st)[0]
	require.Equal(t, 0, nOf(t, again))
	require.EqualValues(t, 2, again.DeliveryCount)
	require.NotEqual(t, d0.Tag, again.Tag, "a redelivery has a new tag")

	// Acks go first: a tag in both lists is acknowledged. Unknown and
	// already settled tags are skipped and the stream goes on.
	rep, err = st.Settle(ctx, []int64{again.Tag, 999}, []int64{again.Tag, d0.Tag, -1})
	require.NoError(t, err)
	require.Equal(t, delivery.SettleReport{Acked: 1, Skipped: 4}, rep)
	d1 := next(t, st)[0]
	require.Equal(t, 1, nOf(t, d1), "event 0 was acknowledged, not requeued")
	require.Equal(t, 1, st.Unsettled())

	// Leaving: the unsettled event is delivered again, counted, to the
	// next session.
	require.NoError(t, st.Close(ctx))
	require.NoError(t, st.Close(ctx), "Close is idempotent")
	st2, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer st2.Close(ctx)
	d1again := next(t, st2)[0]
	require.Equal(t, 1, nOf(t, d1again))
	require.EqualValues(t, 2, d1again.DeliveryCount)
	require.EqualValues(t, 1, d1again.Tag, "tags are session-scoped")
	rep, err = st2.Ack(ctx, d1.Tag+100)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Skipped)
}

func TestOpenStreamErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	_, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "nope"})
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
	_, err = b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "bad id"})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	_, err = b.svc.OpenStream(ctx, root, delivery.StreamRequest{ReconnectToken: "tok en"})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), "reconnect_token")
	_, err = b.svc.OpenStream(ctx, root, delivery.StreamRequest{ReconnectToken: "unknown"})
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
	_, err = b.svc.OpenStream(ctx, &auth.Principal{ID: "p", Permissions: []string{"receive:*"}},
		delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err))
	_, err = b.svc.OpenStream(ctx, &auth.Principal{ID: "p", Permissions: []string{auth.PermReadEvents}}, delivery.StreamRequest{})
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err))
	require.Empty(t, b.broker.subscriptions(), "refused streams made nothing")
}

// TestStreamQueueGone checks that a stream whose queue is deleted ends
// with NOT_FOUND.
func TestStreamQueueGone(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer st.Close(ctx)
	require.NoError(t, b.svc.DeleteQueue(ctx, root, "q"))
	_, err = st.Next(ctx)
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	require.Empty(t, b.broker.subscriptions())
}

// TestConcurrentCreateLeavesNoOrphan races creates of one queue id: one
// creates it, the others attach, and exactly one subscription is left.
func TestConcurrentCreateLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const n = 16
	var created atomic.Int32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var q delivery.CreateQueueResult
			q, errs[i] = b.svc.CreateQueue(t.Context(), root, delivery.CreateQueueParams{ID: "same", FilterGroups: filter.Groups{{EventType: fmt.Sprintf("t%d", i)}}})
			if q.Created {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, created.Load())
	subs := b.broker.subscriptions()
	require.Len(t, subs, 1)
	c, err := b.store.GetConsumer(t.Context(), "same")
	require.NoError(t, err)
	require.Equal(t, subs[0], c.Subscription)
	require.Equal(t, leasestore.TypeDurableQueue, c.Type)
}

// TestRandomizedNacksAndDisconnects runs consumers that acknowledge, nack,
// leave events unsettled and disconnect at random, until every event is
// settled: each one must end acknowledged or dead-lettered, never both,
// never neither.
func TestRandomizedNacksAndDisconnects(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	const (
		events    = 150
		consumers = 4
		limit     = 4
	)
	b := setup(t, setupOpts{deliveryLimit: limit, streams: delivery.StreamConfig{Batch: 5}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "rq"})
	require.NoError(t, err)
	b.publish(t, "a.b", 0, events)

	var mu sync.Mutex
	acked := map[int]int{}
	var failures []error
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
		cancel()
	}

	var wg sync.WaitGroup
	for w := range consumers {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
		wg.Go(func() {
			for ctx.Err() == nil {
				st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "rq"})
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				for range 1 + rng.IntN(4) {
					// A consumer that holds unsettled events and waits for
					// more would hold them for ever: it gives up after a
					// while and disconnects, like a real client.
					wctx, wcancel := context.WithTimeout(ctx, time.Duration(20+rng.IntN(100))*time.Millisecond)
					ds, err := st.Next(wctx)
					wcancel()
					if err != nil {
						if ctx.Err() == nil && wctx.Err() == nil {
							fail(err)
						}
						break
					}
					for _, d := range ds {
						switch p := rng.IntN(10); {
						case p < 4: // ack, one tag per call to know which one took
							rep, err := st.Ack(ctx, d.Tag)
							if err != nil {
								if ctx.Err() == nil {
									fail(err)
								}
								break
							}
							var m struct{ N int }
							if err := json.Unmarshal(d.Event.Message, &m); err != nil {
								fail(err)
								break
							}
							if rep.Acked == 1 {
								mu.Lock()
								acked[m.N]++
								mu.Unlock()
							}
						case p < 8:
							if _, err := st.Nack(ctx, d.Tag); err != nil && ctx.Err() == nil {
								fail(err)
							}
						default: // left unsettled: requeued when the session closes
						}
					}
				}
				_ = st.Close(context.Background())
			}
		})
	}

	// Watch until every event is accounted for.
	deadLetters := func() map[int]int {
		out := map[int]int{}
		token := ""
		for {
			dls, next, err := b.svc.ListDeadLetters(context.Background(), root, 100, token)
			require.NoError(t, err)
			for _, d := range dls {
				var e struct{ Data struct{ N int } }
				require.NoError(t, json.Unmarshal(d.Body, &e))
				out[e.Data.N]++
				require.Equal(t, "rq", d.OriginQueue)
				require.Equal(t, "DELIVERY_LIMIT", d.Reason)
				require.GreaterOrEqual(t, d.DeliveryCount, int64(limit))
			}
			if next == "" {
				return out
			}
			token = next
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	var dl map[int]int
	for {
		dl = deadLetters()
		mu.Lock()
		settled := len(acked) + len(dl)
		mu.Unlock()
		if settled >= events || ctx.Err() != nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d events settled", settled, events)
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	require.Empty(t, failures)
	dl = deadLetters()
	for n := range events {
		a, d := acked[n], dl[n]
		require.Truef(t, (a == 1 && d == 0) || (a == 0 && d == 1), "event %d: acknowledged %d times, dead-lettered %d times", n, a, d)
	}
	for n := range acked {
		require.Less(t, n, events)
	}
	require.NotEmpty(t, dl, "nacking 40%% of deliveries dead-letters some events")
	require.NotEmpty(t, acked)
}

// TestStreamReapedUnderIt: a queue reaped while a stream waits on it (the
// stream's session lapsed: its process stalled past the idle window) ends
// the stream with NOT_FOUND, not with the cancelled error: reconnecting
// would not help, starting afresh does.
func TestStreamReapedUnderIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := setup(t, setupOpts{now: clock, streams: delivery.StreamConfig{
		PollWait: time.Hour, SessionTTL: time.Hour, IdleWindow: time.Minute, // no heartbeat, no poll: the stream waits at the broker
	}})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	defer st.Close(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := st.Next(ctx)
		errc <- err
	}()
	<-b.broker.receiving // the stream waits at the broker
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	rep, err := b.svc.ReapIdleQueues(ctx, &auth.Principal{ID: "s", Permissions: []string{auth.PermRunJobs}})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Queues)
	err = <-errc
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	require.Empty(t, b.broker.subscriptions())
}

// TestWithheldEventsReachTheOwner (issue: a principal that may not read
// an event made it vanish for one that may): a second principal attached
// to a non-durable queue with its reconnect token, but without the
// receive right for the queue's events, never settles them; the owner
// receives all 20.
func TestWithheldEventsReachTheOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	owner := &auth.Principal{ID: "owner", Permissions: []string{"receive:shop.*"}}
	other := &auth.Principal{ID: "other", Permissions: []string{"receive:billing.*"}}
	ownerSt, err := b.svc.OpenStream(ctx, owner, delivery.StreamRequest{
		Kind: delivery.NonDurable, FilterGroups: filter.Groups{{EventType: "shop.order"}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ownerSt.Close(context.Background()) })
	otherSt, err := b.svc.OpenStream(ctx, other, delivery.StreamRequest{Kind: delivery.NonDurable, ReconnectToken: ownerSt.QueueID()})
	require.NoError(t, err)
	otherCtx, stopOther := context.WithCancel(ctx)
	otherDone := make(chan []delivery.Delivery, 1)
	go func() {
		var got []delivery.Delivery
		for {
			ds, err := otherSt.Next(otherCtx)
			if err != nil {
				otherDone <- got
				return
			}
			got = append(got, ds...)
		}
	}()

	b.publish(t, "shop.order", 0, 20)
	// Let the other principal's stream pull first: the owner's has not
	// asked for anything yet.
	for {
		c, err := b.store.GetConsumer(ctx, ownerSt.QueueID())
		require.NoError(t, err)
		if c.Committed+c.Requeued > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	seen := map[int]bool{}
	for len(seen) < 20 {
		for _, d := range next(t, ownerSt) {
			seen[nOf(t, d)] = true
			_, err := ownerSt.Ack(ctx, d.Tag)
			require.NoError(t, err)
		}
	}
	stopOther()
	require.Empty(t, <-otherDone, "the other principal was delivered nothing")
	require.NoError(t, otherSt.Close(ctx))
	c, err := b.store.GetConsumer(ctx, ownerSt.QueueID())
	require.NoError(t, err)
	require.EqualValues(t, 20, c.Committed)
	dls, _, err := b.store.ListDeadLetters(ctx, 100, "")
	require.NoError(t, err)
	require.Empty(t, dls, "nothing was dead-lettered")
}

// TestWithheldStreamEventsKeepTheirCount (issue: a principal that may
// not receive a queue's events could dead-letter them by pulling): a
// durable stream whose principal may not read some events pulls more
// often than the delivery limit while the events after them flow to it;
// the unreadable events are never dead-lettered, and a stream that may
// read them gets them as a first delivery.
func TestWithheldStreamEventsKeepTheirCount(t *testing.T) {
	t.Parallel()
	const limit = 3
	b := setup(t, setupOpts{deliveryLimit: limit, streams: delivery.StreamConfig{Batch: 1}})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "wq"})
	require.NoError(t, err)
	bob := &auth.Principal{ID: "bob", Permissions: []string{auth.PermConsumeDurableQueues, "receive:bob.*"}}
	alice := &auth.Principal{ID: "alice", Permissions: []string{auth.PermConsumeDurableQueues, "receive:alice.*"}}
	bobSt, err := b.svc.OpenStream(ctx, bob, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "wq"})
	require.NoError(t, err)
	defer func() { _ = bobSt.Close(context.Background()) }()

	b.publish(t, "alice.x", 0, 2)
	// Each of bob's events is a pull of its own (Batch 1), and every pull
	// meets alice's events first.
	for i := range limit + 3 {
		b.publish(t, "bob.x", 100+i, 1)
		ds := next(t, bobSt)
		require.Len(t, ds, 1)
		require.Equal(t, 100+i, nOf(t, ds[0]))
		_, err := bobSt.Ack(ctx, ds[0].Tag)
		require.NoError(t, err)
	}
	dls, _, err := b.store.ListDeadLetters(ctx, 10, "")
	require.NoError(t, err)
	require.Empty(t, dls, "bob's pulls dead-lettered nothing")

	aliceSt, err := b.svc.OpenStream(ctx, alice, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "wq"})
	require.NoError(t, err)
	defer func() { _ = aliceSt.Close(context.Background()) }()
	var got []delivery.Delivery
	for len(got) < 2 {
		got = append(got, next(t, aliceSt)...)
	}
	for i, d := range got {
		require.Equal(t, i, nOf(t, d), "in order")
		require.EqualValues(t, 1, d.DeliveryCount, "bob's pulls were not deliveries")
		_, err := aliceSt.Ack(ctx, d.Tag)
		require.NoError(t, err)
	}
	c, err := b.store.GetConsumer(ctx, "wq")
	require.NoError(t, err)
	require.EqualValues(t, limit+5, c.Committed)
}

// TestPoisonDeadLetteredAtOnce: an event no transport can deliver (here a
// body that is not a CloudEvent, as another writer to the topic could
// leave) goes to the dead-letter queue on its first delivery, never
// reaches the client, and does not hold up the events behind it.
func TestPoisonDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "pq"})
	require.NoError(t, err)
	// Six poisons: not a CloudEvent; two the one-pass decoder reads
	// (their messages scanned and sound) that still break a publish rule,
	// a bad event type and a message over the size limit; and three with
	// numbers no double holds (stored before publish refused them), which
	// gRPC cannot deliver (1e400, 400 digits) or would deliver as 0.
	stored := func(typ, data string) []byte {
		return []byte(`{"specversion":"1.0","id":"x","source":"/h","type":"` + typ + `","datacontenttype":"application/json","time":"2024-10-16T14:30:00Z","data":` + data + `}`)
	}
	for _, body := range [][]byte{
		[]byte("not a cloud event \xff"),
		stored("Not A Type!", `{"a":1}`),
		stored("a.b", `{"s":"`+strings.Repeat("x", delivery.MaxMessageBytes)+`"}`),
		stored("a.b", `{"n":1e400}`),
		stored("a.b", `{"n":[1e-400]}`),
		stored("a.b", `{"n":1`+strings.Repeat("0", 399)+`}`),
	} {
		require.NoError(t, b.broker.Send(ctx, &pubsubx.Message{Body: body, Metadata: map[string]string{pubsubx.AttrEventType: "a.b"}}))
	}
	b.publish(t, "a.b", 1, 1)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "pq"})
	require.NoError(t, err)
	defer func() { _ = st.Close(context.Background()) }()
	ds := next(t, st)
	require.Len(t, ds, 1, "only the good event reaches the client")
	require.Equal(t, 1, nOf(t, ds[0]))
	dls, _, err := b.svc.ListDeadLetters(ctx, root, 10, "")
	require.NoError(t, err)
	require.Len(t, dls, 6)
	for _, dl := range dls {
		require.Equal(t, "pq", dl.OriginQueue)
		require.Equal(t, leasestore.ReasonDeliveryLimit, dl.Reason)
		require.Equal(t, int64(1), dl.DeliveryCount, "dead-lettered on its first delivery, not after the delivery limit")
	}
	_, err = st.Ack(ctx, ds[0].Tag)
	require.NoError(t, err)
}

// TestStreamRejectDeadLettersAtOnce: an event a transport finds it cannot
// encode is rejected by its tag (Stream.Reject): it goes to the
// dead-letter queue on this first delivery, is never delivered again,
// and an unknown or repeated tag is skipped.
func TestStreamRejectDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "rq"})
	require.NoError(t, err)
	b.publish(t, "a.b", 1, 2)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "rq"})
	require.NoError(t, err)
	defer func() { _ = st.Close(context.Background()) }()
	var ds []delivery.Delivery
	for len(ds) < 2 {
		ds = append(ds, next(t, st)...)
	}
	n, err := st.Reject(ctx, ds[0].Tag, 999)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = st.Reject(ctx, ds[0].Tag)
	require.NoError(t, err)
	require.Zero(t, n, "a settled tag is skipped")
	require.Equal(t, 1, st.Unsettled())
	_, err = st.Ack(ctx, ds[1].Tag)
	require.NoError(t, err)
	dls, _, err := b.svc.ListDeadLetters(ctx, root, 10, "")
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Equal(t, "rq", dls[0].OriginQueue)
	require.Equal(t, leasestore.ReasonDeliveryLimit, dls[0].Reason)
	require.Equal(t, int64(1), dls[0].DeliveryCount)
	c, err := b.store.GetConsumer(ctx, "rq")
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Committed, "the cursor passes the rejected event")
}
