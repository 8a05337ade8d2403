// Package drivertest is the conformance suite every pubsubx driver runs
// unchanged, in the manner of gocloud.dev/pubsub/drivertest. It asserts
// herr codes, never message strings.
//
// A driver's test file implements Harness in a few lines and calls
// RunConformanceTests and RunBenchmarks. Every subtest makes its own broker
// (a topic of its own) and subscriptions with unique names, and deletes and
// closes them when it ends, so the suite can run against servers that CI
// and other engineers share.
//
// # What is checked
//
// The contract of *pubsubx.Broker: subscriptions created at the head, filter
// push-down that never filters too much, bounded receive that never strands
// a message, ack/nack/redelivery, attribute and payload round trips up to
// Herald's largest event, concurrent receivers, publish order where the
// backend promises it (one message at a time and in batches, with a
// result per message of a batch), and herr codes for unknown names, closed brokers and
// unreachable servers, calls that return by their context against a
// black-holed server (BlackHoled), and the readiness check (Ping). Counts are asserted everywhere: a message sent is
// either received or the suite fails.
package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// Harness makes brokers for the suite. A driver's test file implements it
// in a few lines.
type Harness interface {
	// MakeBroker opens a broker on a topic of its own (a unique name), so
	// tests never see each other's messages. The suite closes it.
	MakeBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error)
	// MakeSecondClient opens another client on b's topic, as a second
	// handler instance would (another process, same URL).
	MakeSecondClient(ctx context.Context, t testing.TB, b *pubsubx.Broker) (*pubsubx.Broker, error)
	// MakeUnreachableBroker opens a broker whose server does not answer
	// (a closed port), to check that failures are retryable codes.
	MakeUnreachableBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error)
	// Features says what the backend guarantees beyond the common contract.
	Features() Features
}

// ShortAckDeadline is an optional Harness capability: a harness that can
// open a broker whose ack deadline is short implements it, and the
// redelivery test uses it instead of waiting for the driver's default.
type ShortAckDeadline interface {
	// MakeBrokerWithAckDeadline opens a broker like MakeBroker whose
	// subscriptions redeliver a received, unsettled message once d has
	// passed (or the backend's minimum deadline, when that is longer). The
	// suite asks for 1 s and waits at most about three times the longer of
	// d and 10 s for the redelivery.
	MakeBrokerWithAckDeadline(ctx context.Context, t testing.TB, d time.Duration) (*pubsubx.Broker, error)
}

// Features are the optional guarantees of a backend.
type Features struct {
	// PublishOrder: a single receiver sees messages in send order.
	PublishOrder bool

	// MaxMessageBytes is the largest Body, in bytes, that Send accepts
	// with Herald's three attributes (a resource_id of up to 1 KiB); 0
	// means no limit up to 1 MiB. A body above the limit must fail Send
	// with herr.InvalidArgument (or OutOfRange), never be truncated.
	// Herald's largest event (a 256 KiB message in its CloudEvent
	// envelope) is about 257 KiB, and Herald budgets 300 KiB per body: a
	// driver whose limit is below either fails that part of the suite's
	// LargestEvent check by design (it must then fail Send cleanly).
	MaxMessageBytes int

	// BacklogRetention is, for a RetainedBacklog driver, the longest a
	// subscription keeps a message nobody receives (its bound); 0 for
	// others.
	BacklogRetention time.Duration

	// SharedBacklogBound: the count bound of a BoundedBacklog driver is
	// the topic's, shared by its subscriptions (NATS: the stream's),
	// rather than each subscription's own; a full subscription then
	// refuses a message for every subscription.
	SharedBacklogBound bool

	// ReceiveHold is, for a driver that keeps a subscription's consumer
	// between Receives (RabbitMQ), the longest it keeps messages pushed to
	// that consumer and not yet returned after the last Receive on the
	// subscription returned; other clients get them once it has passed
	// (the suite waits that long, then its usual 2 s). 0, for every other
	// driver, means a Receive never holds a message it did not return:
	// another client gets the rest at once. The hold is bounded in count
	// too (the driver's prefetch), which the suite does not observe.
	ReceiveHold time.Duration

	// AckDeadline is how long a broker from MakeBroker keeps a received,
	// unsettled message hidden before redelivering it; 0 means unknown or
	// none. The redelivery test uses MakeBroker when the harness is not a
	// ShortAckDeadline and 0 < AckDeadline ≤ 10 s; otherwise it logs that
	// redelivery was not exercised.
	AckDeadline time.Duration
}

// HarnessMaker makes a Harness; the suite calls it once per top-level test
// or benchmark, so a harness may start its server in it (cleaned up with
// t.Cleanup).
type HarnessMaker func(ctx context.Context, t testing.TB) (Harness, error)

// conformanceTest is one subtest of the suite.
type conformanceTest struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// conformanceTests lists the suite in the order it runs: cheap contract
// checks first, slow ones (redelivery, unreachable servers) last.
var conformanceTests = []conformanceTest{
	{"CreateAtHead", testCreateAtHead},
	{"CreateExisting", testCreateExisting},
	{"UnknownSubscription", testUnknownSubscription},
	{"Delete", testDelete},
	{"Filters", testFilters},
	{"UpdateKeepsHeldMessages", testUpdateKeepsHeldMessages},
	{"BoundedReceive", testBoundedReceive},
	{"ReceiveFromSecondClient", testReceiveFromSecondClient},
	{"ReceiveNothing", testReceiveNothing},
	{"Ack", testAck},
	{"Nack", testNack},
	{"AttributesRoundTrip", testAttributesRoundTrip},
	{"EverySubscriptionDelivers", testEverySubscriptionDelivers},
	{"LargestEvent", testLargestEvent},
	{"ConcurrentReceivers", testConcurrentReceivers},
	{"ConcurrentFirstUse", testConcurrentFirstUse},
	{"BoundedBacklog", testBoundedBacklog},
	{"BacklogReport", testBacklogReport},
	{"PublishOrder", testPublishOrder},
	{"BatchSendOrder", testBatchSendOrder},
	{"BatchSendResults", testBatchSendResults},
	{"Redelivery", testRedelivery},
	{"ClosedBroker", testClosedBroker},
	{"Ping", testPing},
	{"UnreachableBroker", testUnreachableBroker},
	{"BlackHoledBroker", testBlackHoledBroker},
}

// RunConformanceTests runs the whole suite, each check as a subtest, on
// brokers made by one Harness from newHarness.
func RunConformanceTests(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err, "making the harness")
	for _, tc := range conformanceTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newFixture(t, h))
		})
	}
}
