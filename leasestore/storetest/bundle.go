package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/leasestore"
)

// visibility is the lease visibility the suite pulls with unless a test
// says otherwise.
const visibility = 30 * time.Second

// bundle is what most subtests need: stores over one fresh collection, the
// clock they read, and one consumer.
type bundle struct {
	ctx      context.Context
	colls    []*docstore.Collection // client i of the collection
	stores   []*leasestore.Store    // stores[i] runs over colls[i]
	store    *leasestore.Store      // stores[0]
	clock    *Clock
	consumer string // id of a fresh consumer
}

// setupOptions adjust setup.
type setupOptions struct {
	clients int                // store clients (default 1)
	opts    leasestore.Options // Now is set to the bundle's clock
}

// setup makes a fresh collection with the requested number of clients, a
// Store on each, and one durable consumer with a unique id.
func setup(t testing.TB, h Harness, so setupOptions) *bundle {
	t.Helper()
	ctx := t.Context()
	if so.clients < 1 {
		so.clients = 1
	}
	colls, err := h.MakeCollections(ctx, t, so.clients)
	require.NoError(t, err, "MakeCollections")
	require.Len(t, colls, so.clients, "MakeCollections returned the wrong number of clients")
	closeOnce(t, colls)

	b := &bundle{ctx: ctx, colls: colls, clock: NewClock()}
	opts := so.opts
	opts.Now = b.clock.Now
	for _, c := range colls {
		b.stores = append(b.stores, leasestore.New(c, opts))
	}
	b.store = b.stores[0]
	b.consumer = b.newConsumer(t)
	return b
}

// closeOnce closes every distinct collection when the test ends; an
// in-process backend may hand out the same *Collection as several clients.
func closeOnce(t testing.TB, colls []*docstore.Collection) {
	seen := map[*docstore.Collection]bool{}
	for _, c := range colls {
		if seen[c] {
			continue
		}
		seen[c] = true
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("close collection: %v", err)
			}
		})
	}
}

// newConsumer creates a durable consumer with a unique id and deletes it
// when the test ends (if the test has not already).
func (b *bundle) newConsumer(t testing.TB) string {
	t.Helper()
	id := "storetest-" + uuid.NewString()
	_, err := b.store.CreateConsumer(b.ctx, leasestore.Consumer{
		ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "sub-" + id,
	})
	require.NoError(t, err, "CreateConsumer")
	t.Cleanup(func() { _, _ = b.store.DeleteConsumer(context.WithoutCancel(b.ctx), id) })
	return id
}

// pull pulls for worker from src with the suite's visibility and requires
// success.
func (b *bundle) pull(t testing.TB, worker string, limit int, src leasestore.Source) *leasestore.Lease {
	t.Helper()
	l, err := b.tryPull(b.store, worker, limit, src)
	require.NoError(t, err, "Pull(worker %q, limit %d)", worker, limit)
	return l
}

func (b *bundle) tryPull(s *leasestore.Store, worker string, limit int, src leasestore.Source) (*leasestore.Lease, error) {
	return s.Pull(b.ctx, leasestore.PullParams{
		Consumer: b.consumer, Worker: worker, Limit: limit, Visibility: visibility, Source: src,
	})
}

// ack acknowledges l with status and requires success.
func (b *bundle) ack(t testing.TB, l *leasestore.Lease, status leasestore.AckStatus) *leasestore.AckResult {
	t.Helper()
	return b.ackGen(t, l.ID, l.Generation, status)
}

func (b *bundle) ackGen(t testing.TB, leaseID string, gen int64, status leasestore.AckStatus) *leasestore.AckResult {
	t.Helper()
	r, err := b.store.Acknowledge(b.ctx, leasestore.AckParams{
		Consumer: b.consumer, LeaseID: leaseID, Generation: gen, Status: status,
	})
	require.NoError(t, err, "Acknowledge(%s, gen %d, %s)", leaseID, gen, status)
	return r
}

// get returns the bundle's consumer.
func (b *bundle) get(t testing.TB) *leasestore.Consumer {
	t.Helper()
	c, err := b.store.GetConsumer(b.ctx, b.consumer)
	require.NoError(t, err, "GetConsumer")
	return c
}

// bodies returns n distinct, recognisable bodies: "<tag>-0001", … .
func bodies(tag string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%04d", tag, i+1)
	}
	return out
}

// requireLease checks that l holds want, in order, from position start.
func requireLease(t testing.TB, l *leasestore.Lease, start int64, want ...[]byte) {
	t.Helper()
	require.NotNil(t, l, "want a lease, got caught up")
	require.Equal(t, start, l.Start, "lease start")
	require.Equal(t, asStrings(want), asStrings(l.Events), "lease events")
}

func asStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// requireSourceSane checks the source saw no double or stray settles.
func requireSourceSane(t testing.TB, src *ScriptedSource) {
	t.Helper()
	require.Zero(t, src.Counts().BadSettles, "settles of messages that were not outstanding")
}
