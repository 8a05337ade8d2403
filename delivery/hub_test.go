package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// hubCluster is several Herald processes (services with a hub each)
// sharing one broker and one store, as processes behind a load balancer.
type hubCluster struct {
	t      *testing.T
	broker *pubsubx.Broker
	coll   *docstore.Collection
	procs  []*hubProc
	cfg    delivery.HubConfig
}

type hubProc struct {
	svc   *delivery.Service
	store *leasestore.Store
	hub   *delivery.Hub
}

// hubHeartbeat is short so that hand-overs, which wait for the home's
// heartbeat, take a tenth of a second.
const hubHeartbeat = 100 * time.Millisecond

var hubPrincipal = &auth.Principal{ID: "tester", Permissions: []string{"*"}}

func newHubCluster(t *testing.T, n int) *hubCluster {
	return newHubClusterWith(t, n, delivery.HubConfig{})
}

func newHubClusterWith(t *testing.T, n int, cfg delivery.HubConfig) *hubCluster {
	t.Helper()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	c := &hubCluster{t: t, broker: mem.New(0), coll: coll, cfg: cfg}
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p.hub != nil {
				_ = p.hub.Close(context.Background())
			}
		}
		_ = c.broker.Close()
		_ = coll.Close()
	})
	for range n {
		c.start()
	}
	return c
}

// start starts one more process.
func (c *hubCluster) start() *hubProc {
	c.t.Helper()
	store := leasestore.New(c.coll, leasestore.Options{ProcessTTL: 5 * hubHeartbeat})
	svc := delivery.New(delivery.Config{
		Broker: c.broker, Store: store,
		Streams: delivery.StreamConfig{ReconnectGrace: 2 * time.Second, PollWait: 50 * time.Millisecond},
	})
	cfg := c.cfg
	cfg.Heartbeat, cfg.ReceiveWait = hubHeartbeat, time.Second
	hub, err := svc.StartHub(c.t.Context(), cfg)
	require.NoError(c.t, err)
	p := &hubProc{svc: svc, store: store, hub: hub}
	c.procs = append(c.procs, p)
	return p
}

func groupsOf(typ string) filter.Groups { return filter.Groups{{EventType: typ}} }

func (p *hubProc) open(t *testing.T, r delivery.StreamRequest) *delivery.Stream {
	t.Helper()
	r.Kind = delivery.NonDurable
	st, err := p.svc.OpenStream(t.Context(), hubPrincipal, r)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

func (p *hubProc) publish(t *testing.T, typ string, n int) {
	t.Helper()
	for i := range n {
		_, err := p.svc.Publish(t.Context(), hubPrincipal, delivery.Event{EventType: typ, Message: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))})
		require.NoError(t, err)
	}
}

// recv takes n events from st (acknowledging them, as a non-durable
// transport does once written) and returns their "n" members in order.
func recv(t *testing.T, st *delivery.Stream, n int) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []int
	for len(out) < n {
		ds, err := st.Next(ctx)
		require.NoError(t, err, "after %d of %d events", len(out), n)
		var tags []int64
		for _, d := range ds {
			var m struct{ N int }
			require.NoError(t, json.Unmarshal(d.Event.Message, &m))
			out = append(out, m.N)
			tags = append(tags, d.Tag)
		}
		_, err = st.Ack(ctx, tags...)
		require.NoError(t, err)
	}
	return out
}

// requireQuiet checks that st has nothing to hand out for a moment.
func requireQuiet(t *testing.T, st *delivery.Stream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	ds, err := st.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "want nothing, got %d events", len(ds))
}

// One event reaches every stream whose filters it passes, through one
// subscription per process and none per stream.
func TestHubFanOut(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 1)
	p := c.procs[0]
	var sts []*delivery.Stream
	for range 20 {
		sts = append(sts, p.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.a")}))
	}
	other := p.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.b")})
	p.publish(t, "hub.a", 3)
	for _, st := range sts {
		require.Equal(t, []int{1, 2, 3}, recv(t, st, 3))
	}
	requireQuiet(t, other)
	for _, st := range sts {
		q, err := p.store.GetConsumer(t.Context(), st.QueueID())
		require.NoError(t, err)
		require.Empty(t, q.Subscription, "a hub queue owns no broker subscription")
		require.Equal(t, p.hub.ProcessID(), q.Home)
	}
}

