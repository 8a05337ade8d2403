package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var connectionCases = []conformanceCase{
	{"Connection/CreateGetExists", testConnectionCreateGet},
	{"Connection/UpdateConflict", testConnectionUpdateConflict},
	{"Connection/UpdateAfterDelete", testConnectionUpdateAfterDelete},
	{"Connection/DeleteIfUnchanged", testConnectionDeleteIfUnchanged},
	{"Connection/Limits", testConnectionLimits},
	{"Connection/ReapByAge", testConnectionReap},
	{"Connection/OtherKindsUndisturbed", testConnectionOtherKinds},
}

// connID returns a fresh connection id shaped like API Gateway's (base64
// with '+', '/' and '='), which must be a valid key on every backend.
func connID() string { return "Gk/N8+Zf" + uuid.NewString()[:8] + "=" }

// createConn creates connection id with data and requires success.
func (b *bundle) createConn(t testing.TB, id string, data string) *leasestore.Connection {
	t.Helper()
	c, err := b.store.CreateConnection(b.ctx, id, []byte(data))
	require.NoError(t, err, "CreateConnection(%q)", id)
	return c
}

func (b *bundle) getConn(t testing.TB, s *leasestore.Store, id string) *leasestore.Connection {
	t.Helper()
	c, err := s.GetConnection(b.ctx, id)
	require.NoError(t, err, "GetConnection(%q)", id)
	return c
}

func testConnectionCreateGet(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := connID()
	t0 := b.clock.Now()
	c := b.createConn(t, id, `{"n":1}`)
	require.Equal(t, id, c.ID)
	require.Equal(t, `{"n":1}`, string(c.Data))
	require.True(t, c.CreatedAt.Equal(t0), "CreatedAt %v, want %v", c.CreatedAt, t0)
	require.True(t, c.UpdatedAt.Equal(t0))

	b.clock.Advance(time.Second)
	got := b.getConn(t, b.store, id)
	require.Equal(t, id, got.ID)
	require.Equal(t, `{"n":1}`, string(got.Data))
	require.True(t, got.CreatedAt.Equal(t0))
	require.True(t, got.UpdatedAt.Equal(t0), "a read does not touch UpdatedAt")

	_, err := b.store.CreateConnection(b.ctx, id, []byte("other"))
	requireCode(t, herr.AlreadyExists, err)
	require.Equal(t, `{"n":1}`, string(b.getConn(t, b.store, id).Data), "a refused create changes nothing")

	_, err = b.store.GetConnection(b.ctx, connID())
	requireCode(t, herr.NotFound, err)

	// Ids differing only where a naive key would collide stay apart.
	a, bb := "x/y", "x_y"
	b.createConn(t, a, "a")
	b.createConn(t, bb, "b")
	require.Equal(t, "a", string(b.getConn(t, b.store, a).Data))
	require.Equal(t, "b", string(b.getConn(t, b.store, bb).Data))

	// Empty data is allowed.
	e := connID()
	b.createConn(t, e, "")
	require.Empty(t, b.getConn(t, b.store, e).Data)
}

func testConnectionUpdateConflict(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	id := connID()
	t0 := b.clock.Now()
	created := b.createConn(t, id, "v0")

	// Two readers, on two clients, of the same revision.
	r1 := b.getConn(t, b.stores[0], id)
	r2 := b.getConn(t, b.stores[1], id)
	b.clock.Advance(time.Second)
	r1.Data = []byte("v1")
	require.NoError(t, b.stores[0].UpdateConnection(b.ctx, r1))
	require.True(t, r1.UpdatedAt.Equal(t0.Add(time.Second)), "UpdatedAt %v", r1.UpdatedAt)
	require.True(t, r1.CreatedAt.Equal(t0))

	r2.Data = []byte("v2")
	requireCode(t, herr.Aborted, b.stores[1].UpdateConnection(b.ctx, r2))
	created.Data = []byte("v-created")
	requireCode(t, herr.Aborted, b.store.UpdateConnection(b.ctx, created)) // the record returned by Create is stale too
	got := b.getConn(t, b.stores[1], id)
	require.Equal(t, "v1", string(got.Data), "the losing writes changed nothing")

	// The winner's revision was refreshed: it may write again.
	b.clock.Advance(time.Second)
	r1.Data = []byte("v3")
	require.NoError(t, b.stores[0].UpdateConnection(b.ctx, r1))
	requireCode(t, herr.Aborted, b.stores[1].UpdateConnection(b.ctx, got)) // got was read before v3

	// The loser re-reads and re-applies.
	r2 = b.getConn(t, b.stores[1], id)
	require.Equal(t, "v3", string(r2.Data))
	r2.Data = append(r2.Data, "+v4"...)
	require.NoError(t, b.stores[1].UpdateConnection(b.ctx, r2))
	final := b.getConn(t, b.store, id)
	require.Equal(t, "v3+v4", string(final.Data))
	require.True(t, final.CreatedAt.Equal(t0), "CreatedAt never changes")
	require.True(t, final.UpdatedAt.Equal(t0.Add(2*time.Second)))
}

