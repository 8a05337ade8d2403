package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var custodyCases = []conformanceCase{
	{"Custody/AckedOnlyWhenLeased", testCustodyAckedOnlyWhenLeased},
	{"Custody/ReceiveFails", testCustodyReceiveFails},
	{"Custody/LostRaceRetried", testCustodyLostRace},
	{"Custody/DeletedWhileReceiving", testCustodyDeleted},
	{"Custody/PausedWhileReceiving", testCustodyPaused},
	{"Custody/RivalDuringReceive", testCustodyRival},
	{"Custody/OwnLeaseWhileReceiving", testCustodyOwnLease},
	{"Custody/RequeuedWhileReceiving", testCustodyRequeued},
	{"Custody/CrashBeforeBrokerAck", testCustodyCrash},
}

// errInjected is the failure the suite tells a ScriptedSource to return.
var errInjected = errors.New("storetest: injected failure")

// requireAllBack checks that a pull that ended without a new lease handed
// every received event back: none acked, none outstanding, and no payload
// record of the consumer beyond want.
func requireAllBack(t testing.TB, b *bundle, src *ScriptedSource, available, payloads int) {
	t.Helper()
	c := src.Counts()
	require.Zero(t, c.Acked, "no event may be acked without a lease holding it")
	require.Zero(t, c.Outstanding, "received events must be nacked, not left until their ack deadline")
	require.Equal(t, available, c.Available)
	require.Zero(t, c.BadSettles)
	require.Equal(t, payloads, countRecords(t, b, payloadKeyPrefix(b.consumer)), "payload records")
}

func testCustodyAckedOnlyWhenLeased(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("a", 5)...)
	b.pull(t, "w", 3, src)
	for i := range 5 {
		require.Equal(t, i < 3, src.IsAcked(i), "event %d acked", i)
	}
	c := src.Counts()
	require.Zero(t, c.Outstanding)
	require.Zero(t, c.Nacked, "the pull asked for no more than it leased")
}

func testCustodyReceiveFails(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("r", 2)...)
	src.FailReceive(errInjected)
	_, err := b.tryPull(b.store, "w", 2, src)
	require.ErrorIs(t, err, errInjected, "the source's error is returned")
	require.Zero(t, b.get(t).InFlight)
	requireAllBack(t, b, src, 2, 0)

	src.FailReceive(nil)
	requireLease(t, b.pull(t, "w", 2, src), 1, bodies("r", 2)...)
}

func testCustodyLostRace(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	mine := NewScriptedSource(bodies("mine", 2)...)
	theirs := NewScriptedSource(bodies("theirs", 3)...)
	var rival *leasestore.Lease
	mine.OnReceive(func() {
		// Another client leases new work between this pull's read and its
		// write, so this pull's conditional write loses.
		var err error
		rival, err = b.tryPull(b.stores[1], "rival", 3, theirs)
		require.NoError(t, err)
	})
	got := b.pull(t, "w", 2, mine)
	requireLease(t, rival, 1, bodies("theirs", 3)...)
	requireLease(t, got, 4, bodies("mine", 2)...)
	require.Equal(t, 2, mine.Counts().Acked)
	require.Equal(t, 3, theirs.Counts().Acked)
	require.Equal(t, int64(5), b.get(t).InFlight)
	require.Equal(t, 2, countRecords(t, b, payloadKeyPrefix(b.consumer)))
	requireSourceSane(t, mine)
}

func testCustodyDeleted(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	src := NewScriptedSource(bodies("d", 3)...)
	src.OnReceive(func() {
		_, err := b.stores[1].DeleteConsumer(b.ctx, b.consumer)
		require.NoError(t, err)
	})
	_, err := b.tryPull(b.store, "w", 3, src)
	requireCode(t, herr.NotFound, err)
	requireAllBack(t, b, src, 3, 0)
}

