package leasestore_test

import (
	"context"
	"testing"

	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/leasestore/storetest"
)

// memHarness runs the suite on memdocstore. memdocstore lives in the
// process, so n clients of one collection are the same *Collection n times:
// racing Stores still meet only at its revision-conditional writes.
type memHarness struct{}

func (memHarness) MakeCollections(_ context.Context, _ testing.TB, n int) ([]*docstore.Collection, error) {
	coll, err := memdocstore.OpenCollection("key", nil)
	if err != nil {
		return nil, err
	}
	out := make([]*docstore.Collection, n)
	for i := range out {
		out[i] = coll
	}
	return out, nil
}

func newMemHarness(context.Context, testing.TB) (storetest.Harness, error) {
	return memHarness{}, nil
}

func TestMemConformance(t *testing.T) {
	storetest.RunConformanceTests(t, newMemHarness)
}

func BenchmarkMem(b *testing.B) {
	storetest.RunBenchmarks(b, newMemHarness)
}
