package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// limitedBroker is a mem driver that states a small size limit
// (driver.BatchOptions.MaxMessageBytes), refuses bigger bodies as
// awssnssqs does, and records what was sent.
type limitedBroker struct {
	driver.Broker
	max int

	mu   sync.Mutex
	sent []*pubsubx.Message
}

func (b *limitedBroker) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{KeepsPublishOrder: true, MaxMessageBytes: b.max}
}

func (b *limitedBroker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	for _, m := range msgs {
		if len(m.Body) > b.max {
			panic(fmt.Sprintf("the portable layer let a body of %d bytes through to a driver that carries %d", len(m.Body), b.max))
		}
	}
	b.mu.Lock()
	for _, m := range msgs {
		b.sent = append(b.sent, &pubsubx.Message{Body: bytes.Clone(m.Body), Metadata: m.Metadata})
	}
	b.mu.Unlock()
	return b.Broker.SendBatch(ctx, msgs)
}

func (b *limitedBroker) sentMessages() []*pubsubx.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*pubsubx.Message(nil), b.sent...)
}

type claimBundle struct {
	svc    *delivery.Service
	store  *leasestore.Store
	broker *limitedBroker
	now    atomic.Int64 // Unix ms
}

const claimLimit = 1024

func claimSetup(t *testing.T, ackDeadline time.Duration) *claimBundle {
	t.Helper()
	b := &claimBundle{}
	b.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	svc := inmem.New(t, inmem.Options{
		AckDeadline: ackDeadline,
		Wrap: func(d driver.Broker) driver.Broker {
			b.broker = &limitedBroker{Broker: d, max: claimLimit}
			return b.broker
		},
		Config: delivery.Config{
			Now: func() time.Time { return time.UnixMilli(b.now.Load()) }, ClaimRetention: 48 * time.Hour,
			Streams: delivery.StreamConfig{PollWait: 5 * time.Millisecond, Batch: 10},
		},
	})
	b.svc, b.store = svc.Service, svc.Store
	return b
}

// bigMessage returns a JSON object message of about n bytes.
func bigMessage(n int) json.RawMessage {
	return json.RawMessage(`{"pad":"` + strings.Repeat("x", n) + `","n":1}`)
}

