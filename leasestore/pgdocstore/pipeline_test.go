package pgdocstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/internal/emulators"
)

// roundTrips counts what a pool sends: single statements and batches
// (pgx.QueryTracer and pgx.BatchTracer).
type roundTrips struct{ queries, batches atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.queries.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.batches.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// reset returns the counts so far and starts again from zero.
func (r *roundTrips) reset() (queries, batches int64) {
	return r.queries.Swap(0), r.batches.Swap(0)
}

// TestPipelines: an atomic group of writes and a group of gets each cost
// one round trip (one pgx batch, no statement of its own, no BEGIN or
// COMMIT), and the atomic group still commits all or nothing, with
// docstore's codes for each way a write can fail.
func TestPipelines(t *testing.T) {
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(emulators.PostgreSQL(t) + "?pool_max_conns=4")
	require.NoError(t, err)
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	coll, err := OpenCollection(ctx, pool, fmt.Sprintf("pipe_%d", tableSeq.Add(1)), nil)
	require.NoError(t, err)
	rev := docstore.DefaultRevisionField
	doc := func(key string, n int64) map[string]any {
		return map[string]any{"key": key, "n": n, rev: nil}
	}
	get := func(key string) (map[string]any, error) {
		d := map[string]any{"key": key}
		return d, coll.Get(ctx, d)
	}

	a, b := doc("a", 1), doc("b", 1)
	trips.reset()
	require.NoError(t, coll.Actions().AtomicWrites().Create(a).Create(b).Do(ctx))
	queries, batches := trips.reset()
	require.Equal(t, [2]int64{0, 1}, [2]int64{queries, batches}, "two creates: one batch")
	require.NotNil(t, a[rev], "a committed create sets the revision")
	require.NotNil(t, b[rev])

	t.Run("a replace, a delete and a create commit in one batch", func(t *testing.T) {
		a2 := doc("a", 2)
		a2[rev] = a[rev]
		c := doc("c", 1)
		trips.reset()
		require.NoError(t, coll.Actions().AtomicWrites().Replace(a2).Delete(b).Create(c).Do(ctx))
		queries, batches := trips.reset()
		require.Equal(t, [2]int64{0, 1}, [2]int64{queries, batches})
		require.NotEqual(t, a[rev], a2[rev], "a replace gives a new revision")
		got, err := get("a")
		require.NoError(t, err)
		require.Equal(t, int64(2), got["n"])
		require.Equal(t, a2[rev], got[rev])
		_, err = get("b")
		require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))

		// Gets of several documents: one batch too.
		ds := []map[string]any{{"key": "a"}, {"key": "c"}, {"key": "gone"}}
		trips.reset()
		err = coll.Actions().Get(ds[0]).Get(ds[1]).Get(ds[2]).Do(ctx)
		queries, batches = trips.reset()
		require.Equal(t, [2]int64{0, 1}, [2]int64{queries, batches}, "three gets: one batch")
		var errs docstore.ActionListError
		require.ErrorAs(t, err, &errs)
		require.Len(t, errs, 1)
		require.Equal(t, 2, errs[0].Index)
		require.Equal(t, gcerrors.NotFound, gcerrors.Code(errs[0].Err))
		require.Equal(t, int64(2), ds[0]["n"])
		require.Equal(t, int64(1), ds[1]["n"])
		a = a2
	})

	// Each failing group holds a write that would succeed: it must not be
	// committed, and every action of the group reports the failure.
	for name, tc := range map[string]struct {
		bad  func() map[string]any
		kind string
		code gcerrors.ErrorCode
	}{
		"a stale revision": {func() map[string]any {
			d := doc("a", 9)
			d[rev] = int64(1) // older than any revision a holds
			return d
		}, "replace", gcerrors.FailedPrecondition},
		"a replace of a missing document": {func() map[string]any { return doc("missing", 9) }, "replace", gcerrors.NotFound},
		"a conditional delete of a moved document": {func() map[string]any {
			d := doc("c", 9)
			d[rev] = int64(1)
			return d
		}, "delete", gcerrors.FailedPrecondition},
		"a create of an existing document": {func() map[string]any { return doc("c", 9) }, "create", gcerrors.AlreadyExists},
	} {
		t.Run(name+" rolls the group back", func(t *testing.T) {
			good := doc(fmt.Sprintf("new_%d", tableSeq.Add(1)), 7)
			acts := coll.Actions().AtomicWrites().Create(good)
			switch bad := tc.bad(); tc.kind {
			case "replace":
				acts.Replace(bad)
			case "delete":
				acts.Delete(bad)
			case "create":
				acts.Create(bad)
			}
			err := acts.Do(ctx)
			var errs docstore.ActionListError
			require.ErrorAs(t, err, &errs)
			require.Len(t, errs, 2, "both actions report the failure")
			for _, e := range errs {
				require.Equal(t, tc.code, gcerrors.Code(e.Err), e.Err)
			}
			require.Nil(t, good[rev], "no revision for a write that was rolled back")
			_, err = get(good["key"].(string))
			require.Equal(t, gcerrors.NotFound, gcerrors.Code(err), "the good write was rolled back")
			got, err := get("a")
			require.NoError(t, err)
			require.Equal(t, int64(2), got["n"], "a is unchanged")
		})
	}
}
