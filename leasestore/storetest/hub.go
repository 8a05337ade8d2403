package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// hubCases hold the records of the per-process hub
// (docs/streams-at-scale.md): process records with their mailboxes, hub
// queues moved between homes by compare-and-set, and the events a home
// spills into the store and a new home takes.
var hubCases = []conformanceCase{
	{"Hub/ProcessRecords", testHubProcessRecords},
	{"Hub/Homes", testHubHomes},
	{"Hub/SpillAndTake", testHubSpillAndTake},
	{"Hub/SpillRoom", testHubSpillRoom},
	{"Hub/SpilledEventsPull", testHubSpilledEventsPull},
	{"Hub/Reap", testHubReap},
}

// newProcess registers a process with a unique id and deletes it when the
// test ends.
func (b *bundle) newProcess(t testing.TB) string {
	t.Helper()
	id := "storetest-p-" + uuid.NewString()
	require.NoError(t, b.store.RegisterProcess(b.ctx, leasestore.Process{ID: id, Subscription: "hub-" + id}))
	t.Cleanup(func() { _ = b.store.DeleteProcess(context.WithoutCancel(b.ctx), id, time.Time{}) })
	return id
}

// newHubQueue creates a hub queue homed at home.
func (b *bundle) newHubQueue(t testing.TB, home string, mod func(*leasestore.Consumer)) string {
	t.Helper()
	return b.newQueue(t, leasestore.TypeNonDurableQueue, func(c *leasestore.Consumer) {
		c.Subscription, c.Home = "", home
		if mod != nil {
			mod(c)
		}
	})
}

func testHubProcessRecords(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	p := b.newProcess(t)
	requireCode(t, herr.AlreadyExists, b.store.RegisterProcess(b.ctx, leasestore.Process{ID: p}))
	requireCode(t, herr.InvalidArgument, b.store.RegisterProcess(b.ctx, leasestore.Process{ID: "a/b"}))

	got, err := b.store.GetProcess(b.ctx, p)
	require.NoError(t, err)
	require.Equal(t, "hub-"+p, got.Subscription)
	require.True(t, got.Heartbeat.Equal(b.clock.Now().Truncate(time.Millisecond)), "registered now: %v", got.Heartbeat)

	// Notices are taken by the next heartbeat, oldest first, and only once.
	require.NoError(t, b.store.Notify(b.ctx, p, leasestore.Notice{Kind: leasestore.NoticeClaim, Queue: "q1", From: "other"}))
	b.clock.Advance(time.Second)
	require.NoError(t, b.store.Notify(b.ctx, p, leasestore.Notice{Kind: leasestore.NoticeEvict, Queue: "q2"}))
	b.clock.Advance(time.Second)
	ns, err := b.store.Heartbeat(b.ctx, p)
	require.NoError(t, err)
	require.Len(t, ns, 2)
	require.Equal(t, leasestore.Notice{Kind: leasestore.NoticeClaim, Queue: "q1", From: "other", At: ns[0].At}, ns[0])
	require.Equal(t, "q2", ns[1].Queue)
	require.Equal(t, leasestore.NoticeEvict, ns[1].Kind)
	require.True(t, ns[0].At.Before(ns[1].At), "notices keep their times")
	ns, err = b.store.Heartbeat(b.ctx, p)
	require.NoError(t, err)
	require.Empty(t, ns, "a notice is taken once")
	got, err = b.store.GetProcess(b.ctx, p)
	require.NoError(t, err)
	require.True(t, got.Heartbeat.Equal(b.clock.Now().Truncate(time.Millisecond)), "the heartbeat moved: %v", got.Heartbeat)
	require.True(t, b.store.ProcessAlive(got, b.clock.Now()))
	require.False(t, b.store.ProcessAlive(got, b.clock.Now().Add(leasestore.DefaultProcessTTL)))

	unknown := "storetest-p-" + uuid.NewString()
	requireCode(t, herr.NotFound, b.store.Notify(b.ctx, unknown, leasestore.Notice{Kind: leasestore.NoticeEvict, Queue: "q"}))
	_, err = b.store.Heartbeat(b.ctx, unknown)
	requireCode(t, herr.NotFound, err)

	ps, err := b.store.ListProcesses(b.ctx)
	require.NoError(t, err)
	var ids []string
	for _, x := range ps {
		ids = append(ids, x.ID)
	}
	require.Contains(t, ids, p)

	// The reaper's delete spares a process that beat after it looked.
	require.NoError(t, b.store.DeleteProcess(b.ctx, p, got.Heartbeat.Add(-time.Millisecond)))
	_, err = b.store.GetProcess(b.ctx, p)
	require.NoError(t, err, "a newer heartbeat keeps the record")
	require.NoError(t, b.store.DeleteProcess(b.ctx, p, got.Heartbeat))
	_, err = b.store.GetProcess(b.ctx, p)
	requireCode(t, herr.NotFound, err)
	require.NoError(t, b.store.DeleteProcess(b.ctx, p, time.Time{}), "deleting a gone record is not an error")
}

