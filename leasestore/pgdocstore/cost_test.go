//go:build !herald_aws && !herald_gcp

package pgdocstore_test

import (
	"testing"

	"github.com/heraldevents/herald/leasestore/storetest"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
)

// BenchmarkPostgreSQLCost is storetest.RunCostBenchmarks on a local
// PostgreSQL: the lease store cost model's scenarios, counted per
// delivered event. On this driver one docstore call is one SQL statement
// (an Update three, in one transaction), so fs-ops/event and
// fs-reads/event are the statements that write and that read, and
// stored-B/published-B the bytes of JSON written per byte published
// (docs/backends.md, "PostgreSQL").
func BenchmarkPostgreSQLCost(b *testing.B) {
	storetest.RunCostBenchmarks(b, storeurltest.NewPostgreSQLHarness, storetest.CostOptions{Events: 1000})
}
