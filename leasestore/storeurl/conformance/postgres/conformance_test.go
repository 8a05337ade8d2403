//go:build !herald_aws && !herald_gcp

package postgres_test

import (
	"testing"

	"github.com/heraldevents/herald/leasestore/storetest"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
)

// TestPostgreSQLConformance runs leasestore's conformance suite on the
// machine's PostgreSQL, each case on a fresh table of one database.
func TestPostgreSQLConformance(t *testing.T) {
	storetest.RunConformanceTests(t, storeurltest.NewPostgreSQLHarness)
}

// BenchmarkPostgreSQL measures the lease store on the machine's
// PostgreSQL.
func BenchmarkPostgreSQL(b *testing.B) {
	storetest.RunBenchmarks(b, storeurltest.NewPostgreSQLHarness)
}
