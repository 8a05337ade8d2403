//go:build !herald_aws && !herald_gcp

package storeurl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/pgdocstore"
	"github.com/heraldevents/herald/leasestore/storetest"
	"github.com/heraldevents/herald/leasestore/storeurl"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
)

// backend is a real server the lease store runs on, with the size limit of
// one stored record.
type backend struct {
	harness   storetest.Harness
	itemLimit int // bytes
}

// Item limits of the backends: DynamoDB's 400 KB item, Firestore's 1 MiB
// document.
const (
	dynamoItemLimit    = 400 << 10
	firestoreItemLimit = 1 << 20
)

// backendCases run on every backend. They are the focused checks of this
// package; the full rule set is storetest's.
var backendCases = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"round trip", testRoundTrip},
	{"failed lease is redelivered with a higher generation", testRequeue},
	{"racing clients lease every position once", testRacingClients},
	{"largest payload fits in one record", testMaxPayload},
	{"consumer with 1,000 single-event leases fits in one record", testThousandLeases},
	{"longest queue id makes valid keys", testLongestID},
}

func runBackend(t *testing.T, b backend) {
	for _, c := range backendCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}

// TestDynamoDB runs the focused cases on DynamoDB (moto), then opens
// tables by URL the way HERALD_STORE_URL does.
func TestDynamoDB(t *testing.T) {
	h, err := storeurltest.NewDynamoDBHarness(t.Context(), t)
	require.NoError(t, err)
	runBackend(t, backend{harness: h, itemLimit: dynamoItemLimit})
	t.Run("URL", func(t *testing.T) { testDynamoURL(t, h.(*storeurltest.DynamoDB)) })
}

// TestFirestore runs the focused cases on Google's Firestore emulator,
// then opens a collection by URL the way HERALD_STORE_URL does.
func TestFirestore(t *testing.T) {
	h, err := storeurltest.NewFirestoreHarness(t.Context(), t)
	require.NoError(t, err)
	runBackend(t, backend{harness: h, itemLimit: firestoreItemLimit})
	t.Run("URL", func(t *testing.T) { testFirestoreURL(t, h.(*storeurltest.Firestore)) })
}

// TestPostgreSQL runs the focused cases on the machine's PostgreSQL, then
// checks what a postgres:// URL must refuse once a server answers.
func TestPostgreSQL(t *testing.T) {
	h := storeurltest.NewPostgreSQL(t)
	runBackend(t, backend{harness: h, itemLimit: pgdocstore.DefaultMaxDocumentBytes})
	t.Run("URL", func(t *testing.T) { testPostgresURL(t, h) })
}