// A reconnect to the same process within the grace window resumes with
// the events published meanwhile and the ones not acknowledged; after the
// window the token is NOT_FOUND.
func TestHubReconnectSameProcess(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 1)
	p := c.procs[0]
	st := p.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.r")})
	token := st.QueueID()
	p.publish(t, "hub.r", 2)
	ctx := t.Context()
	ds, err := st.Next(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	require.NoError(t, st.Close(ctx)) // nothing acknowledged
	p.publish(t, "hub.r", 1)

	st = p.open(t, delivery.StreamRequest{ReconnectToken: token})
	require.Equal(t, token, st.QueueID())
	got := recv(t, st, 3)
	require.Equal(t, []int{1, 2, 1}, got, "the unacknowledged events first, then the new one")
	require.NoError(t, st.Close(ctx))

	require.Eventually(t, func() bool {
		_, err := p.store.GetConsumer(ctx, token)
		return herr.CodeOf(err) == herr.NotFound
	}, 10*time.Second, 50*time.Millisecond, "the home deletes the queue after the grace window")
	_, err = p.svc.OpenStream(ctx, hubPrincipal, delivery.StreamRequest{Kind: delivery.NonDurable, ReconnectToken: token})
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
}

// A reconnect on another process while the home is alive: the home hands
// the queue over with what it buffered, and the new home serves it.
func TestHubHandOver(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 2)
	a, b := c.procs[0], c.procs[1]
	st := a.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.h")})
	token := st.QueueID()
	a.publish(t, "hub.h", 1)
	require.Equal(t, []int{1}, recv(t, st, 1))
	require.NoError(t, st.Close(t.Context()))
	a.publish(t, "hub.h", 3) // buffered at a for the reconnect

	st = b.open(t, delivery.StreamRequest{ReconnectToken: token})
	b.publish(t, "hub.h", 1) // after the hand-over: b's hub takes it
	require.Equal(t, []int{1, 2, 3, 1}, recv(t, st, 4), "the backlog, then the new event, each once")
	requireQuiet(t, st)
	q, err := b.store.GetConsumer(t.Context(), token)
	require.NoError(t, err)
	require.Equal(t, b.hub.ProcessID(), q.Home)
	require.False(t, q.Shared)
}

// A shutdown whose time ran out (its hand-backs used it up) still deletes
// the hub's broker subscription, which would otherwise collect every event
// of the deployment until the reaper found it.
func TestHubCloseDeletesSubscriptionWhenOutOfTime(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 1)
	a := c.procs[0]
	st := a.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.d")})
	a.publish(t, "hub.d", 1)
	require.Equal(t, []int{1}, recv(t, st, 1), "the hub subscription is in use")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = a.hub.Close(ctx) // the hand-backs fail: ctx is done
	err := c.broker.DeleteSubscription(t.Context(), "herald-hub-"+a.hub.ProcessID())
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "Close deleted the hub subscription: %v", err)
}

// Only a queue taken over from another process remembers the ids of the
// events it delivered (to leave out the copies the old home spills), and
// only until the hand-over settles: an idle stream of a fresh queue holds
// no ring of ids (~14 KB each, docs/streams-at-scale.md).
func TestHubRemembersDeliveredOnlyWhileHandingOver(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 2)
	a, b := c.procs[0], c.procs[1]
	st := a.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.r")})
	a.publish(t, "hub.r", 3)
	require.Equal(t, []int{1, 2, 3}, recv(t, st, 3))
	require.False(t, delivery.RemembersDelivered(st), "a fresh queue keeps no ids")
	token := st.QueueID()
	require.NoError(t, st.Close(t.Context()))
	a.publish(t, "hub.r", 2)

	st = b.open(t, delivery.StreamRequest{ReconnectToken: token})
	require.Equal(t, []int{1, 2}, recv(t, st, 2), "the backlog, each once")
	require.Eventually(t, func() bool { return !delivery.RemembersDelivered(st) }, time.Minute, 10*time.Millisecond,
		"the claimed queue forgets the ids once the hand-over settled")
	b.publish(t, "hub.r", 1)
	require.Equal(t, []int{1}, recv(t, st, 1))
	requireQuiet(t, st)
}

