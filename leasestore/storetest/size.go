package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/leasestore"
)

var sizeCases = []conformanceCase{
	{"Size/ConsumerRecordFitsAnItem", testConsumerRecordSize},
	{"Size/QueueRecordFitsAnItem", testQueueRecordSize},
}

// maxConsumerRecordBytes bounds the JSON form of a consumer's head in the
// worst case these tests build: 1,000 open single-event blocks (JSON
// spends more bytes than DynamoDB's own size rule on the same record, and
// base64 a third more on binary values). The head is written with every
// reservation, so it must stay a few KiB; the sessions of a queue (1,000
// and 200 tombstones) add about 25 KB, written only by attaches and
// heartbeats.
const (
	maxConsumerRecordBytes = 16 << 10
	maxQueueRecordBytes    = 48 << 10
)

// longWorker returns a distinct worker id of 200 characters (the durable-consumer API's
// maximum), each 4 bytes in UTF-8: the largest id a caller can send.
func longWorker(i int) string {
	prefix := strconv.Itoa(i) + "-"
	return prefix + strings.Repeat("𝄞", 200-len(prefix))
}

func testConsumerRecordSize(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	// The table is built through a Store on an in-process memdocstore and
	// its records then copied into the harness's collection: building it
	// there directly takes ~3,000 writes of a growing record, which moto
	// (seconds to encode one such item) cannot serve in CI's time. Every
	// record the state machine writes on the way is smaller than the final
	// one, so the final one is what must fit; from the copy on, everything
	// runs through the Store on the backend.
	mem, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	builder := &bundle{ctx: b.ctx, colls: []*docstore.Collection{mem}, clock: b.clock, consumer: b.consumer}
	builder.store = leasestore.New(mem, leasestore.Options{Now: b.clock.Now})
	builder.stores = []*leasestore.Store{builder.store}
	_, err = builder.store.CreateConsumer(b.ctx, leasestore.Consumer{
		ID: b.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "sub-" + b.consumer,
	})
	require.NoError(t, err)

	const pulls = 2*leasestore.MaxInFlight - 1
	src := NewScriptedSource(bodies("z", pulls+1)...)
	// Single-event leases at every position; every even one acknowledged,
	// so 1,000 leases stay in flight with 999 acked ranges between them
	// that cannot merge, and the cursor stays at 0: the largest lease
	// table a consumer can have.
	var first *leasestore.Lease
	for i := 1; i <= pulls; i++ {
		l := builder.pull(t, longWorker(i), 1, src)
		require.Equal(t, int64(i), l.Start)
		if i%2 == 0 {
			require.Equal(t, leasestore.OutcomeCommitted, builder.ack(t, l, leasestore.StatusOK).Outcome)
		}
		if i == 1 {
			first = l
		}
	}
	copyRecords(t, b.ctx, mem, b.colls[0])

	c := b.get(t)
	require.Equal(t, int64(leasestore.MaxInFlight), c.InFlight)
	require.Zero(t, c.Committed)

	doc := map[string]any{"key": consumerKey(b.consumer)}
	require.NoError(t, b.colls[0].Get(b.ctx, doc))
	enc, err := json.Marshal(doc)
	require.NoError(t, err)
	t.Logf("head with %d single-event blocks open and %d settled between them: %d bytes as JSON", leasestore.MaxInFlight, leasestore.MaxInFlight-1, len(enc))
	require.Less(t, len(enc), maxConsumerRecordBytes, "the head must stay small whatever the window")

	// The backend rewrites the largest record: committing position 1 joins
	// the acked range at 2, and the freed slot takes the next position.
	res := b.ack(t, first, leasestore.StatusOK)
	require.Equal(t, leasestore.AckResult{Outcome: leasestore.OutcomeCommitted, Committed: 2}, leasestore.AckResult{Outcome: res.Outcome, Committed: res.Committed})
	require.Equal(t, int64(pulls+1), b.pull(t, "after-the-copy", 1, src).Start)
}

