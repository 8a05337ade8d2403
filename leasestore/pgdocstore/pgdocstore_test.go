package pgdocstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/driver"
	"gocloud.dev/docstore/drivertest"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/internal/emulators"
)

// testPool opens a pool on a database of t's own (internal/emulators).
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), emulators.PostgreSQL(t)+"?pool_max_conns=8")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the database is dropped (cleanups run last-first)
	return pool
}

var tableSeq atomic.Int64

// harness makes drivertest collections as fresh tables of one database.
type harness struct{ pool *pgxpool.Pool }

func (h *harness) MakeCollection(ctx context.Context, kind drivertest.CollectionKind) (driver.Collection, error) {
	table := fmt.Sprintf("docs_%d", tableSeq.Add(1))
	opts := &Options{KeyField: drivertest.KeyField}
	switch kind {
	case drivertest.SingleKey, drivertest.NoRev:
	case drivertest.TwoKey:
		opts.KeyFunc = drivertest.HighScoreKey
	case drivertest.AltRev:
		opts.RevisionField = drivertest.AlternateRevisionField
	default:
		return nil, fmt.Errorf("unknown collection kind %v", kind)
	}
	return newCollection(ctx, h.pool, table, opts)
}

func (*harness) BeforeDoTypes() []any    { return nil }
func (*harness) BeforeQueryTypes() []any { return nil }
func (*harness) RevisionsEqual(a, b any) bool {
	x, ok1 := a.(int64)
	y, ok2 := b.(int64)
	return ok1 && ok2 && x == y
}
func (*harness) AtomicWritesKind() drivertest.AtomicWritesSupportKind {
	return drivertest.MultiplePartitions
}
func (*harness) Close() {}

// codecTester holds the docstore codec to PostgreSQL's own JSONB: the
// native form of a document is the text the server hands any client after
// storing it (keys reordered, whitespace and numbers normalized), and
// decoding must survive that.
type codecTester struct{ pool *pgxpool.Pool }

func (codecTester) UnsupportedTypes() []drivertest.UnsupportedType { return nil }

func (codecTester) DocstoreEncode(x any) (any, error) {
	doc, err := driver.NewDocument(x)
	if err != nil {
		return nil, err
	}
	tree, err := encodeDoc(doc)
	if err != nil {
		return nil, err
	}
	return marshal(tree)
}

func (codecTester) DocstoreDecode(value, dest any) error {
	doc, err := driver.NewDocument(dest)
	if err != nil {
		return err
	}
	v, err := unmarshal(value.([]byte))
	if err != nil {
		return err
	}
	return doc.Decode(decoder{v})
}

// NativeEncode stores the docstore encoding as jsonb and reads back the
// server's text of it.
func (ct codecTester) NativeEncode(x any) (any, error) {
	raw, err := ct.DocstoreEncode(x)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = ct.pool.QueryRow(context.Background(), "SELECT $1::jsonb", raw).Scan(&out)
	return out, err
}

// NativeDecode passes the value through the server as jsonb and decodes
// what comes back.
func (ct codecTester) NativeDecode(value, dest any) error {
	var out []byte
	if err := ct.pool.QueryRow(context.Background(), "SELECT $1::jsonb", value.([]byte)).Scan(&out); err != nil {
		return err
	}
	return ct.DocstoreDecode(out, dest)
}

// poolAs checks Collection.As and ErrorAs.
type poolAs struct{}

func (poolAs) Name() string { return "pool and PgError" }

func (poolAs) CollectionCheck(coll *docstore.Collection) error {
	var p *pgxpool.Pool
	if !coll.As(&p) || p == nil {
		return errors.New("Collection.As(*pgxpool.Pool) failed")
	}
	return nil
}

func (poolAs) QueryCheck(it *docstore.DocumentIterator) error {
	var p *pgxpool.Pool
	if it.As(&p) {
		return errors.New("DocumentIterator.As exposes nothing, but returned true")
	}
	return nil
}

func (poolAs) ErrorCheck(c *docstore.Collection, err error) error {
	var p *pgxpool.Pool
	if c.ErrorAs(err, &p) {
		return errors.New("ErrorAs(*pgxpool.Pool) returned true")
	}
	return nil
}