// A process that shuts down hands its queues back with their backlogs: a
// reconnect anywhere takes the queue at once and finds them.
func TestHubCloseReleases(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 2)
	a, b := c.procs[0], c.procs[1]
	st := a.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.c")})
	token := st.QueueID()
	a.publish(t, "hub.c", 2)
	ds, err := st.Next(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, ds, "one or two events taken, none acknowledged")

	require.NoError(t, a.hub.Close(t.Context()))
	_, err = st.Next(t.Context())
	var cancelled *delivery.ConsumerCancelledError
	require.ErrorAs(t, err, &cancelled, "the stream ends as the broker cancelling its consumer")
	q, err := b.store.GetConsumer(t.Context(), token)
	require.NoError(t, err)
	require.Equal(t, leasestore.ReleasedHome, q.Home)

	st = b.open(t, delivery.StreamRequest{ReconnectToken: token})
	require.Equal(t, []int{1, 2}, recv(t, st, 2))
}

// Clients sharing a token on two processes make the queue shared: it is
// served from the store, and its events are split between them.
func TestHubSharedQueue(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 2)
	a, b := c.procs[0], c.procs[1]
	first := a.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.s")})
	token := first.QueueID()

	second := b.open(t, delivery.StreamRequest{ReconnectToken: token})
	q, err := b.store.GetConsumer(t.Context(), token)
	require.NoError(t, err)
	require.True(t, q.Shared)
	_, err = first.Next(t.Context())
	var cancelled *delivery.ConsumerCancelledError
	require.ErrorAs(t, err, &cancelled, "the home's stream reconnects into the shared queue")
	first = a.open(t, delivery.StreamRequest{ReconnectToken: token})

	a.publish(t, "hub.s", 10)
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, st := range []*delivery.Stream{first, second} {
		wg.Go(func() {
			for {
				ds, err := st.Next(ctx)
				if err != nil {
					return
				}
				var tags []int64
				for _, d := range ds {
					var m struct{ N int }
					_ = json.Unmarshal(d.Event.Message, &m)
					mu.Lock()
					seen[m.N]++
					if len(seen) == 10 {
						cancel() // both have what they will get
					}
					mu.Unlock()
					tags = append(tags, d.Tag)
				}
				_, _ = st.Ack(ctx, tags...)
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 10, "every event reached one of the two")
	for n, k := range seen {
		require.Equal(t, 1, k, "event %d delivered once", n)
	}
}

// An idle stream costs nothing: with many streams open and nothing
// published, the store sees the process's heartbeats and no write for any
// stream.
func TestHubIdleStreamsWriteNothing(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 1)
	p := c.procs[0]
	for range 50 {
		p.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.idle")})
	}
	before := heads(t, p.store)
	time.Sleep(10 * hubHeartbeat)
	after := heads(t, p.store)
	require.Equal(t, before, after, "no stream's record is written while it idles")
}

// heads returns every consumer's id and LastAttached.
func heads(t *testing.T, s *leasestore.Store) map[string]time.Time {
	t.Helper()
	cs, err := s.ListConsumers(t.Context())
	require.NoError(t, err)
	out := map[string]time.Time{}
	for _, c := range cs {
		out[c.ID] = c.LastAttached
	}
	return out
}

// A queue past its limit sends its oldest events to the dead-letter
// queue (MAXLEN, never delivered), as the notifications API says a queue's
// max-length overflow goes; the stream then gets the newest.
func TestHubOverflowDeadLettered(t *testing.T) {
	t.Parallel()
	c := newHubClusterWith(t, 1, delivery.HubConfig{QueueLimit: 5})
	p := c.procs[0]
	st := p.open(t, delivery.StreamRequest{FilterGroups: groupsOf("hub.o")})
	p.publish(t, "hub.o", 8)
	var dls []*leasestore.DeadLetter
	require.Eventually(t, func() bool {
		var err error
		dls, _, err = p.store.ListDeadLetters(t.Context(), 100, "")
		require.NoError(t, err)
		return len(dls) == 3
	}, 5*time.Second, 20*time.Millisecond, "the three oldest go to the dead-letter queue")
	var dead []int
	for _, d := range dls {
		require.Equal(t, leasestore.ReasonMaxLen, d.Reason)
		require.Equal(t, st.QueueID(), d.OriginQueue)
		require.Zero(t, d.DeliveryCount)
		ev, err := delivery.DecodeConsumerEvent(d.Body)
		require.NoError(t, err)
		var m struct{ N int }
		require.NoError(t, json.Unmarshal(ev.Message, &m))
		dead = append(dead, m.N)
	}
	require.ElementsMatch(t, []int{1, 2, 3}, dead)
	require.Equal(t, []int{4, 5, 6, 7, 8}, recv(t, st, 5))
}
