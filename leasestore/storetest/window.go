package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var windowCases = []conformanceCase{
	{"Window/Full", testWindowFull},
	{"Window/PartialRoom", testWindowPartialRoom},
	{"Window/ReclaimWhenFull", testWindowReclaimWhenFull},
}

// fillWindow leases MaxInFlight events to workers "fill-0", "fill-1", …
// in leases of 100 and returns the leases.
func fillWindow(t testing.TB, b *bundle, src *ScriptedSource) []*leasestore.Lease {
	t.Helper()
	var out []*leasestore.Lease
	for i := 0; i < leasestore.MaxInFlight/100; i++ {
		l := b.pull(t, "fill-"+workerName(i), 100, src)
		require.NotNil(t, l)
		require.Len(t, l.Events, 100)
		out = append(out, l)
	}
	require.Equal(t, int64(leasestore.MaxInFlight), b.get(t).InFlight)
	return out
}

// requireWindowFull checks err is a *leasestore.WindowFullError with
// ResourceExhausted, inFlight events and retryAfter.
func requireWindowFull(t testing.TB, err error, retryAfter time.Duration) {
	t.Helper()
	var wf *leasestore.WindowFullError
	require.True(t, errors.As(err, &wf), "want *WindowFullError, got %v", err)
	require.Equal(t, int64(leasestore.MaxInFlight), wf.InFlight)
	requireCode(t, herr.ResourceExhausted, err)
	require.GreaterOrEqual(t, wf.RetryAfter, time.Second, "RetryAfter is at least a second")
	require.Equal(t, retryAfter, wf.RetryAfter, "RetryAfter runs until the earliest live lease expires")
}

func testWindowFull(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("w", leasestore.MaxInFlight+50)...)
	leases := fillWindow(t, b, src)

	receives := src.Counts().Receives
	_, err := b.tryPull(b.store, "late", 10, src)
	requireWindowFull(t, err, visibility)
	require.Equal(t, receives, src.Counts().Receives, "a full window must not receive")
	require.Equal(t, leasestore.MaxInFlight, src.Counts().Acked)

	// RetryAfter tracks the clock, and never drops below a second.
	b.clock.Advance(visibility - 10*time.Second)
	_, err = b.tryPull(b.store, "late", 10, src)
	requireWindowFull(t, err, 10*time.Second)
	b.clock.Advance(10*time.Second - 500*time.Millisecond)
	_, err = b.tryPull(b.store, "late", 10, src)
	requireWindowFull(t, err, time.Second)

	// A worker holding a live lease still gets it back when the window is full.
	requireSameLease(t, leases[3], b.pull(t, "fill-"+workerName(3), 100, src))

	// Acknowledging frees room for exactly as many events.
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, leases[0], leasestore.StatusOK).Outcome)
	l := b.pull(t, "late", 100, src)
	requireLease(t, l, int64(leasestore.MaxInFlight+1), bodies("w", leasestore.MaxInFlight+50)[leasestore.MaxInFlight:]...)
	require.Equal(t, int64(leasestore.MaxInFlight-50), b.get(t).InFlight)
	requireSourceSane(t, src)
}

func testWindowPartialRoom(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("p", leasestore.MaxInFlight+100)...)
	for i := 0; i < 9; i++ {
		require.Len(t, b.pull(t, "w"+workerName(i), 100, src).Events, 100)
	}
	require.Len(t, b.pull(t, "w9", 95, src).Events, 95)

	l := b.pull(t, "w10", 100, src)
	require.Len(t, l.Events, 5, "only the room left in the window is leased")
	require.Equal(t, int64(996), l.Start)
	c := src.Counts()
	require.Equal(t, leasestore.MaxInFlight, c.Acked, "exactly the leased events left the source")
	require.Zero(t, c.Outstanding)
	require.Equal(t, 100, c.Available)
	require.Equal(t, int64(leasestore.MaxInFlight), b.get(t).InFlight, "in-flight never exceeds the window")

	_, err := b.tryPull(b.store, "w11", 1, src)
	requireWindowFull(t, err, visibility)
	require.Equal(t, int64(leasestore.MaxInFlight), b.get(t).InFlight)
	requireSourceSane(t, src)
}

func testWindowReclaimWhenFull(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	src := NewScriptedSource(bodies("r", leasestore.MaxInFlight+10)...)
	leases := fillWindow(t, b, src)
	b.clock.Advance(visibility)
	// Expired leases are still in flight, but redelivering them does not
	// grow the window, so reclaiming works while it is full. The pull
	// honours its limit: the first 10 events of the 100-event lease.
	got := b.pull(t, "reclaimer", 10, src)
	requireReclaimedPart(t, leases[0], got, 10, b.clock.Now().Add(visibility))
	require.Equal(t, int64(leasestore.MaxInFlight), b.get(t).InFlight)

	// A failed lease is redelivered while the window is full too.
	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, got, leasestore.StatusFailed).Outcome)
	requireReclaimed(t, got, b.pull(t, "second", 10, src), b.clock.Now().Add(visibility))
}