func testConnectionUpdateAfterDelete(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	id := connID()
	c := b.createConn(t, id, "x")
	require.NoError(t, b.stores[1].DeleteConnection(b.ctx, id))
	_, err := b.store.GetConnection(b.ctx, id)
	requireCode(t, herr.NotFound, err)
	c.Data = []byte("y")
	requireCode(t, herr.NotFound, b.store.UpdateConnection(b.ctx, c)) // update after delete
	_, err = b.store.GetConnection(b.ctx, id)
	requireCode(t, herr.NotFound, err) // a refused update does not re-create the record

	require.NoError(t, b.store.DeleteConnection(b.ctx, id), "delete is idempotent")
	require.NoError(t, b.store.DeleteConnection(b.ctx, connID()), "deleting what never existed is not an error")

	// The id can be used again; the old reader's revision is stale for
	// the new record.
	b.createConn(t, id, "again")
	err = b.store.UpdateConnection(b.ctx, c)
	require.Contains(t, []string{herr.Aborted.String(), herr.NotFound.String()}, herr.CodeOf(err).String(), "%v", err)
	require.Equal(t, "again", string(b.getConn(t, b.store, id).Data))
}

// testConnectionDeleteIfUnchanged: a conditional delete removes the
// record as read, refuses (Aborted) one written since, and treats a
// record already gone as deleted.
func testConnectionDeleteIfUnchanged(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	id := connID()
	c := b.createConn(t, id, "v1")
	other := b.getConn(t, b.stores[1], id)
	other.Data = []byte("v2")
	require.NoError(t, b.stores[1].UpdateConnection(b.ctx, other))
	requireCode(t, herr.Aborted, b.store.DeleteConnectionIfUnchanged(b.ctx, c)) // c was read before v2
	require.Equal(t, "v2", string(b.getConn(t, b.store, id).Data), "a refused delete leaves the record")

	fresh := b.getConn(t, b.store, id)
	require.NoError(t, b.store.DeleteConnectionIfUnchanged(b.ctx, fresh))
	_, err := b.store.GetConnection(b.ctx, id)
	requireCode(t, herr.NotFound, err)
	require.NoError(t, b.stores[1].DeleteConnectionIfUnchanged(b.ctx, other), "a record already gone is deleted")

	// A record written by UpdateConnection carries its new revision.
	id2 := connID()
	c2 := b.createConn(t, id2, "a")
	c2.Data = []byte("b")
	require.NoError(t, b.store.UpdateConnection(b.ctx, c2))
	require.NoError(t, b.store.DeleteConnectionIfUnchanged(b.ctx, c2))
	_, err = b.store.GetConnection(b.ctx, id2)
	requireCode(t, herr.NotFound, err)

	requireCode(t, herr.InvalidArgument, b.store.DeleteConnectionIfUnchanged(b.ctx, &leasestore.Connection{ID: id}))
}

func testConnectionLimits(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	long := strings.Repeat("a", leasestore.MaxConnectionIDLength+1)
	for _, id := range []string{"", long} {
		_, err := b.store.CreateConnection(b.ctx, id, nil)
		requireCode(t, herr.InvalidArgument, err)
		_, err = b.store.GetConnection(b.ctx, id)
		requireCode(t, herr.InvalidArgument, err)
		requireCode(t, herr.InvalidArgument, b.store.DeleteConnection(b.ctx, id))
	}
	// The longest id and the largest data fit every backend.
	maxID := strings.Repeat("é", leasestore.MaxConnectionIDLength/2)
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, leasestore.MaxConnectionData/4)
	c, err := b.store.CreateConnection(b.ctx, maxID, big)
	require.NoError(t, err)
	require.Equal(t, big, b.getConn(t, b.store, maxID).Data)
	_, err = b.store.CreateConnection(b.ctx, connID(), append(big, 0))
	requireCode(t, herr.InvalidArgument, err)
	c.Data = append(big, 0)
	requireCode(t, herr.InvalidArgument, b.store.UpdateConnection(b.ctx, c))
	c.Data = big[:10]
	require.NoError(t, b.store.UpdateConnection(b.ctx, c), "a refused update changes neither the record nor c's revision")
	require.Equal(t, big[:10], b.getConn(t, b.store, maxID).Data)

	// A connection that was not read has no revision to write against.
	requireCode(t, herr.InvalidArgument, b.store.UpdateConnection(b.ctx, &leasestore.Connection{ID: maxID, Data: []byte("x")}))
	requireCode(t, herr.InvalidArgument, b.store.UpdateConnection(b.ctx, nil))
	_, err = b.store.ReapConnections(b.ctx, 0)
	requireCode(t, herr.InvalidArgument, err)
}

