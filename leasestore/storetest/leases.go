package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// The operator's listing of a consumer's leases (Store.Leases).
var leaseListCases = []conformanceCase{
	{"Leases/FollowALeaseThroughItsLife", testLeasesLife},
}

// testLeasesLife: held leases are listed in position order with their
// attempt and expiry; a lease failed with a delay is waiting and due at
// the delay's end, then due now once it passes; one failed without a
// delay is due at once; pulled again it is held at attempt 2; an unknown
// consumer is NotFound.
func testLeasesLife(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	list := func() []leasestore.LeaseView {
		t.Helper()
		out, err := b.store.Leases(b.ctx, b.consumer)
		require.NoError(t, err)
		return out
	}
	require.Empty(t, list())

	src := NewScriptedSource(bodies("l", 3)...)
	first := b.pull(t, "w1", 2, src)
	second := b.pull(t, "w2", 1, src)
	got := list()
	require.Len(t, got, 2)
	require.Equal(t, leasestore.LeaseView{First: first.Start, Count: 2, Attempt: 1, State: leasestore.LeaseHeld, Expires: first.ExpiresAt.UTC()}, got[0])
	require.Equal(t, leasestore.LeaseView{First: second.Start, Count: 1, Attempt: 1, State: leasestore.LeaseHeld, Expires: second.ExpiresAt.UTC()}, got[1])
	require.Less(t, got[0].First, got[1].First)

	require.Equal(t, leasestore.OutcomeRequeued, b.failAfter(t, first, 30*time.Second).Outcome)
	got = list()
	require.Equal(t, leasestore.LeaseWaiting, got[0].State)
	require.Equal(t, b.clock.Now().Add(30*time.Second).UTC().Truncate(time.Millisecond), got[0].Expires, "due when the delay ends")
	require.Equal(t, int64(1), got[0].Attempt, "not delivered again yet")
	b.clock.Advance(31 * time.Second)
	got = list()
	require.Equal(t, leasestore.LeaseWaiting, got[0].State)
	require.True(t, got[0].Expires.IsZero(), "due now")

	require.Equal(t, leasestore.OutcomeRequeued, b.ack(t, second, leasestore.StatusFailed).Outcome)
	got = list()
	require.Len(t, got, 2)
	require.Equal(t, leasestore.LeaseWaiting, got[1].State, "a failed lease waits, due at once")
	require.True(t, got[1].Expires.IsZero())

	again := b.pull(t, "w3", 10, src)
	require.Equal(t, int64(2), again.Attempt)
	for _, l := range list() {
		if l.First == again.Start {
			require.Equal(t, leasestore.LeaseHeld, l.State)
			require.Equal(t, int64(2), l.Attempt)
		}
	}

	_, err := b.store.Leases(b.ctx, "no-such-consumer")
	requireCode(t, herr.NotFound, err)
}
