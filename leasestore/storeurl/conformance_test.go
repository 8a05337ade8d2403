//go:build !herald_aws && !herald_gcp

package storeurl_test

import (
	"testing"

	"github.com/heraldevents/herald/leasestore/storetest"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
)

// TestDynamoDBConformance runs leasestore's conformance suite on DynamoDB
// (moto), each case on a fresh table.
func TestDynamoDBConformance(t *testing.T) {
	storetest.RunConformanceTests(t, storeurltest.NewDynamoDBHarness)
}

// TestFirestoreConformance runs leasestore's conformance suite on Google's
// Firestore emulator, each case on a fresh collection.
func TestFirestoreConformance(t *testing.T) {
	storetest.RunConformanceTests(t, storeurltest.NewFirestoreHarness)
}

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

// BenchmarkDynamoDB measures the lease store on DynamoDB (moto).
func BenchmarkDynamoDB(b *testing.B) {
	storetest.RunBenchmarks(b, storeurltest.NewDynamoDBHarness)
}

// BenchmarkFirestore measures the lease store on Google's Firestore
// emulator.
func BenchmarkFirestore(b *testing.B) {
	storetest.RunBenchmarks(b, storeurltest.NewFirestoreHarness)
}

// BenchmarkDynamoDBCost is storetest.RunCostBenchmarks on DynamoDB (moto):
// the same billing model as BenchmarkMemCost in package leasestore, over
// real round trips, to confirm that the counts agree in shape.
func BenchmarkDynamoDBCost(b *testing.B) {
	storetest.RunCostBenchmarks(b, storeurltest.NewDynamoDBHarness, storetest.CostOptions{Events: 1000})
}