func testCustodyPaused(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	src := NewScriptedSource(bodies("p", 3)...)
	src.OnReceive(func() {
		_, err := b.stores[1].SetPaused(b.ctx, b.consumer, true)
		require.NoError(t, err)
	})
	_, err := b.tryPull(b.store, "w", 3, src)
	requireCode(t, herr.FailedPrecondition, err)
	requireAllBack(t, b, src, 3, 0)
	require.Zero(t, b.get(t).InFlight)
}

// testCustodyRival: another worker takes new work while this pull
// receives. Pullers of one consumer do not contend (each reservation only
// needs the head not to have changed its decision), so even with no retry
// budget the pull keeps its events, at the positions after the rival's.
func testCustodyRival(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2, opts: leasestore.Options{MaxRetries: 1}})
	src := NewScriptedSource(bodies("c", 2)...)
	other := NewScriptedSource(bodies("o", 1)...)
	var rival *leasestore.Lease
	src.OnReceive(func() {
		var err error
		rival, err = b.tryPull(b.stores[1], "rival", 1, other)
		require.NoError(t, err)
	})
	got, err := b.tryPull(b.store, "w", 2, src)
	require.NoError(t, err)
	require.Equal(t, int64(1), rival.Start)
	requireLease(t, got, 2, bodies("c", 2)...)
	require.Equal(t, 2, src.Counts().Acked, "custody passed")
	require.Equal(t, int64(3), b.get(t).InFlight)
}

func testCustodyOwnLease(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	src := NewScriptedSource(bodies("s", 2)...)
	other := NewScriptedSource(bodies("o", 1)...)
	var own *leasestore.Lease
	src.OnReceive(func() {
		// The same worker, through another client, gets a lease first. The
		// racing pull must return that live lease and hand its own events
		// back to the source.
		var err error
		own, err = b.tryPull(b.stores[1], "w", 1, other)
		require.NoError(t, err)
	})
	got := b.pull(t, "w", 2, src)
	requireSameLease(t, own, got)
	requireAllBack(t, b, src, 2, 1)
	require.Equal(t, int64(1), b.get(t).InFlight)
}

func testCustodyRequeued(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{clients: 2})
	first := b.pull(t, "w0", 1, NewScriptedSource([]byte("first")))
	src := NewScriptedSource(bodies("q", 2)...)
	src.OnReceive(func() {
		// A lease fails while this pull receives: redelivery goes before
		// new work, so the pull returns it and hands its events back.
		_, err := b.stores[1].Acknowledge(b.ctx, leasestore.AckParams{
			Consumer: b.consumer, LeaseID: first.ID, Generation: first.Generation, Status: leasestore.StatusFailed,
		})
		require.NoError(t, err)
	})
	got := b.pull(t, "w", 2, src)
	requireReclaimed(t, first, got, b.clock.Now().Add(visibility))
	requireAllBack(t, b, src, 2, 1)
	require.Equal(t, int64(1), b.get(t).InFlight)
}

func testCustodyCrash(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bodies("x", 2)
	src := NewScriptedSource(all...)
	// The broker ack never happens, as when the process dies right after
	// writing the lease.
	src.FailSettle(errInjected)
	l := b.pull(t, "w1", 2, src)
	requireLease(t, l, 1, all...)
	c := src.Counts()
	require.Zero(t, c.Acked, "the broker never saw the ack")
	require.Equal(t, 2, c.Outstanding)
	require.Equal(t, int64(2), b.get(t).InFlight, "the events are safe in a lease")

	// The ack deadline passes; the broker redelivers; the events come again
	// in a new lease: a duplicate, never a loss.
	src.FailSettle(nil)
	require.Equal(t, 2, src.Redeliver())
	dup := b.pull(t, "w2", 2, src)
	requireLease(t, dup, 3, all...)
	require.Equal(t, 2, src.Counts().Acked)

	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
	r := b.ack(t, dup, leasestore.StatusOK)
	require.Equal(t, int64(4), r.Committed)
	requireSourceSane(t, src)
}