// TestConformance runs gocloud's docstore conformance suite on a
// local PostgreSQL (internal/emulators), every collection a fresh table of one database.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	newHarness := func(context.Context, *testing.T) (drivertest.Harness, error) {
		return &harness{pool: pool}, nil
	}
	drivertest.RunConformanceTests(t, newHarness, codecTester{pool: pool}, []drivertest.AsTest{poolAs{}})
}

// openTest opens a fresh collection keyed by "key" on pool.
func openTest(t *testing.T, pool *pgxpool.Pool, opts *Options) *docstore.Collection {
	t.Helper()
	coll, err := OpenCollection(t.Context(), pool, fmt.Sprintf("own_%d", tableSeq.Add(1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coll.Close() })
	return coll
}

// TestDriver checks what gocloud's suite does not: racing conditional
// writers, the values JSONB cannot hold as themselves, the size bound, a
// cancelled context, a wrong table, and the index.
func TestDriver(t *testing.T) {
	pool := testPool(t)
	ctx := t.Context()

	t.Run("one of many writers holding a revision wins", func(t *testing.T) {
		coll := openTest(t, pool, nil)
		doc := map[string]any{"key": "k", "n": int64(0), docstore.DefaultRevisionField: nil}
		require.NoError(t, coll.Create(ctx, doc))
		const writers = 8
		var wins atomic.Int64
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				d := map[string]any{"key": "k", "n": int64(i), docstore.DefaultRevisionField: doc[docstore.DefaultRevisionField]}
				err := coll.Replace(ctx, d)
				switch gcerrors.Code(err) {
				case gcerrors.OK:
					wins.Add(1)
				case gcerrors.FailedPrecondition:
				default:
					t.Errorf("writer %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(1), wins.Load())
		// A deleted and re-created document never takes an old revision.
		got := map[string]any{"key": "k"}
		require.NoError(t, coll.Get(ctx, got))
		require.NoError(t, coll.Delete(ctx, got))
		again := map[string]any{"key": "k", docstore.DefaultRevisionField: nil}
		require.NoError(t, coll.Create(ctx, again))
		require.NotEqual(t, got[docstore.DefaultRevisionField], again[docstore.DefaultRevisionField])
		err := coll.Replace(ctx, got)
		require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err), "%v", err)
	})

	t.Run("values JSONB cannot hold round-trip", func(t *testing.T) {
		coll := openTest(t, pool, nil)
		doc := map[string]any{
			"key":    "odd",
			"nul":    "a\x00b",
			"bad":    "\xff\xfe",
			"$bytes": "a user key that looks like a tag",
			"$$x":    map[string]any{"$time": "not a time"},
			"nan":    math.Inf(-1),
			"whole":  3.0,
			"big":    uint64(math.MaxUint64),
			"tiny":   5e-324,
		}
		require.NoError(t, coll.Put(ctx, doc))
		got := map[string]any{"key": "odd"}
		require.NoError(t, coll.Get(ctx, got))
		require.Equal(t, doc, got)
	})

	t.Run("a document over MaxDocumentBytes is refused", func(t *testing.T) {
		coll := openTest(t, pool, &Options{MaxDocumentBytes: 1000})
		err := coll.Put(ctx, map[string]any{"key": "big", "s": strings.Repeat("x", 1000)})
		require.Equal(t, gcerrors.InvalidArgument, gcerrors.Code(err), "%v", err)
		require.NoError(t, coll.Put(ctx, map[string]any{"key": "small", "s": strings.Repeat("x", 900)}))
	})

	t.Run("a cancelled context stops a statement", func(t *testing.T) {
		coll := openTest(t, pool, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := coll.Put(cctx, map[string]any{"key": "c"})
		require.Equal(t, gcerrors.Canceled, gcerrors.Code(err), "%v", err)
	})

	t.Run("the statement timeout bounds a blocked write", func(t *testing.T) {
		table := fmt.Sprintf("own_%d", tableSeq.Add(1))
		coll, err := OpenCollection(ctx, pool, table, &Options{StatementTimeout: 200 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { _ = coll.Close() })
		require.NoError(t, coll.Put(ctx, map[string]any{"key": "locked"}))
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		_, err = tx.Exec(ctx, "SELECT 1 FROM "+table+" WHERE key = 'locked' FOR UPDATE")
		require.NoError(t, err)
		err = coll.Put(ctx, map[string]any{"key": "locked", "x": int64(1)})
		require.Equal(t, gcerrors.DeadlineExceeded, gcerrors.Code(err), "%v", err)
	})

	t.Run("a table with other columns is refused", func(t *testing.T) {
		_, err := pool.Exec(ctx, "CREATE TABLE wrong_cols (id text PRIMARY KEY, body jsonb)")
		require.NoError(t, err)
		_, err = OpenCollection(ctx, pool, "wrong_cols", nil)
		require.Equal(t, gcerrors.FailedPrecondition, ErrorCode(err), "%v", err)
		_, err = OpenCollection(ctx, pool, "bad-name", nil)
		require.Equal(t, gcerrors.InvalidArgument, ErrorCode(err), "%v", err)
	})

	t.Run("an unordered query reads every page", func(t *testing.T) {
		coll := openTest(t, pool, nil)
		const n = 2*pageRows + 37
		acts := coll.Actions()
		for i := range n {
			acts.Put(map[string]any{"key": fmt.Sprintf("k%05d", i), "kind": []string{"a", "b"}[i%2], "i": int64(i)})
		}
		require.NoError(t, acts.Do(ctx))
		count := func(q *docstore.Query) (int, map[int64]bool) {
			it := q.Get(ctx)
			defer it.Stop()
			seen := map[int64]bool{}
			for {
				doc := map[string]any{}
				err := it.Next(ctx, doc)
				if errors.Is(err, io.EOF) {
					return len(seen), seen
				}
				require.NoError(t, err)
				i := doc["i"].(int64)
				require.False(t, seen[i], "document %d read twice", i)
				seen[i] = true
			}
		}
		got, _ := count(coll.Query())
		require.Equal(t, n, got)
		got, seen := count(coll.Query().Where("kind", "=", "b"))
		require.Equal(t, n/2, got)
		for i := range seen {
			require.Equal(t, int64(1), i%2)
		}
		got, _ = count(coll.Query().Where("kind", "=", "a").Limit(pageRows + 3))
		require.Equal(t, pageRows+3, got)
		got, _ = count(coll.Query().Where("i", ">=", int64(n-5)).OrderBy("i", docstore.Descending))
		require.Equal(t, 5, got)
	})

	t.Run("an equality filter on an index field uses the index", func(t *testing.T) {
		table := fmt.Sprintf("own_%d", tableSeq.Add(1))
		coll, err := OpenCollection(ctx, pool, table, &Options{IndexFields: []string{"kind"}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = coll.Close() })
		sql, err := coll.Query().Where("kind", "=", "consumer").Plan()
		require.NoError(t, err)
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, "SET enable_seqscan = off")
		require.NoError(t, err)
		var plan strings.Builder
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, `"consumer"`)
		require.NoError(t, err)
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan.WriteString(line + "\n")
		}
		require.NoError(t, rows.Err())
		_, err = conn.Exec(ctx, "RESET enable_seqscan")
		require.NoError(t, err)
		require.Contains(t, plan.String(), table+"_kind_idx", plan.String())
	})
}

// TestOrderedQueryHasASQLLimit: an ordered query (OrderBy or Offset)
// without a Limit, or with one past the bound, asks for at most
// maxQueryRows+1 rows, so the server never streams an unbounded result.
func TestOrderedQueryHasASQLLimit(t *testing.T) {
	t.Parallel()
	c := &collection{table: `"t"`}
	for _, tc := range []struct {
		name string
		q    driver.Query
		want int
	}{
		{"order by, no limit", driver.Query{OrderByField: "n", OrderAscending: true}, maxQueryRows + 1},
		{"offset, no limit", driver.Query{Offset: 3}, maxQueryRows + 1},
		{"order by, limit 5", driver.Query{OrderByField: "n", Limit: 5}, 5},
		{"order by, limit past the bound", driver.Query{OrderByField: "n", Limit: 10 * maxQueryRows}, maxQueryRows + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args, err := c.querySQL(&tc.q, false, nil, tc.q.Limit)
			require.NoError(t, err)
			require.Contains(t, sql, " LIMIT $")
			limitArg := args[len(args)-1]
			if tc.q.Offset > 0 {
				limitArg = args[len(args)-2]
			}
			require.Equal(t, tc.want, limitArg, sql)
		})
	}
}
