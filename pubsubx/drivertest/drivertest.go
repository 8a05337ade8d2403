// Package drivertest is the conformance suite every pubsubx driver runs
// unchanged, in the manner of gocloud.dev/pubsub/drivertest. It asserts
// herr codes, never message strings.
package drivertest

import (
	"context"
	"testing"

	"github.com/heraldevents/herald/pubsubx"
)

// Harness makes brokers for the suite. A driver's test file implements it
// in a few lines.
type Harness interface {
	// MakeBroker opens a broker on a topic of its own (a unique name), so
	// tests never see each other's messages. The suite closes it.
	MakeBroker(ctx context.Context, t testing.TB) (pubsubx.Broker, error)
	// MakeSecondClient opens another client on b's topic, as a second
	// handler instance would (another process, same URL).
	MakeSecondClient(ctx context.Context, t testing.TB, b pubsubx.Broker) (pubsubx.Broker, error)
	// MakeUnreachableBroker opens a broker whose server does not answer
	// (a closed port), to check that failures are retryable codes.
	MakeUnreachableBroker(ctx context.Context, t testing.TB) (pubsubx.Broker, error)
	// Features says what the backend guarantees beyond the common contract.
	Features() Features
}

// Features are the optional guarantees of a backend.
type Features struct {
	// PublishOrder: a single receiver sees messages in send order.
	PublishOrder bool
}

// HarnessMaker makes a Harness; the suite calls it once per top-level test
// or benchmark, so a harness may start its server in it (cleaned up with
// t.Cleanup).
type HarnessMaker func(ctx context.Context, t testing.TB) (Harness, error)