func testConnectionReap(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const maxAge = 2 * time.Hour
	old := connID()
	b.createConn(t, old, "old")
	b.clock.Advance(time.Hour)
	fresh := connID()
	b.createConn(t, fresh, "fresh")
	touched := connID()
	tc := b.createConn(t, touched, "touched")

	require.Empty(t, b.reapConns(t, maxAge))
	b.clock.Advance(time.Hour) // old is exactly maxAge old: not longer than
	require.Empty(t, b.reapConns(t, maxAge))
	tc.Data = []byte("touched again")
	require.NoError(t, b.store.UpdateConnection(b.ctx, tc))

	b.clock.Advance(time.Millisecond)
	got := b.reapConns(t, maxAge)
	require.Len(t, got, 1)
	require.Equal(t, old, got[0].ID)
	require.Equal(t, "old", string(got[0].Data), "a reaped connection comes back with its data")
	_, err := b.store.GetConnection(b.ctx, old)
	requireCode(t, herr.NotFound, err)

	b.clock.Advance(time.Hour)
	got = b.reapConns(t, maxAge)
	require.Len(t, got, 1, "the update kept touched alive")
	require.Equal(t, fresh, got[0].ID)
	b.clock.Advance(time.Hour)
	got = b.reapConns(t, maxAge)
	require.Len(t, got, 1)
	require.Equal(t, touched, got[0].ID)
	require.Equal(t, "touched again", string(got[0].Data))
	require.Empty(t, b.reapConns(t, maxAge))
	require.Zero(t, countRecords(t, b, "w:"), "every connection record is gone")
}

func (b *bundle) reapConns(t testing.TB, maxAge time.Duration) []*leasestore.Connection {
	t.Helper()
	got, err := b.store.ReapConnections(b.ctx, maxAge)
	require.NoError(t, err)
	return got
}

// testConnectionOtherKinds checks that connection records and the other
// record kinds do not see each other: listing consumers and dead letters,
// the idle-queue reaper and the connection reaper each touch their own.
func testConnectionOtherKinds(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 1}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("k", 2)...)
	b.attach(t, q, "s")
	b.settle(t, q, nil, refs(b.pullEvents(t, q, "s", 1, src)...))
	require.Len(t, b.pullEvents(t, q, "s", 1, src), 1) // dead-letters k-0001
	require.Len(t, b.deadLettersOf(t, q), 1)
	ids := []string{connID(), connID()}
	for _, id := range ids {
		b.createConn(t, id, `{"queue":"`+q+`"}`)
	}

	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "the bundle's consumer and q, no connections")
	dls, next, err := b.store.ListDeadLetters(b.ctx, 10, "")
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, dls, 1, "no connection among the dead letters")

	// Everything is old: the connection reaper takes only connections, the
	// idle-queue reaper only the idle queue.
	b.clock.Advance(3 * reapIdle)
	var reaped []string
	for _, c := range b.reapConns(t, time.Hour) {
		reaped = append(reaped, c.ID)
	}
	require.ElementsMatch(t, ids, reaped)
	list, err = b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "the connection reaper left the consumers")
	require.Len(t, b.deadLettersOf(t, q), 1, "and the dead letters")

	for _, id := range ids {
		b.createConn(t, id, "again")
	}
	require.Equal(t, []string{q}, b.reap(t))
	for _, id := range ids {
		require.Equal(t, "again", string(b.getConn(t, b.store, id).Data), "the idle-queue reaper left the connections")
	}
	_, err = b.store.GetConsumer(b.ctx, b.consumer)
	require.NoError(t, err)
}
