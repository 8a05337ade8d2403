// Package storetest is the conformance suite every leasestore backend runs
// unchanged: every lease rule of the durable-consumer API, racing store clients, a crash
// between the lease write and the broker ack, and the payload size cap;
// and for the notifications API's queues: sessions, single-event pulls and settlements,
// the delivery count and limit, message TTL and maximum length, the
// dead-letter queue (no loss between its writes, listing, replay,
// discard), the idle-queue reaper, and sessions acting at random; and the
// connection records of the API Gateway WebSocket bridge; and the
// idempotency keys of keyed publishes (claim, replay, refusal of another
// request, per-principal scope, window expiry, takeover, and a crash at
// each of the two points between the key's writes and the publish).
//
// A backend's test file implements Harness in a few lines and calls
// RunConformanceTests and RunBenchmarks. The suite feeds the store from a
// ScriptedSource (the broker side, in process) and moves a Clock instead of
// sleeping; the store itself always runs against the harness's collection.
// It asserts herr codes, never message strings.
//
// # What a backend must give
//
// The store's correctness rests on one thing: a revision-conditional write
// (docstore Replace or Delete of a document read with its revision) is
// atomic on the server, even under concurrent clients. The Race cases
// check exactly that, with 8 workers on two clients. moto_server as
// shipped runs threaded and its DynamoDB PutItem evaluates the condition
// and stores the item without a lock
// (moto/dynamodb/models/table.py, Table.put_item), so under load two
// conditional writes from the same revision can both succeed: the Race
// cases then fail with "position N generation G leased to both". Run moto
// single-threaded for this suite, e.g. with the Python interpreter that
// moto_server runs on:
//
//	python -c 'import sys; from werkzeug.serving import run_simple; from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app; run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)' PORT
//
// Real DynamoDB, the Firestore emulator and memdocstore are atomic.
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

// ParallelHarness is a Harness whose cases may run in parallel: its
// MakeCollections is safe for concurrent use and every call makes a
// collection that no other call touches. The suite's cases share nothing
// else: each keeps to its own collection, consumer ids, idempotency keys
// and fault hooks (leasestore/internal/faults filters on them). A harness
// over a real server implements it so that one case's round trips overlap
// another's instead of adding to them.
type ParallelHarness interface {
	Harness
	// Parallel reports whether RunConformanceTests may run the cases in
	// parallel.
	Parallel() bool
}

// RunConformanceTests runs the whole suite against the harness that
// newHarness makes, each rule as a subtest on a fresh collection from
// Harness.MakeCollections. Subtests run one after another (a harness need
// not be safe for concurrent use) unless the harness is a ParallelHarness
// that says they may run in parallel: then each calls t.Parallel, and go
// test runs as many at once as its -parallel flag allows (GOMAXPROCS by
// default).
func RunConformanceTests(t *testing.T, newHarness HarnessMaker) {
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatalf("make harness: %v", err)
	}
	p, ok := h.(ParallelHarness)
	parallel := ok && p.Parallel()
	for _, c := range conformanceCases {
		t.Run(c.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			c.run(t, h)
		})
	}
}

// conformanceCase is one subtest of RunConformanceTests.
type conformanceCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

// conformanceCases lists every subtest, grouped by the rule they check.
var conformanceCases = concat(
	consumerCases,
	pullCases,
	expiryCases,
	ackCases,
	windowCases,
	payloadCases,
	custodyCases,
	raceCases,
	sizeCases,
	sessionCases,
	eventCases,
	deadLetterCases,
	intakeCases,
	unreceivedCases,
	reapCases,
	connectionCases,
	claimCases,
	webhookCases,
	randomCases,
	layoutCases,
	controlCases,
	streamControlCases,
	hubCases,
	withheldCases,
	idempotencyCases,
	idempotencyEachCases,
	leaseListCases,
)

func concat[T any](lists ...[]T) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