// testQueueRecordSize builds the largest record a queue can have, as
// testConsumerRecordSize does for Pull: 1,000 single-event leases held by
// 1,000 attached sessions, 999 acked ranges between them, and
// MaxTombstones removed sessions remembered.
func testQueueRecordSize(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	mem, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	q := "storetest-q-" + uuid.NewString()
	builder := &bundle{ctx: b.ctx, colls: []*docstore.Collection{mem}, clock: b.clock, consumer: q}
	builder.store = leasestore.New(mem, leasestore.Options{Now: b.clock.Now})
	builder.stores = []*leasestore.Store{builder.store}
	_, err = builder.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: q, Type: leasestore.TypeDurableQueue, Subscription: "sub-" + q})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = b.store.DeleteConsumer(context.WithoutCancel(b.ctx), q) })

	session := func(i int) string {
		return "session-" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(i))).String()
	}
	for i := range leasestore.MaxTombstones {
		builder.attach(t, q, "gone-"+session(i))
	}
	n, err := builder.store.EvictSessions(b.ctx, q)
	require.NoError(t, err)
	require.Equal(t, leasestore.MaxTombstones, n)
	for i := range leasestore.MaxSessions {
		builder.attach(t, q, session(i))
	}
	const pulls = 2*leasestore.MaxInFlight - 1
	src := NewScriptedSource(bodies("z", pulls+1)...)
	var first *leasestore.Lease
	for i := 1; i <= pulls; i++ {
		if i%2 == 1 {
			ls := builder.pullEvents(t, q, session(i/2), 1, src)
			require.Equal(t, []int64{int64(i)}, starts(ls))
			if i == 1 {
				first = ls[0]
			}
			continue
		}
		ls := builder.pullEvents(t, q, session(0), 1, src)
		require.Equal(t, []int64{int64(i)}, starts(ls))
		require.Equal(t, 1, builder.settle(t, q, refs(ls...), nil).Acked)
	}
	copyRecords(t, b.ctx, mem, b.colls[0])

	c := b.getC(t, q)
	require.Equal(t, int64(leasestore.MaxInFlight), c.InFlight)
	require.Equal(t, leasestore.MaxSessions, c.LiveSessions)
	require.Zero(t, c.Committed)

	doc := map[string]any{"key": consumerKey(q)}
	require.NoError(t, b.colls[0].Get(b.ctx, doc))
	enc, err := json.Marshal(doc)
	require.NoError(t, err)
	t.Logf("queue head with %d single-event blocks, %d sessions, %d tombstones and %d settled positions between them: %d bytes as JSON",
		leasestore.MaxInFlight, leasestore.MaxSessions, leasestore.MaxTombstones, leasestore.MaxInFlight-1, len(enc))
	require.Less(t, len(enc), maxQueueRecordBytes, "the queue's head must stay small whatever the window")

	// The backend rewrites the largest record: a heartbeat, a settlement
	// that joins position 1 to the acked range at 2, a pull of new work.
	b.attach(t, q, session(0))
	require.Equal(t, leasestore.SettleResult{Acked: 1, Committed: 2}, b.settle(t, q, refs(first), nil))
	require.Equal(t, []int64{pulls + 1}, starts(b.pullEvents(t, q, session(0), 1, src)))
}

// copyRecords copies every record of from into to, as the generic maps
// docstore decodes, each with a fresh revision of the target backend. It
// writes one record at a time: an ActionList would send its ~1,000 puts at
// once, more connections than a single-threaded server (moto run as the
// package doc advises) accepts.
func copyRecords(t testing.TB, ctx context.Context, from, to *docstore.Collection) {
	t.Helper()
	it := from.Query().Get(ctx)
	defer it.Stop()
	// Puts go in action lists of copyBatch, which a driver may run
	// concurrently: one Put at a time made the copy of ~2,000 records a
	// round trip (and, on PostgreSQL, a commit) each, most of these
	// cases' time on a real server. The records written are the same.
	actions, n := to.Actions(), 0
	flush := func() {
		if n > 0 {
			require.NoError(t, actions.Do(ctx), "copy the built records")
			actions, n = to.Actions(), 0
		}
	}
	for {
		m := map[string]any{}
		err := it.Next(ctx, m)
		if errors.Is(err, io.EOF) {
			flush()
			return
		}
		require.NoError(t, err, "read the built records")
		m[docstore.DefaultRevisionField] = nil // nil: the target assigns one
		actions.Put(m)
		if n++; n == copyBatch {
			flush()
		}
	}
}

// copyBatch is how many records copyRecords writes per action list.
const copyBatch = 100
