//go:build !herald_aws && !herald_gcp

package dynamodb_test

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

// BenchmarkDynamoDB measures the lease store on DynamoDB (moto).
func BenchmarkDynamoDB(b *testing.B) {
	storetest.RunBenchmarks(b, storeurltest.NewDynamoDBHarness)
}

// BenchmarkDynamoDBCost is storetest.RunCostBenchmarks on DynamoDB (moto):
// the same billing model as BenchmarkMemCost in package leasestore, over
// real round trips, to confirm that the counts agree in shape.
func BenchmarkDynamoDBCost(b *testing.B) {
	storetest.RunCostBenchmarks(b, storeurltest.NewDynamoDBHarness, storetest.CostOptions{Events: 1000})
}