func testHubHomes(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	a, c := b.newProcess(t), b.newProcess(t)
	q := b.newHubQueue(t, a, nil)
	got := b.getC(t, q)
	require.Equal(t, a, got.Home)
	require.Empty(t, got.Subscription)
	require.False(t, got.Shared)

	_, err := b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: "storetest-q-" + uuid.NewString(), Type: leasestore.TypeDurableQueue, Home: a})
	requireCode(t, herr.InvalidArgument, err)
	_, err = b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: "storetest-q-" + uuid.NewString(), Type: leasestore.TypeNonDurableQueue, Home: a, Subscription: "s"})
	requireCode(t, herr.InvalidArgument, err)

	// Compare-and-set: only from the home it has.
	_, err = b.store.SetHome(b.ctx, q, c, c)
	requireCode(t, herr.Aborted, err)
	b.clock.Advance(time.Second)
	moved, err := b.store.SetHome(b.ctx, q, a, c)
	require.NoError(t, err)
	require.Equal(t, c, moved.Home)
	require.True(t, moved.LastAttached.Equal(b.clock.Now().Truncate(time.Millisecond)), "a move counts as an attach")
	_, err = b.store.SetHome(b.ctx, q, a, c)
	requireCode(t, herr.Aborted, err)
	_, err = b.store.SetHome(b.ctx, "storetest-q-"+uuid.NewString(), a, c)
	requireCode(t, herr.NotFound, err)

	_, err = b.store.ShareQueue(b.ctx, q, a)
	requireCode(t, herr.Aborted, err)
	shared, err := b.store.ShareQueue(b.ctx, q, c)
	require.NoError(t, err)
	require.True(t, shared.Shared)
	_, err = b.store.ShareQueue(b.ctx, q, c)
	require.NoError(t, err, "sharing twice is not an error")
	require.True(t, b.getC(t, q).Shared)

	_, err = b.store.DeleteIfHome(b.ctx, q, a)
	requireCode(t, herr.Aborted, err)
	require.Equal(t, c, b.getC(t, q).Home, "a refused delete leaves the queue")
	_, err = b.store.DeleteIfHome(b.ctx, q, c)
	require.NoError(t, err)
	_, err = b.store.GetConsumer(b.ctx, q)
	requireCode(t, herr.NotFound, err)
}