// testPostgresURL opens tables by postgres:// and postgresql:// URLs.
func testPostgresURL(t *testing.T, h *storeurltest.PostgreSQL) {
	ctx := t.Context()
	u := h.StoreURL(storeurltest.UniqueName("url")[:20])
	u = strings.ReplaceAll(u, "-", "_")
	coll, err := storeurl.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	id := uuid.NewString()
	_, err = leasestore.New(coll, leasestore.Options{}).CreateConsumer(ctx, leasestore.Consumer{ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	require.NoError(t, err)
	// The same table through the other scheme name, on a pool of its own.
	other, err := storeurl.Open(ctx, "postgresql"+strings.TrimPrefix(u, "postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	c, err := leasestore.New(other, leasestore.Options{}).GetConsumer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, c.ID)

	// A loopback URL without sslmode connects in plaintext; one that asks
	// for a mode gets it (prefer: TLS, when the server offers it).
	for _, tc := range []struct {
		url     string
		wantTLS bool
	}{{u, false}, {u + "&sslmode=prefer", true}} {
		c, err := storeurl.Open(ctx, tc.url)
		require.NoError(t, err)
		var pool *pgxpool.Pool
		require.True(t, c.As(&pool))
		var serverSSL string
		require.NoError(t, pool.QueryRow(ctx, "SHOW ssl").Scan(&serverSSL))
		var usesTLS bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&usesTLS))
		require.Equal(t, tc.wantTLS && serverSSL == "on", usesTLS, tc.url)
		require.NoError(t, c.Close())
	}

	// The default table is "herald".
	def, err := storeurl.Open(ctx, h.URL)
	require.NoError(t, err)
	require.NoError(t, def.Close())

	// A table of other columns is refused; a server that does not answer
	// is Unavailable, and neither message repeats the password.
	conn, err := pgx.Connect(ctx, h.URL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE wrong_cols (id text PRIMARY KEY)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	_, err = storeurl.Open(ctx, h.URL+"?table=wrong_cols")
	require.Equal(t, herr.FailedPrecondition, herr.CodeOf(err), "%v", err)
	_, err = storeurl.Open(ctx, h.URL+"?table=pg_class")
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), "a system catalog: %v", err)
	_, err = storeurl.Open(ctx, "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2")
	require.Equal(t, herr.Unavailable, herr.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "PostgreSQL at 127.0.0.1:1 is unreachable")
	require.NotContains(t, herr.MessageOf(err), "s3cret")
	require.NotContains(t, err.Error(), "s3cret")
	// A database that does not exist is told apart from an unreachable
	// server, with what to run.
	missing, err := url.Parse(h.URL)
	require.NoError(t, err)
	db := strings.ReplaceAll(storeurltest.UniqueName("nodb"), "-", "_")
	missing.Path = "/" + db
	_, err = storeurl.Open(ctx, missing.String())
	require.Equal(t, herr.FailedPrecondition, herr.CodeOf(err), "%v", err)
	require.Contains(t, herr.MessageOf(err), "has no database \""+db+"\": create it (createdb -h ")
	require.NotContains(t, herr.MessageOf(err), "unreachable")
	_, err = storeurl.Open(ctx, "postgres://u:s3cret@h/db?connect_timeout=soon")
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%v", err)
	require.NotContains(t, err.Error(), "s3cret")
}

// testDynamoURL opens tables through storeurl.Open with the AWS SDK's
// default configuration, as the local adapter does.
func testDynamoURL(t *testing.T, h *storeurltest.DynamoDB) {
	storeurltest.IsolateAWS(t)
	ctx := t.Context()
	table, err := h.NewTable(ctx, t)
	require.NoError(t, err)
	base := "dynamodb://%s?partition_key=key&region=us-east-1&endpoint=" + h.Endpoint

	coll, err := storeurl.Open(ctx, fmt.Sprintf(base, table))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Close()) })
	id := uuid.NewString()
	_, err = leasestore.New(coll, leasestore.Options{}).CreateConsumer(ctx, leasestore.Consumer{ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	require.NoError(t, err)
	// The consumer is in the table another client reads.
	other, err := (&storeurl.Opener{DynamoDB: h.Client()}).Open(ctx, "dynamodb://"+table+"?partition_key=key")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	c, err := leasestore.New(other, leasestore.Options{}).GetConsumer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, c.ID)

	_, err = storeurl.Open(ctx, fmt.Sprintf(base, "no-such-table"))
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)

	wrong := storeurltest.UniqueName("herald-wrong-key")
	in := storeurl.TableInput(wrong)
	in.AttributeDefinitions[0].AttributeName = aws.String("id")
	in.KeySchema[0].AttributeName = aws.String("id")
	_, err = h.Client().CreateTable(ctx, in)
	require.NoError(t, err)
	_, err = storeurl.Open(ctx, fmt.Sprintf(base, wrong))
	require.Equal(t, herr.FailedPrecondition, herr.CodeOf(err), "%v", err)

	err = storeurl.CreateTable(ctx, h.Client(), table)
	require.Equal(t, herr.AlreadyExists, herr.CodeOf(err), "%v", err)

	_, err = storeurl.Open(ctx, "dynamodb://"+table+"?partition_key=key&endpoint="+h.Endpoint)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "no region anywhere: %v", err)
	require.Contains(t, herr.MessageOf(err), "region")
}

