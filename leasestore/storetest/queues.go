package storetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/leasestore"
)

// sessionTTL is the session TTL the suite attaches with unless a test says
// otherwise; streamVisibility the visibility of PullEvents.
const (
	sessionTTL       = 30 * time.Second
	streamVisibility = 5 * time.Minute
)

// newQueue creates a consumer of type typ with a unique id (mod may set
// more fields) and deletes it when the test ends.
func (b *bundle) newQueue(t testing.TB, typ string, mod func(*leasestore.Consumer)) string {
	t.Helper()
	id := "storetest-q-" + uuid.NewString()
	c := leasestore.Consumer{ID: id, Type: typ, Subscription: "sub-" + id}
	if mod != nil {
		mod(&c)
	}
	_, err := b.store.CreateConsumer(b.ctx, c)
	require.NoError(t, err, "CreateConsumer")
	t.Cleanup(func() { _, _ = b.store.DeleteConsumer(context.WithoutCancel(b.ctx), id) })
	return id
}

// getC returns consumer id.
func (b *bundle) getC(t testing.TB, id string) *leasestore.Consumer {
	t.Helper()
	c, err := b.store.GetConsumer(b.ctx, id)
	require.NoError(t, err, "GetConsumer(%s)", id)
	return c
}

// attach attaches (or heartbeats) session on queue with sessionTTL.
func (b *bundle) attach(t testing.TB, queue, session string) {
	t.Helper()
	require.NoError(t, b.store.Attach(b.ctx, queue, session, sessionTTL), "Attach(%s)", session)
}

// pullEvents pulls up to limit events for session and requires success.
func (b *bundle) pullEvents(t testing.TB, queue, session string, limit int, src leasestore.Source) []*leasestore.Lease {
	t.Helper()
	ls, err := b.tryPullEvents(b.store, queue, session, limit, src)
	require.NoError(t, err, "PullEvents(%s, limit %d)", session, limit)
	for _, l := range ls {
		require.Len(t, l.Events, 1, "PullEvents hands out single-event leases")
	}
	return ls
}

func (b *bundle) tryPullEvents(s *leasestore.Store, queue, session string, limit int, src leasestore.Source) ([]*leasestore.Lease, error) {
	return s.PullEvents(b.ctx, leasestore.PullParams{
		Consumer: queue, Worker: session, Limit: limit, Visibility: streamVisibility, Source: src,
	})
}

// settle settles refs on queue and requires success.
func (b *bundle) settle(t testing.TB, queue string, acks, nacks []leasestore.EventRef) leasestore.SettleResult {
	t.Helper()
	r, err := b.store.Settle(b.ctx, queue, acks, nacks)
	require.NoError(t, err, "Settle")
	return r
}

// ref returns the EventRef of l.
func ref(l *leasestore.Lease) leasestore.EventRef {
	return leasestore.EventRef{LeaseID: l.ID, Generation: l.Generation}
}

// refs returns the EventRefs of ls.
func refs(ls ...*leasestore.Lease) []leasestore.EventRef {
	out := make([]leasestore.EventRef, len(ls))
	for i, l := range ls {
		out[i] = ref(l)
	}
	return out
}

// eventBodies returns the (single) events of ls, in order.
func eventBodies(ls []*leasestore.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l.Events[0])
	}
	return out
}

// starts returns the positions of ls, in order.
func starts(ls []*leasestore.Lease) []int64 {
	out := make([]int64, len(ls))
	for i, l := range ls {
		out[i] = l.Start
	}
	return out
}

// deadLetters lists every dead letter of the collection, page by page.
func (b *bundle) deadLetters(t testing.TB) []*leasestore.DeadLetter {
	t.Helper()
	var out []*leasestore.DeadLetter
	token := ""
	for range 1000 {
		page, next, err := b.store.ListDeadLetters(b.ctx, 7, token)
		require.NoError(t, err, "ListDeadLetters")
		out = append(out, page...)
		if next == "" {
			return out
		}
		token = next
	}
	t.Fatal("ListDeadLetters did not end")
	return nil
}

// deadLettersOf returns the dead letters whose origin is queue, by
// position (their ids sort so).
func (b *bundle) deadLettersOf(t testing.TB, queue string) []*leasestore.DeadLetter {
	t.Helper()
	var out []*leasestore.DeadLetter
	for _, d := range b.deadLetters(t) {
		if d.OriginQueue == queue {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// dlBodies returns the bodies of dls.
func dlBodies(dls []*leasestore.DeadLetter) []string {
	out := make([]string, len(dls))
	for i, d := range dls {
		out[i] = string(d.Body)
	}
	return out
}

// cloudEvent returns an encoded CloudEvent-like body of type typ, subject
// subject, published at at, with data {"n": n}.
func cloudEvent(typ, subject string, at time.Time, n int) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"id-%d","source":"/storetest","type":%q,"subject":%q,"datacontenttype":"application/json","data":{"n":%d},"publishedat":%q}`,
		n, typ, subject, n, at.UTC().Format(time.RFC3339Nano))
}
