package rabbit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/drivertest"
	"github.com/heraldevents/herald/pubsubx/rabbit"
)

// TestOneDialForManyCallers: callers waiting for a connection share the
// one dial in flight (which waits for the AMQP handshake, 10 s) and
// return when their contexts end; none dials again.
func TestOneDialForManyCallers(t *testing.T) {
	t.Parallel()
	drivertest.OneDialForManyCallers(t, func(addr string) (*pubsubx.Broker, error) {
		return rabbit.Open(rabbit.Options{ServerURL: "amqp://guest:guest@" + addr + "/", Exchange: "herald-one-dial"})
	})
}

// TestRecoversWhenServerReturns: a broker opened while its server is
// black-holed works once the server answers, without being reopened, and
// dials again by itself after its connection breaks.
func TestRecoversWhenServerReturns(t *testing.T) {
	t.Parallel()
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err)
	server := h.(*harness).server
	exchange := "herald-dt-" + drivertest.RandomHex(6)
	t.Cleanup(func() { deleteExchange(t, server, exchange) })
	drivertest.RecoversWhenServerReturns(t, server, func(addr string) (*pubsubx.Broker, error) {
		return rabbit.Open(rabbit.Options{ServerURL: "amqp://guest:guest@" + addr + "/", Exchange: exchange})
	})
}