// testFirestoreURL opens a collection through storeurl.Open, which must
// find the emulator through FIRESTORE_EMULATOR_HOST.
func testFirestoreURL(t *testing.T, h *storeurltest.Firestore) {
	t.Setenv(storeurl.EmulatorHostEnv, h.Host)
	ctx := t.Context()
	u := h.StoreURL(storeurltest.UniqueName("herald-url"))
	coll, err := storeurl.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, storeurltest.DeleteAll(context.Background(), coll))
		require.NoError(t, coll.Close())
	})
	id := uuid.NewString()
	_, err = leasestore.New(coll, leasestore.Options{}).CreateConsumer(ctx, leasestore.Consumer{ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	require.NoError(t, err)

	client, err := h.Client(ctx, t)
	require.NoError(t, err)
	other, err := (&storeurl.Opener{Firestore: client}).Open(ctx, u)
	require.NoError(t, err)
	c, err := leasestore.New(other, leasestore.Options{}).GetConsumer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, c.ID)
	// Firestore names the document by the key field, so the document id
	// is the record key itself.
	doc := map[string]any{"key": "c:" + id}
	require.NoError(t, other.Get(ctx, doc))
	require.Equal(t, "consumer", doc["kind"])
}

// fixture is one fresh collection with n clients, a Store on each, and a
// consumer.
type fixture struct {
	ctx      context.Context
	colls    []*docstore.Collection
	stores   []*leasestore.Store
	clock    *testkit.Clock
	consumer string
}

func newFixture(t *testing.T, b backend, n int, opts leasestore.Options) *fixture {
	t.Helper()
	ctx := t.Context()
	colls, err := b.harness.MakeCollections(ctx, t, n)
	require.NoError(t, err)
	require.Len(t, colls, n)
	f := &fixture{ctx: ctx, colls: colls, clock: testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), consumer: uuid.NewString()}
	opts.Now = f.clock.Now
	closed := map[*docstore.Collection]bool{}
	for _, c := range colls {
		if !closed[c] { // an in-process backend may hand out one collection n times
			closed[c] = true
			t.Cleanup(func() { require.NoError(t, c.Close()) })
		}
		f.stores = append(f.stores, leasestore.New(c, opts))
	}
	_, err = f.stores[0].CreateConsumer(ctx, leasestore.Consumer{
		ID: f.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "sub-" + f.consumer,
	})
	require.NoError(t, err)
	return f
}

func (f *fixture) pull(t *testing.T, store int, worker string, limit int, src leasestore.Source) (*leasestore.Lease, error) {
	t.Helper()
	return f.stores[store].Pull(f.ctx, leasestore.PullParams{
		Consumer: f.consumer, Worker: worker, Limit: limit, Visibility: time.Minute, Source: src,
	})
}

func (f *fixture) mustPull(t *testing.T, worker string, limit int, src leasestore.Source) *leasestore.Lease {
	t.Helper()
	l, err := f.pull(t, 0, worker, limit, src)
	require.NoError(t, err)
	require.NotNil(t, l, "pull by %q answered caught up", worker)
	return l
}

func (f *fixture) ack(t *testing.T, l *leasestore.Lease, generation int64, status leasestore.AckStatus) *leasestore.AckResult {
	t.Helper()
	res, err := f.stores[0].Acknowledge(f.ctx, leasestore.AckParams{
		Consumer: f.consumer, LeaseID: l.ID, Generation: generation, Status: status,
	})
	require.NoError(t, err)
	return res
}

func (f *fixture) count(t *testing.T, kind string) int {
	t.Helper()
	n, err := countKind(f.ctx, f.colls[0], kind)
	require.NoError(t, err)
	return n
}