func testHubSpillAndTake(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newHubQueue(t, b.newProcess(t), nil)
	at := b.clock.Now().Add(-time.Minute).Truncate(time.Millisecond)
	evs := bodies("spill", 5)
	in := make([]leasestore.Incoming, len(evs))
	for i, e := range evs {
		in[i] = leasestore.Incoming{Body: e, PublishedAt: at.Add(time.Duration(i) * time.Second)}
	}
	n, err := b.store.Spill(b.ctx, q, in[:3])
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = b.store.Spill(b.ctx, q, in[3:])
	require.NoError(t, err)
	require.Equal(t, 2, n)
	c := b.getC(t, q)
	require.EqualValues(t, 5, c.InFlight, "spilled events are held")
	require.EqualValues(t, 5, c.Requeued, "and wait to be handed out")

	got, err := b.store.TakeSpilled(b.ctx, q, 2)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(got), 2)
	rest, err := b.store.TakeSpilled(b.ctx, q, 100)
	require.NoError(t, err)
	all := append(got, rest...)
	require.Len(t, all, 5, "every spilled event is taken once")
	for i, e := range all {
		require.Equal(t, string(evs[i]), string(e.Body), "oldest first")
		require.True(t, e.PublishedAt.Equal(in[i].PublishedAt), "event %d keeps its publish time: %v", i, e.PublishedAt)
	}
	none, err := b.store.TakeSpilled(b.ctx, q, 100)
	require.NoError(t, err)
	require.Empty(t, none)
	c = b.getC(t, q)
	require.Zero(t, c.InFlight, "taken events leave the store")

	_, err = b.store.Spill(b.ctx, "storetest-q-"+uuid.NewString(), in)
	requireCode(t, herr.NotFound, err)
	_, err = b.store.TakeSpilled(b.ctx, "storetest-q-"+uuid.NewString(), 1)
	requireCode(t, herr.NotFound, err)
}

func testHubSpillRoom(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newHubQueue(t, b.newProcess(t), func(c *leasestore.Consumer) { c.MaxLength = 2 })
	in := []leasestore.Incoming{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}
	n, err := b.store.Spill(b.ctx, q, in)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a queue takes no more than its max length")
	n, err = b.store.Spill(b.ctx, q, in[2:])
	require.NoError(t, err)
	require.Zero(t, n)
}

// A shared hub queue's sessions take the spilled events with PullEvents,
// as from any queue: first delivery, in order.
func testHubSpilledEventsPull(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	q := b.newHubQueue(t, b.newProcess(t), nil)
	evs := bodies("shared", 3)
	_, err := b.store.Spill(b.ctx, q, []leasestore.Incoming{{Body: evs[0]}, {Body: evs[1]}, {Body: evs[2]}})
	require.NoError(t, err)
	b.attach(t, q, "s")
	ls := b.pullEvents(t, q, "s", 10, NewScriptedSource())
	require.Len(t, ls, 3)
	for i, l := range ls {
		require.Equal(t, string(evs[i]), string(l.Events[0]))
		require.EqualValues(t, 1, l.Attempt, "a spilled event was never delivered")
	}
}

func testHubReap(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	alive, dead := b.newProcess(t), b.newProcess(t)
	atAlive := b.newHubQueue(t, alive, nil)
	atDead := b.newHubQueue(t, dead, nil)
	released := b.newHubQueue(t, alive, nil)
	_, err := b.store.SetHome(b.ctx, released, alive, leasestore.ReleasedHome)
	require.NoError(t, err)

	reap := func() []string {
		cs, err := b.store.ReapIdle(b.ctx, reapGrace, reapIdle)
		require.NoError(t, err)
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.ID)
		}
		return ids
	}
	// step moves the clock by d, every second at a time, with a heartbeat
	// of each process in beating after every move.
	step := func(d, every time.Duration, beating ...string) {
		for d > 0 {
			s := min(d, every)
			b.clock.Advance(s)
			d -= s
			for _, p := range beating {
				_, err := b.store.Heartbeat(b.ctx, p)
				require.NoError(t, err)
			}
		}
	}
	step(reapGrace-time.Second, time.Second, alive, dead)
	require.Empty(t, reap(), "nothing idle for the grace window yet")
	step(time.Second, time.Second, alive, dead)
	require.Equal(t, []string{released}, reap(), "a released queue goes after the grace window")

	// dead stops beating now: its queue counts its grace from its last
	// heartbeat.
	step(reapGrace-time.Second, time.Second, alive)
	require.Empty(t, reap(), "a dead home's queue waits the grace window from the home's last heartbeat")
	step(time.Second, time.Second, alive)
	require.Equal(t, []string{atDead}, reap())
	// An hour with alive beating a second inside its TTL, so that it is
	// alive at every instant (a beat every second here made 3,600 round
	// trips, the slowest case of the suite on a real server).
	step(time.Hour, leasestore.DefaultProcessTTL-time.Second, alive)
	require.Empty(t, reap(), "a live home's queue is its home's to reap")
	require.Equal(t, alive, b.getC(t, atAlive).Home)
}