// TestClaimCheckPull checks the claim-check end to end on a durable
// consumer: an event bigger than the broker's limit is stored as a claim
// and sent as a reference that carries the filter attributes, and a pull
// returns the event byte for byte as encoded; a small event is sent as is.
func TestClaimCheckPull(t *testing.T) {
	t.Parallel()
	b := claimSetup(t, time.Hour)
	ctx := t.Context()
	groups := filter.Groups{{EventType: "orders.created"}}
	c, err := b.svc.CreateDestination(ctx, root, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer, FilterGroups: groups})
	require.NoError(t, err)

	msg := bigMessage(4 * claimLimit)
	big, err := b.svc.Publish(ctx, root, delivery.Event{EventType: "orders.created", ResourceID: "order/7", Message: msg})
	require.NoError(t, err)
	small, err := b.svc.Publish(ctx, root, delivery.Event{EventType: "orders.created", Message: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err)
	_, err = b.svc.Publish(ctx, root, delivery.Event{EventType: "users.created", Message: bigMessage(2 * claimLimit)})
	require.NoError(t, err, "a big event no consumer wants is still published")

	sent := b.broker.sentMessages()
	require.Len(t, sent, 3)
	ref := sent[0]
	require.JSONEq(t, `{"herald_claim":"`+big.ID+`"}`, string(ref.Body))
	require.Equal(t, map[string]string{
		pubsubx.AttrEventType: "orders.created", pubsubx.AttrResourceID: "order/7",
		pubsubx.AttrEventID: big.ID, pubsubx.AttrClaim: big.ID,
	}, ref.Metadata)
	require.NotContains(t, sent[1].Metadata, pubsubx.AttrClaim, "a small event is sent as is")
	require.Contains(t, string(sent[1].Body), `"id":"`+small.ID+`"`)

	stored, err := b.store.GetClaim(ctx, big.ID)
	require.NoError(t, err)
	require.Greater(t, len(stored), claimLimit)
	ev, err := cloudevent.Decode(stored)
	require.NoError(t, err)
	require.Equal(t, big.ID, ev.ID())
	require.JSONEq(t, string(msg), string(ev.Data()))

	l, err := b.svc.Pull(ctx, root, delivery.PullRequest{Destination: c.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Len(t, l.Events, 2, "users.created was filtered out")
	require.Equal(t, stored, []byte(l.Events[0]), "the pull hands out the stored event byte for byte")
	require.Contains(t, string(l.Events[1]), `"id":"`+small.ID+`"`)
	require.Zero(t, b.svc.MissingClaims())
}

// TestClaimCheckStream checks that a stream session resolves references
// like a pull.
func TestClaimCheckStream(t *testing.T) {
	t.Parallel()
	b := claimSetup(t, time.Hour)
	ctx := t.Context()
	_, err := b.svc.CreateQueue(ctx, root, delivery.CreateQueueParams{ID: "q"})
	require.NoError(t, err)
	st, err := b.svc.OpenStream(ctx, root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "q"})
	require.NoError(t, err)
	msg := bigMessage(3 * claimLimit)
	p, err := b.svc.Publish(ctx, root, delivery.Event{EventType: "a.b", Message: msg})
	require.NoError(t, err)
	stored, err := b.store.GetClaim(ctx, p.ID)
	require.NoError(t, err)

	ds := next(t, st)
	require.Len(t, ds, 1)
	require.Equal(t, stored, ds[0].Body)
	require.Contains(t, string(ds[0].Body), `"id":"`+p.ID+`"`)
	require.JSONEq(t, string(msg), string(ds[0].Event.Message))
	_, err = st.Ack(ctx, ds[0].Tag)
	require.NoError(t, err)
	require.NoError(t, st.Close(ctx))
}

// TestClaimCheckReaped checks the retention: the reap-idle-queues run
// deletes claims older than ClaimRetention only; a reference whose claim
// is gone is skipped (counted, acked at the broker, never leased) and the
// events around it are delivered.
func TestClaimCheckReaped(t *testing.T) {
	t.Parallel()
	b := claimSetup(t, 50*time.Millisecond)
	ctx := t.Context()
	c, err := b.svc.CreateDestination(ctx, root, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)
	lost, err := b.svc.Publish(ctx, root, delivery.Event{EventType: "a.b", Message: bigMessage(2 * claimLimit)})
	require.NoError(t, err)
	b.now.Add((47 * time.Hour).Milliseconds())
	kept, err := b.svc.Publish(ctx, root, delivery.Event{EventType: "a.b", Message: bigMessage(2 * claimLimit)})
	require.NoError(t, err)
	small, err := b.svc.Publish(ctx, root, delivery.Event{EventType: "a.b", Message: json.RawMessage(`{}`)})
	require.NoError(t, err)

	b.now.Add((time.Hour + time.Millisecond).Milliseconds())
	rep, err := b.svc.ReapIdleQueues(ctx, root)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Claims, "only the claim older than 48h")
	_, err = b.store.GetClaim(ctx, lost.ID)
	require.Equal(t, herr.NotFound, herr.CodeOf(err))

	l, err := b.svc.Pull(ctx, root, delivery.PullRequest{Destination: c.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Len(t, l.Events, 2)
	require.Contains(t, string(l.Events[0]), `"id":"`+kept.ID+`"`)
	require.Contains(t, string(l.Events[1]), `"id":"`+small.ID+`"`)
	require.EqualValues(t, 1, b.svc.MissingClaims())
	_, err = b.svc.Acknowledge(ctx, root, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)

	// The dropped reference was acked at the broker: past the ack
	// deadline nothing comes back.
	time.Sleep(100 * time.Millisecond)
	l, err = b.svc.Pull(ctx, root, delivery.PullRequest{Destination: c.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
	require.NoError(t, err)
	require.Nil(t, l)
	require.EqualValues(t, 1, b.svc.MissingClaims())
}

// TestClaimCheckStoreFailure checks that an event whose claim cannot be
// stored is not published: Unavailable, nothing sent.
func TestClaimCheckStoreFailure(t *testing.T) {
	t.Parallel()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	require.NoError(t, coll.Close()) // every store call fails
	broker := &limitedBroker{Broker: mem.New(time.Hour).Driver(), max: claimLimit}
	t.Cleanup(func() { require.NoError(t, broker.Close()) })
	svc := delivery.New(delivery.Config{Broker: pubsubx.NewBroker(broker), Store: leasestore.New(coll, leasestore.Options{})})

	_, err = svc.Publish(t.Context(), root, delivery.Event{EventType: "a.b", Message: bigMessage(2 * claimLimit)})
	require.Equal(t, herr.Unavailable, herr.CodeOf(err), "%v", err)
	res := svc.PublishBatch(t.Context(), root, []delivery.Event{
		{EventType: "a.b", Message: bigMessage(2 * claimLimit)},
		{EventType: "a.b", Message: json.RawMessage(`{}`)},
	})
	require.Equal(t, herr.Unavailable, herr.CodeOf(res[0].Err))
	require.NoError(t, res[1].Err, "a small event needs no store")
	require.Len(t, broker.sentMessages(), 1, "only the small event was sent")

	// Without a store at all (a function without HERALD_STORE_URL) a big
	// event fails the same way.
	svc = delivery.New(delivery.Config{Broker: pubsubx.NewBroker(broker)})
	_, err = svc.Publish(t.Context(), root, delivery.Event{EventType: "a.b", Message: bigMessage(2 * claimLimit)})
	require.Equal(t, herr.Unavailable, herr.CodeOf(err))
	require.Len(t, broker.sentMessages(), 1)
}