// testRoundTrip creates a consumer, leases events from a source, reads the
// lease back from the store, acknowledges it and deletes the consumer,
// checking the records the backend holds at each step.
func testRoundTrip(t *testing.T, b backend) {
	f := newFixture(t, b, 1, leasestore.Options{})
	st := f.stores[0]

	_, err := st.CreateConsumer(f.ctx, leasestore.Consumer{ID: f.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "x"})
	require.Equal(t, herr.AlreadyExists, herr.CodeOf(err), "second create: %v", err)

	events := numbered(3)
	src := newSource(events...)
	l := f.mustPull(t, "w1", 10, src)
	require.Equal(t, int64(1), l.Start)
	require.Equal(t, int64(0), l.Generation)
	require.Equal(t, int64(1), l.Attempt)
	require.Equal(t, events, l.Events)
	queued, out, acked := src.state()
	require.Equal(t, [3]int{0, 0, 3}, [3]int{queued, out, acked}, "custody passed to the lease: all three acked at the source")

	// The same worker gets the same lease back, read from the payload
	// record this time.
	again := f.mustPull(t, "w1", 10, src)
	require.Equal(t, l.ID, again.ID)
	require.Equal(t, events, again.Events)
	require.True(t, l.ExpiresAt.Equal(again.ExpiresAt))

	none, err := f.pull(t, 0, "w2", 10, src)
	require.NoError(t, err)
	require.Nil(t, none, "caught up")

	c, err := st.GetConsumer(f.ctx, f.consumer)
	require.NoError(t, err)
	require.Equal(t, int64(3), c.InFlight)
	require.Equal(t, int64(0), c.Committed)
	require.Equal(t, 1, f.count(t, "consumer"))
	require.Equal(t, 1, f.count(t, "payload"))

	res := f.ack(t, l, 0, leasestore.StatusOK)
	require.Equal(t, leasestore.AckResult{Outcome: leasestore.OutcomeCommitted, Committed: 3}, leasestore.AckResult{Outcome: res.Outcome, Committed: res.Committed})
	res = f.ack(t, l, 0, leasestore.StatusOK)
	require.Equal(t, leasestore.AckResult{Outcome: leasestore.OutcomeCommitted, Committed: 3}, leasestore.AckResult{Outcome: res.Outcome, Committed: res.Committed},
		"a repeated ok answers as the first did")
	res = f.ack(t, l, 0, leasestore.StatusFailed)
	require.Equal(t, leasestore.AckResult{Outcome: leasestore.OutcomeStale, Committed: 3}, leasestore.AckResult{Outcome: res.Outcome, Committed: res.Committed})
	require.Equal(t, 0, f.count(t, "payload"), "a committed lease's payload is deleted")

	list, err := st.ListConsumers(f.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, f.consumer, list[0].ID)
	require.Equal(t, int64(3), list[0].Committed)

	_, err = st.DeleteConsumer(f.ctx, f.consumer)
	require.NoError(t, err)
	_, err = st.GetConsumer(f.ctx, f.consumer)
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "get after delete: %v", err)
	require.Equal(t, 0, f.count(t, "consumer"))
}

// testRequeue fails a lease and checks that another worker gets it back
// with generation and attempt one higher, and that the old generation's
// acknowledgement is stale.
func testRequeue(t *testing.T, b backend) {
	f := newFixture(t, b, 1, leasestore.Options{})
	events := numbered(2)
	src := newSource(events...)
	l := f.mustPull(t, "w1", 10, src)

	res := f.ack(t, l, 0, leasestore.StatusFailed)
	require.Equal(t, leasestore.OutcomeRequeued, res.Outcome)

	re := f.mustPull(t, "w2", 10, src)
	require.Equal(t, l.ID, re.ID)
	require.Equal(t, int64(1), re.Generation)
	require.Equal(t, int64(2), re.Attempt)
	require.Equal(t, events, re.Events)

	require.Equal(t, leasestore.OutcomeStale, f.ack(t, l, 0, leasestore.StatusOK).Outcome)
	res = f.ack(t, re, 1, leasestore.StatusOK)
	require.Equal(t, leasestore.AckResult{Outcome: leasestore.OutcomeCommitted, Committed: 2}, leasestore.AckResult{Outcome: res.Outcome, Committed: res.Committed})
}

