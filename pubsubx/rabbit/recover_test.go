package rabbit_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/rabbit"
)

// eventually retries send until it succeeds, failing the test after a
// liveness bound (not a speed figure: the backoff is at most 5 s).
func eventually(t *testing.T, what string, send func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := send(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOneDialForManyCallers: callers waiting for a connection share the
// one dial in flight and return when their contexts end; none dials again.
func TestOneDialForManyCallers(t *testing.T) {
	t.Parallel()
	hole := blackhole.Start(t)
	b, err := rabbit.Open(rabbit.Options{ServerURL: "amqp://guest:guest@" + hole.Addr() + "/", Exchange: "herald-one-dial"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			errs <- b.Send(ctx, &pubsubx.Message{Body: []byte("x"), Metadata: map[string]string{pubsubx.AttrEventType: "t"}})
		}()
	}
	watch, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	require.NoError(t, hole.WaitFor(watch, func(accepted, _ int) bool { return accepted > 0 }))
	cancel()
	for range 20 {
		require.Error(t, <-errs)
	}
	// The dial is still waiting for the AMQP handshake (10 s): one
	// connection for twenty callers.
	require.Equal(t, 1, hole.Accepted(), "callers dialled again")
	require.NoError(t, b.Close())
	require.NoError(t, hole.WaitFor(watch, func(_, open int) bool { return open == 0 }), "Close aborts the dial in flight")
}

// TestRecoversWhenServerReturns: a broker opened while its server is
// black-holed works once the server answers, without being reopened, and
// reconnects by itself after its connection breaks.
func TestRecoversWhenServerReturns(t *testing.T) {
	t.Parallel()
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err)
	server, err := url.Parse(h.(*harness).server)
	require.NoError(t, err)
	hole := blackhole.Start(t)
	exchange := "herald-dt-" + randomHex(6)
	t.Cleanup(func() { deleteExchange(t, h.(*harness).server, exchange) })
	b, err := rabbit.Open(rabbit.Options{ServerURL: "amqp://guest:guest@" + hole.Addr() + "/", Exchange: exchange})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	send := func(ctx context.Context) error {
		return b.Send(ctx, &pubsubx.Message{Body: []byte("x"), Metadata: map[string]string{pubsubx.AttrEventType: "t"}})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	require.Error(t, send(ctx), "the server does not answer yet")
	require.Error(t, b.Ping(ctx), "Ping while the server does not answer")

	// The server comes back: the dial in flight fails, the next one after
	// a backoff reaches RabbitMQ.
	hole.Forward(server.Host)
	hole.Drop()
	eventually(t, "Send once the server answers", send)
	require.NoError(t, b.Ping(t.Context()))

	// The connection breaks: the broker dials again by itself.
	before := hole.Accepted()
	hole.Drop()
	eventually(t, "Send after the connection broke", send)
	require.Greater(t, hole.Accepted(), before, "a new connection was dialled")
}
