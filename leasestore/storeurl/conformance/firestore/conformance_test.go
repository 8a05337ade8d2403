//go:build !herald_aws && !herald_gcp

package firestore_test

import (
	"testing"

	"github.com/heraldevents/herald/leasestore/storetest"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
)

// TestFirestoreConformance runs leasestore's conformance suite on Google's
// Firestore emulator, each case on a fresh collection.
func TestFirestoreConformance(t *testing.T) {
	storetest.RunConformanceTests(t, storeurltest.NewFirestoreHarness)
}

// BenchmarkFirestore measures the lease store on Google's Firestore
// emulator.
func BenchmarkFirestore(b *testing.B) {
	storetest.RunBenchmarks(b, storeurltest.NewFirestoreHarness)
}