// testRacingClients has several Stores, each on its own SDK client, pull
// and acknowledge one consumer at once. Conditional writes must make every
// position go to exactly one lease: a lost race that overwrote the winner
// would hand two leases the same positions (or lose events).
func testRacingClients(t *testing.T, b backend) {
	const (
		clients = 4
		total   = 120
		limit   = 7
	)
	f := newFixture(t, b, clients, leasestore.Options{})
	events := numbered(total)
	src := newSource(events...)

	type leased struct {
		start  int64
		events [][]byte
	}
	var (
		mu   sync.Mutex
		got  []leased
		wg   sync.WaitGroup
		errc = make(chan error, clients)
	)
	for i := range clients {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", i)
			for {
				l, err := f.pull(t, i, worker, limit, src)
				if err != nil {
					errc <- fmt.Errorf("%s pull: %w", worker, err)
					return
				}
				if l == nil {
					return
				}
				mu.Lock()
				got = append(got, leased{l.Start, l.Events})
				mu.Unlock()
				res, err := f.stores[i].Acknowledge(f.ctx, leasestore.AckParams{
					Consumer: f.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK,
				})
				if err != nil {
					errc <- fmt.Errorf("%s ack: %w", worker, err)
					return
				}
				if res.Outcome != leasestore.OutcomeCommitted {
					raw := map[string]any{"key": "c:" + f.consumer}
					_ = f.colls[i].Get(f.ctx, raw)
					errc <- fmt.Errorf("%s ack of its own live lease %s start %d: %s; record %v", worker, l.ID, l.Start, res.Outcome, raw)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}

	byPos := make(map[int64][]byte, total)
	for _, l := range got {
		for i, e := range l.events {
			pos := l.start + int64(i)
			_, dup := byPos[pos]
			require.False(t, dup, "position %d leased twice", pos)
			byPos[pos] = e
		}
	}
	require.Len(t, byPos, total, "positions 1..%d each leased once", total)
	seen := map[string]bool{}
	for pos := int64(1); pos <= total; pos++ {
		e, ok := byPos[pos]
		require.True(t, ok, "position %d never leased", pos)
		require.False(t, seen[string(e)], "event %s delivered twice", e)
		seen[string(e)] = true
	}
	queued, out, acked := src.state()
	require.Equal(t, [3]int{0, 0, total}, [3]int{queued, out, acked})

	c, err := f.stores[0].GetConsumer(f.ctx, f.consumer)
	require.NoError(t, err)
	require.Equal(t, int64(total), c.Committed)
	require.Equal(t, int64(0), c.InFlight)
	require.Equal(t, 0, f.count(t, "payload"))
}

// testMaxPayload leases the largest payloads leasestore writes by default
// and reads them back byte for byte: one event of DefaultMaxPayloadBytes,
// and 100 events that fill the cap exactly as the store counts it (body
// plus 16 bytes each). A record well over the backend's item limit is
// refused, which shows the backend enforces the limit being tested.
func testMaxPayload(t *testing.T, b backend) {
	f := newFixture(t, b, 1, leasestore.Options{})

	big := pattern(leasestore.DefaultMaxPayloadBytes, 'a')
	l := f.mustPull(t, "big", 100, newSource(big))
	require.Len(t, l.Events, 1)
	back := f.mustPull(t, "big", 100, nil) // the worker's live lease, read back
	require.Equal(t, l.ID, back.ID)
	require.True(t, bytes.Equal(big, back.Events[0]), "the %d-byte event comes back intact", len(big))

	const n = 100
	size := leasestore.DefaultMaxPayloadBytes/n - 16
	many := make([][]byte, n)
	for i := range many {
		many[i] = pattern(size, byte('a'+i%26))
	}
	l = f.mustPull(t, "many", 100, newSource(many...))
	require.Len(t, l.Events, n, "100 events of %d bytes fill the cap exactly and fit in one lease", size)
	back = f.mustPull(t, "many", 100, nil)
	require.Equal(t, many, back.Events)

	// The negative control: the backend itself refuses an oversized record.
	over := map[string]any{
		"key": "p:control:" + uuid.NewString(), "kind": "payload", "consumer": "control",
		"events": []any{pattern(b.itemLimit+1024, 'z')},
	}
	err := f.colls[0].Put(f.ctx, over)
	require.Equal(t, gcerrors.InvalidArgument, gcerrors.Code(err), "a record of %d bytes is over the item limit: %v", b.itemLimit+1024, err)
}

// pattern returns n bytes of a repeating, non-constant pattern starting at
// first, so a truncated or shifted copy would not compare equal.
func pattern(n int, first byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = first + byte(i%23)
	}
	return b
}

// testThousandLeases checks that the largest consumer record the state
// machine builds is stored, read and rewritten by the backend: 1,000
// single-event leases in flight, each held by its own worker with the
// longest id the durable-consumer API allows (200 characters of 4 bytes), and 999 acked
// ranges between them that cannot merge.
//
// The record is built through the Store on memdocstore and then copied,
// with its payloads, into the backend: building it there directly takes
// 2,000 pulls of a growing record, which moto (it spends seconds decoding
// and encoding one such item) cannot serve in a test's time. Everything
// after the copy goes through the Store on the backend.
func testThousandLeases(t *testing.T, b backend) {
	f := newFixture(t, b, 1, leasestore.Options{})
	mem, err := memdocstore.OpenCollection(storeurl.KeyField, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	memStore := leasestore.New(mem, leasestore.Options{Now: f.clock.Now})
	_, err = memStore.CreateConsumer(f.ctx, leasestore.Consumer{
		ID: f.consumer, Type: leasestore.TypeDurableConsumer, Subscription: "sub-" + f.consumer,
	})
	require.NoError(t, err)

	const pulls = 2*leasestore.MaxInFlight - 1
	worker := func(i int) string {
		prefix := fmt.Sprintf("%d-", i)
		return prefix + strings.Repeat("𝄞", 200-len(prefix))
	}
	src := newSource(numbered(pulls + 1)...)
	held := map[int]*leasestore.Lease{} // by position, the leases left in flight
	for i := 1; i <= pulls; i++ {
		l, err := memStore.Pull(f.ctx, leasestore.PullParams{
			Consumer: f.consumer, Worker: worker(i), Limit: 1, Visibility: time.Minute, Source: src,
		})
		require.NoError(t, err)
		require.Equal(t, int64(i), l.Start)
		if i%2 == 0 {
			_, err = memStore.Acknowledge(f.ctx, leasestore.AckParams{Consumer: f.consumer, LeaseID: l.ID, Status: leasestore.StatusOK})
			require.NoError(t, err)
		} else {
			held[i] = l
		}
	}
	size := copyCollection(t, f.ctx, mem, f.colls[0])
	t.Logf("largest consumer record: %d bytes by DynamoDB's item size rule (limit %d)", size, dynamoItemLimit)

	st := f.stores[0]
	c, err := st.GetConsumer(f.ctx, f.consumer)
	require.NoError(t, err)
	require.Equal(t, int64(leasestore.MaxInFlight), c.InFlight)
	require.Zero(t, c.Committed)

	_, err = f.pull(t, 0, "late", 1, src)
	var full *leasestore.WindowFullError
	require.True(t, errors.As(err, &full), "window full: %v", err)
	require.Equal(t, herr.ResourceExhausted, herr.CodeOf(err))

	// Rewrite the full record: committing position 1 joins the acked
	// range at 2 and moves the cursor to 2; the freed slot takes a new
	// lease at the next position.
	res := f.ack(t, held[1], 0, leasestore.StatusOK)
	require.Equal(t, leasestore.AckResult{Outcome: leasestore.OutcomeCommitted, Committed: 2}, leasestore.AckResult{Outcome: res.Outcome, Committed: res.Committed})
	l := f.mustPull(t, "late", 1, src)
	require.Equal(t, int64(pulls+1), l.Start)

	// A worker of the copied table still finds its lease and payload.
	back := f.mustPull(t, worker(pulls), 1, src)
	require.Equal(t, held[pulls].ID, back.ID)
	require.Equal(t, held[pulls].Events, back.Events)
}

// copyCollection copies every document of from into to, as the generic
// maps docstore decodes, with a fresh revision, and returns the size of
// the largest one by DynamoDB's item size rule.
func copyCollection(t *testing.T, ctx context.Context, from, to *docstore.Collection) int {
	t.Helper()
	it := from.Query().Get(ctx)
	defer it.Stop()
	actions := to.Actions()
	largest := 0
	for {
		doc := map[string]any{}
		err := it.Next(ctx, doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		// Revisions are the backend's own: nil asks for a new one.
		doc[docstore.DefaultRevisionField] = nil
		largest = max(largest, dynamoSize(doc))
		actions.Put(doc)
	}
	require.NoError(t, actions.Do(ctx))
	return largest
}

// dynamoSize estimates the size of an item by DynamoDB's rule: names plus
// values; strings and binaries by length, numbers by about half their
// digits plus one, one byte per boolean or null, three bytes per list or
// map plus one per element.
func dynamoSize(v any) int {
	switch v := v.(type) {
	case nil, bool:
		return 1
	case string:
		return len(v)
	case []byte:
		return len(v)
	case int64:
		return len(strconv.FormatInt(v, 10))/2 + 1
	case time.Time:
		return len(v.Format(time.RFC3339Nano))
	case []any:
		n := 3
		for _, e := range v {
			n += 1 + dynamoSize(e)
		}
		return n
	case map[string]any:
		n := 3
		for k, e := range v {
			n += 1 + len(k) + dynamoSize(e)
		}
		return n
	default:
		panic(fmt.Sprintf("dynamoSize: unexpected %T", v))
	}
}

// testLongestID uses a consumer id of 200 characters drawn from every
// character the notifications API allows in a queue id ([A-Za-z0-9._-]), the longest
// and widest id Herald hands the store, and checks that its consumer and
// payload keys work as document ids: created, leased, listed, committed.
// (Firestore refuses or nests ids with '/', which no Herald id contains.)
func testLongestID(t *testing.T, b backend) {
	f := newFixture(t, b, 1, leasestore.Options{})
	id := strings.Repeat("Az09._-", 200/7) + "..-_"
	require.Len(t, id, 200)
	st := f.stores[0]
	_, err := st.CreateConsumer(f.ctx, leasestore.Consumer{ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	require.NoError(t, err)
	l, err := st.Pull(f.ctx, leasestore.PullParams{Consumer: id, Worker: "w", Limit: 5, Visibility: time.Minute, Source: newSource(numbered(2)...)})
	require.NoError(t, err)
	require.NotNil(t, l)
	back, err := st.Pull(f.ctx, leasestore.PullParams{Consumer: id, Worker: "w", Limit: 5, Visibility: time.Minute, Source: newSource()})
	require.NoError(t, err)
	require.Equal(t, l.Events, back.Events, "read back through the payload key")
	list, err := st.ListConsumers(f.ctx)
	require.NoError(t, err)
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	require.ElementsMatch(t, []string{f.consumer, id}, ids)
	res, err := st.Acknowledge(f.ctx, leasestore.AckParams{Consumer: id, LeaseID: l.ID, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeCommitted, res.Outcome)
	_, err = st.DeleteConsumer(f.ctx, id)
	require.NoError(t, err)
}
