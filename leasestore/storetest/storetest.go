// Package storetest is the conformance suite every leasestore backend runs
// unchanged: every lease rule of seed 000, racing store clients, a crash
// between the lease write and the broker ack, and the payload size cap.
package storetest

import (
	"context"
	"testing"

	"gocloud.dev/docstore"
)

// Harness makes collections for the suite.
type Harness interface {
	// MakeCollections returns n clients of one fresh, empty collection
	// whose key field is "key" (n ≥ 1). The suite closes them.
	MakeCollections(ctx context.Context, t testing.TB, n int) ([]*docstore.Collection, error)
}

// HarnessMaker makes a Harness; the suite calls it once per top-level test
// or benchmark, so a harness may start its server in it (cleaned up with
// t.Cleanup).
type HarnessMaker func(ctx context.Context, t testing.TB) (Harness, error)
