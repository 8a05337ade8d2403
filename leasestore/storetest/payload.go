package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/leasestore"
)

var payloadCases = []conformanceCase{
	{"Payload/LargeEventsOnePerLease", testPayloadLarge},
	{"Payload/SmallThenLarge", testPayloadMixed},
	{"Payload/OversizedEventStillDelivered", testPayloadOversized},
}

// bigBodies returns n distinct bodies of size bytes each.
func bigBodies(tag string, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		head := fmt.Appendf(nil, "%s-%04d:", tag, i+1)
		out[i] = append(head, bytes.Repeat([]byte{'x'}, size-len(head))...)
	}
	return out
}

func testPayloadLarge(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	all := bigBodies("big", 4, 200_000)
	src := NewScriptedSource(all...)

	l := b.pull(t, "w0", 10, src)
	requireLease(t, l, 1, all[0])
	c := src.Counts()
	require.Equal(t, 1, c.Acked, "only the leased event is acked")
	require.Equal(t, 3, c.Nacked, "the events that did not fit go back to the source")
	require.Equal(t, 3, c.Available)
	require.Zero(t, c.Outstanding)

	for i := 1; i < len(all); i++ {
		requireLease(t, b.pull(t, "w"+workerName(i), 10, src), int64(i+1), all[i])
	}
	l, err := b.tryPull(b.store, "last", 10, src)
	require.NoError(t, err)
	require.Nil(t, l)
	require.Equal(t, 4, src.Counts().Acked)
	requireSourceSane(t, src)
}

func testPayloadMixed(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	small := bodies("small", 3)
	big := bigBodies("big", 2, 200_000)
	all := append(append([][]byte{}, small...), big...)
	src := NewScriptedSource(all...)
	requireLease(t, b.pull(t, "w1", 10, src), 1, all[:4]...)
	requireLease(t, b.pull(t, "w2", 10, src), 5, all[4])
	requireSourceSane(t, src)
}

func testPayloadOversized(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{opts: leasestore.Options{MaxPayloadBytes: 1000}})
	all := bigBodies("over", 3, 2000)
	src := NewScriptedSource(all...)
	for i := range all {
		// Never an empty lease, even for an event above the cap.
		requireLease(t, b.pull(t, workerName(i), 10, src), int64(i+1), all[i])
	}
	require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, b.pull(t, workerName(0), 1, src), leasestore.StatusOK).Outcome)
	requireSourceSane(t, src)
}
