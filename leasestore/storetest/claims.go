package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var claimCases = []conformanceCase{
	{"Claim/PutGetReplace", testClaimPutGet},
	{"Claim/Limits", testClaimLimits},
	{"Claim/ReapByAge", testClaimReap},
	{"Claim/OtherKindsUndisturbed", testClaimOtherKinds},
}

func (b *bundle) putClaim(t testing.TB, id string, body []byte) {
	t.Helper()
	require.NoError(t, b.store.PutClaim(b.ctx, id, body), "PutClaim(%q)", id)
}

func (b *bundle) getClaim(t testing.TB, id string) []byte {
	t.Helper()
	body, err := b.store.GetClaim(b.ctx, id)
	require.NoError(t, err, "GetClaim(%q)", id)
	return body
}

func (b *bundle) reapClaims(t testing.TB, olderThan time.Duration) int {
	t.Helper()
	n, err := b.store.ReapClaims(b.ctx, olderThan)
	require.NoError(t, err)
	return n
}

// testClaimPutGet checks that a claim reads back byte for byte, that a put
// replaces, that ids that a naive key would confuse stay apart, and that an
// unknown id is NotFound.
func testClaimPutGet(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := uuid.NewString()
	body := []byte(`{"specversion":"1.0","data":{"s":"é\u0000<>"}}`)
	b.putClaim(t, id, body)
	require.Equal(t, body, b.getClaim(t, id))

	b.putClaim(t, id, []byte("second"))
	require.Equal(t, "second", string(b.getClaim(t, id)), "a put replaces")
	require.Equal(t, 1, countRecords(t, b, "k:"), "one record per id")

	_, err := b.store.GetClaim(b.ctx, uuid.NewString())
	requireCode(t, herr.NotFound, err)

	a, c := "x/y", "x_y"
	b.putClaim(t, a, []byte("a"))
	b.putClaim(t, c, []byte("c"))
	require.Equal(t, "a", string(b.getClaim(t, a)))
	require.Equal(t, "c", string(b.getClaim(t, c)))
}

// testClaimLimits checks the id and body bounds, and that the largest body
// (MaxClaimBytes, far more than a 256 KiB message's encoding) is stored:
// it fits a DynamoDB item.
func testClaimLimits(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	requireCode(t, herr.InvalidArgument, b.store.PutClaim(b.ctx, "", []byte("x")))
	requireCode(t, herr.InvalidArgument, b.store.PutClaim(b.ctx, strings.Repeat("i", leasestore.MaxClaimIDLength+1), []byte("x")))
	requireCode(t, herr.InvalidArgument, b.store.PutClaim(b.ctx, "empty", nil))
	requireCode(t, herr.InvalidArgument, b.store.PutClaim(b.ctx, "big", make([]byte, leasestore.MaxClaimBytes+1)))
	_, err := b.store.GetClaim(b.ctx, "")
	requireCode(t, herr.InvalidArgument, err)
	require.Zero(t, countRecords(t, b, "k:"), "a refused put stores nothing")

	id := strings.Repeat("i", leasestore.MaxClaimIDLength)
	big := bytes.Repeat([]byte("0123456789abcdef"), leasestore.MaxClaimBytes/16)
	big = append(big, bytes.Repeat([]byte("z"), leasestore.MaxClaimBytes-len(big))...)
	require.Len(t, big, leasestore.MaxClaimBytes)
	b.putClaim(t, id, big)
	require.Equal(t, big, b.getClaim(t, id))
}

// testClaimReap checks that ReapClaims deletes exactly the claims older
// than its argument and counts them.
func testClaimReap(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const retention = 2 * time.Hour
	requireCode(t, herr.InvalidArgument, func() error { _, err := b.store.ReapClaims(b.ctx, 0); return err }())
	old := uuid.NewString()
	b.putClaim(t, old, []byte("old"))
	b.clock.Advance(time.Hour)
	fresh := uuid.NewString()
	b.putClaim(t, fresh, []byte("fresh"))

	require.Zero(t, b.reapClaims(t, retention))
	b.clock.Advance(time.Hour) // old is exactly retention old: not older
	require.Zero(t, b.reapClaims(t, retention))
	b.clock.Advance(time.Millisecond)
	require.Equal(t, 1, b.reapClaims(t, retention))
	_, err := b.store.GetClaim(b.ctx, old)
	requireCode(t, herr.NotFound, err)
	require.Equal(t, "fresh", string(b.getClaim(t, fresh)))

	b.clock.Advance(time.Hour)
	require.Equal(t, 1, b.reapClaims(t, retention))
	require.Zero(t, b.reapClaims(t, retention))
	require.Zero(t, countRecords(t, b, "k:"), "every claim record is gone")
}

// testClaimOtherKinds checks that claim records and the other record kinds
// do not see each other: listing consumers and dead letters, the
// idle-queue reaper and the connection reaper leave claims alone, and the
// claim reaper touches nothing else.
func testClaimOtherKinds(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{DeliveryLimit: 1}})
	q := b.newQueue(t, leasestore.TypeDurableQueue, nil)
	src := NewScriptedSource(bodies("k", 2)...)
	b.attach(t, q, "s")
	b.settle(t, q, nil, refs(b.pullEvents(t, q, "s", 1, src)...))
	require.Len(t, b.pullEvents(t, q, "s", 1, src), 1) // dead-letters k-0001
	require.Len(t, b.deadLettersOf(t, q), 1)
	conn := connID()
	b.createConn(t, conn, "c")
	ids := []string{uuid.NewString(), uuid.NewString()}
	for _, id := range ids {
		b.putClaim(t, id, []byte(`{"id":"`+id+`"}`))
	}

	list, err := b.store.ListConsumers(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "the bundle's consumer and q, no claims")
	dls, next, err := b.store.ListDeadLetters(b.ctx, 10, "")
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, dls, 1, "no claim among the dead letters")

	// Everything is old: the connection and idle-queue reapers take only
	// their own kinds.
	b.clock.Advance(3 * reapIdle)
	conns := b.reapConns(t, time.Hour)
	require.Len(t, conns, 1)
	require.Equal(t, conn, conns[0].ID)
	require.Equal(t, []string{q}, b.reap(t))
	for _, id := range ids {
		require.Equal(t, `{"id":"`+id+`"}`, string(b.getClaim(t, id)), "the other reapers left the claims")
	}

	// The claim reaper takes only claims.
	b.createConn(t, conn, "again")
	require.Equal(t, 2, b.reapClaims(t, time.Millisecond))
	require.Equal(t, "again", string(b.getConn(t, b.store, conn).Data))
	_, err = b.store.GetConsumer(b.ctx, b.consumer)
	require.NoError(t, err)
	dls, _, err = b.store.ListDeadLetters(b.ctx, 10, "")
	require.NoError(t, err)
	require.Len(t, dls, 1, "the claim reaper left the dead letters")
}
