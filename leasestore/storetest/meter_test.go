package storetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"
	"gocloud.dev/gcerrors"
)

type meterDoc struct {
	Key              string `docstore:"key"`
	Body             []byte `docstore:"body"`
	N                int64  `docstore:"n"`
	DocstoreRevision any
}

// TestMeterBillsLikeDynamoDB checks the Meter's arithmetic on known items:
// units per started KiB written and 4 KiB read, deletes billed by the
// stored size, a failed conditional write billed and counted, atomic
// writes twice, and the hottest key.
func TestMeterBillsLikeDynamoDB(t *testing.T) {
	ctx := t.Context()
	inner, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	m := NewMeter()
	coll := m.Wrap(inner)
	t.Cleanup(func() { _ = coll.Close() })

	// key(3)+"k1"(2) + body(4)+2,000 + n(1)+2 + DocstoreRevision(16)+36 = 2,064 bytes: 3 units.
	d := &meterDoc{Key: "k1", Body: []byte(strings.Repeat("x", 2000)), N: 7}
	require.NoError(t, coll.Put(ctx, d))
	r := m.Report()
	require.Equal(t, int64(3), r.WriteUnits)
	require.Equal(t, int64(2064), r.BytesWritten)

	stale := &meterDoc{Key: "k1"}
	require.NoError(t, coll.Get(ctx, stale))
	require.Equal(t, int64(1), m.Report().ReadUnits, "2 KiB read in one 4 KiB unit")
	require.NoError(t, coll.Replace(ctx, d)) // moves the revision on
	stale.Body = []byte("y")
	err = coll.Replace(ctx, stale)
	require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err), "the wrapper passes the conditional failure on")
	r = m.Report()
	require.Equal(t, int64(1), r.FailedWrites)
	require.Equal(t, int64(3+3+1), r.WriteUnits, "the failed write is billed by its size")

	require.NoError(t, coll.Actions().AtomicWrites().Put(&meterDoc{Key: "k2", Body: []byte("z")}).Do(ctx))
	require.Equal(t, int64(7+2), m.Report().WriteUnits, "an atomic write costs twice")

	require.NoError(t, coll.Delete(ctx, &meterDoc{Key: "k1"}))
	r = m.Report()
	require.Equal(t, int64(9+3), r.WriteUnits, "a delete is billed by the size deleted")
	require.Equal(t, "k1", r.Hottest.Key)
	require.Equal(t, int64(4), r.Hottest.Writes)
	require.Equal(t, int64(1), r.Deletes)

	it := coll.Query().Get(ctx)
	n := 0
	for {
		var got meterDoc
		if it.Next(ctx, &got) != nil {
			break
		}
		n++
	}
	it.Stop()
	require.Equal(t, 1, n, "the query passes through")
	require.Equal(t, int64(1), m.Report().Queries)

	m.Reset()
	require.Zero(t, m.Report().WriteUnits)
}
