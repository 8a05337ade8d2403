package storetest

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var consumerCases = []conformanceCase{
	{"Consumer/CreateGetList", testCreateGetList},
	{"Consumer/AlreadyExists", testCreateAlreadyExists},
	{"Consumer/NotFound", testConsumerNotFound},
	{"Consumer/PauseResume", testPauseResume},
	{"Consumer/Delete", testDeleteConsumer},
	{"Consumer/DeleteRemovesPayloads", testDeleteRemovesPayloads},
	{"Consumer/Owner", testConsumerOwner},
}

// requireCode checks err carries code (herr.CodeOf), never its message.
func requireCode(t testing.TB, want herr.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want.String(), herr.CodeOf(err).String(), "error code of %v", err)
}

func testCreateGetList(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := "storetest-" + uuid.NewString()
	groups := filter.Groups{
		{EventType: "source_entry.updated", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithLazy, ResourceID: "sku-"}}},
		{EventType: "source_entry.deleted"},
	}
	in := leasestore.Consumer{
		ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "sub-" + id,
		Filters: groups, CreatedAt: b.clock.Now(),
	}
	created, err := b.store.CreateConsumer(b.ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = b.store.DeleteConsumer(t.Context(), id) })
	require.Equal(t, id, created.ID)
	require.Equal(t, leasestore.TypeDurableConsumer, created.Type)
	require.Equal(t, "sub-"+id, created.Subscription)
	require.False(t, created.Paused)
	require.Zero(t, created.Committed, "a new consumer has committed nothing")
	require.Zero(t, created.InFlight)
	require.True(t, created.CreatedAt.Equal(in.CreatedAt), "CreatedAt %v, want %v", created.CreatedAt, in.CreatedAt)

	got, err := b.store.GetConsumer(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	require.Equal(t, created.Subscription, got.Subscription)
	require.Equal(t, created.Type, got.Type)
	require.True(t, groups.Equal(got.Filters), "filter groups round-trip: %+v, want %+v", got.Filters, groups)
	require.True(t, got.CreatedAt.Equal(in.CreatedAt), "CreatedAt %v, want %v", got.CreatedAt, in.CreatedAt)

	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, c := range list {
		ids[c.ID] = true
	}
	require.True(t, ids[id], "list holds the new consumer")
	require.True(t, ids[b.consumer], "list holds the bundle's consumer")
	require.Len(t, list, 2, "the fresh collection holds exactly two consumers (payload records are not consumers)")

	// ListHeads lists the same consumers, as their heads tell them.
	heads, err := b.store.ListHeads(b.ctx)
	require.NoError(t, err)
	require.Len(t, heads, 2)
	for _, c := range heads {
		require.Contains(t, []string{id, b.consumer}, c.ID)
		if c.ID == id {
			require.Equal(t, "sub-"+id, c.Subscription)
			require.Equal(t, leasestore.TypeDurableConsumer, c.Type)
			require.True(t, groups.Equal(c.Filters))
		}
	}
}

func testCreateAlreadyExists(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	_, err := b.store.CreateConsumer(b.ctx, leasestore.Consumer{
		ID: b.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "other",
	})
	requireCode(t, herr.AlreadyExists, err)
	// The first consumer is untouched.
	require.Equal(t, "sub-"+b.consumer, b.get(t).Subscription)

	_, err = b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: "", Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	requireCode(t, herr.InvalidArgument, err)
	// A '/' would be a path separator in a Firestore document id: every
	// backend refuses it alike.
	_, err = b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: "a/b", Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	requireCode(t, herr.InvalidArgument, err)
}

func testConsumerNotFound(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	missing := "storetest-missing-" + uuid.NewString()
	_, err := b.store.GetConsumer(b.ctx, missing)
	requireCode(t, herr.NotFound, err)
	_, err = b.store.DeleteConsumer(b.ctx, missing)
	requireCode(t, herr.NotFound, err)
	_, err = b.store.SetPaused(b.ctx, missing, true)
	requireCode(t, herr.NotFound, err)
	_, err = b.store.Pull(b.ctx, leasestore.PullParams{
		Consumer: missing, Worker: "w", Limit: 1, Visibility: visibility, Source: NewScriptedSource(),
	})
	requireCode(t, herr.NotFound, err)
	_, err = b.store.Acknowledge(b.ctx, leasestore.AckParams{
		Consumer: missing, LeaseID: uuid.NewString(), Status: leasestore.StatusOK,
	})
	requireCode(t, herr.NotFound, err)
}

