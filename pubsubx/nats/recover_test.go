package nats_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/drivertest"
	pnats "github.com/heraldevents/herald/pubsubx/nats"
)

// TestOneDialForManyCallers: callers waiting for a connection share the
// one dial in flight (which waits for the server's INFO, 5 s) and return
// when their contexts end; none dials again.
func TestOneDialForManyCallers(t *testing.T) {
	t.Parallel()
	drivertest.OneDialForManyCallers(t, func(addr string) (*pubsubx.Broker, error) {
		return pnats.Open(pnats.Options{ServerURL: "nats://" + addr, Stream: "HERALD_ONE_DIAL"})
	})
}

// TestRecoversWhenServerReturns: a broker opened while its server is
// black-holed works once the server answers, without being reopened, and
// reconnects by itself (nats.go does) after its connection breaks.
func TestRecoversWhenServerReturns(t *testing.T) {
	t.Parallel()
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err)
	server := h.(*harness).server
	stream := "HERALD_DT_" + drivertest.RandomHex(6)
	t.Cleanup(func() { deleteStream(t, server, stream) })
	drivertest.RecoversWhenServerReturns(t, server, func(addr string) (*pubsubx.Broker, error) {
		return pnats.Open(pnats.Options{ServerURL: "nats://" + addr, Stream: stream})
	})
}
