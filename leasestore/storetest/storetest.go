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
	MakeCollections(ctx context.Context, t *testing.T, n int) ([]*docstore.Collection, error)
}