func testPauseResume(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("p", 3)...)
	l := b.pull(t, "w1", 1, src)
	requireLease(t, l, 1, []byte("p-0001"))

	c, err := b.store.SetPaused(b.ctx, b.consumer, true)
	require.NoError(t, err)
	require.True(t, c.Paused)
	require.True(t, b.get(t).Paused)
	// Pausing twice is a no-op, not an error.
	_, err = b.store.SetPaused(b.ctx, b.consumer, true)
	require.NoError(t, err)

	// Paused: no pull at all, not even of the worker's own live lease, and
	// the source is not touched.
	before := src.Counts().Receives
	_, err = b.tryPull(b.store, "w2", 1, src)
	requireCode(t, herr.FailedPrecondition, err)
	_, err = b.tryPull(b.store, "w1", 1, src)
	requireCode(t, herr.FailedPrecondition, err)
	require.Equal(t, before, src.Counts().Receives, "a paused pull must not receive from the source")

	// The durable-consumer API: acknowledging still works while paused.
	r := b.ack(t, l, leasestore.StatusOK)
	require.Equal(t, leasestore.OutcomeCommitted, r.Outcome)
	require.Equal(t, int64(1), r.Committed)

	c, err = b.store.SetPaused(b.ctx, b.consumer, false)
	require.NoError(t, err)
	require.False(t, c.Paused)
	requireLease(t, b.pull(t, "w2", 5, src), 2, []byte("p-0002"), []byte("p-0003"))
	requireSourceSane(t, src)
}

func testDeleteConsumer(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	d, err := b.store.DeleteConsumer(b.ctx, b.consumer)
	require.NoError(t, err)
	require.Equal(t, b.consumer, d.ID)
	require.Equal(t, "sub-"+b.consumer, d.Subscription, "delete returns the consumer so its subscription can be removed")
	_, err = b.store.GetConsumer(b.ctx, b.consumer)
	requireCode(t, herr.NotFound, err)
	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = b.store.DeleteConsumer(b.ctx, b.consumer)
	requireCode(t, herr.NotFound, err)

	// The id can be used again; the new consumer starts from scratch.
	_, err = b.store.CreateConsumer(b.ctx, leasestore.Consumer{
		ID: b.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "again",
	})
	require.NoError(t, err)
	requireLease(t, b.pull(t, "w", 1, NewScriptedSource([]byte("x"))), 1, []byte("x"))
}

func testDeleteRemovesPayloads(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	other := b.newConsumer(t)
	src := NewScriptedSource(bodies("d", 6)...)
	for _, w := range []string{"a", "b", "c"} {
		require.NotNil(t, b.pull(t, w, 2, src))
	}
	keep := NewScriptedSource([]byte("kept"))
	_, err := b.store.Pull(b.ctx, leasestore.PullParams{Consumer: other, Worker: "a", Limit: 1, Visibility: visibility, Source: keep})
	require.NoError(t, err)
	require.Equal(t, 3, countRecords(t, b, payloadKeyPrefix(b.consumer)), "three open leases, three payload records")

	_, err = b.store.DeleteConsumer(b.ctx, b.consumer)
	require.NoError(t, err)
	require.Zero(t, countRecords(t, b, payloadKeyPrefix(b.consumer)), "payload records left after delete")
	require.Zero(t, countRecords(t, b, consumerKey(b.consumer)), "consumer record left after delete")
	require.Equal(t, 1, countRecords(t, b, payloadKeyPrefix(other)), "another consumer's payload must survive")
}

// testConsumerOwner: a consumer's Owner is what CreateConsumer was given,
// on every read (GetConsumer, LookupConsumer, ListConsumers), and stays
// through the writes that rewrite the head (sessions, reservations,
// settlements, filters, pause); a consumer created without one has none.
func testConsumerOwner(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const owner = "alice@example.com"
	q := b.newQueue(t, leasestore.TypeNonDurableQueue, func(c *leasestore.Consumer) { c.Owner = owner })
	plain := b.newQueue(t, leasestore.TypeNonDurableQueue, nil)
	owners := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, id := range []string{q, plain} {
			out[id+" get"] = b.getC(t, id).Owner
			c, err := b.store.LookupConsumer(b.ctx, id)
			require.NoError(t, err)
			out[id+" lookup"] = c.Owner
		}
		list, err := b.store.ListConsumers(b.ctx)
		require.NoError(t, err)
		for _, c := range list {
			if c.ID == q || c.ID == plain {
				out[c.ID+" list"] = c.Owner
			}
		}
		return out
	}
	want := map[string]string{q + " get": owner, q + " lookup": owner, q + " list": owner, plain + " get": "", plain + " lookup": "", plain + " list": ""}
	require.Equal(t, want, owners())

	session := "s-" + uuid.NewString()
	b.attach(t, q, session)
	ls := b.pullEvents(t, q, session, 2, NewScriptedSource(bodies("owned", 2)...))
	require.Len(t, ls, 2)
	b.settle(t, q, []leasestore.EventRef{ref(ls[0])}, []leasestore.EventRef{ref(ls[1])})
	_, err := b.store.SetFilters(b.ctx, q, filter.Groups{{EventType: "a.b"}})
	require.NoError(t, err)
	_, err = b.store.SetPaused(b.ctx, q, true)
	require.NoError(t, err)
	require.NoError(t, b.store.Detach(b.ctx, q, session))
	require.Equal(t, want, owners(), "every write keeps the owner")
}
