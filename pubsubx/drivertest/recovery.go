package drivertest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/pubsubx"
)

// The checks in this file are for drivers that keep one connection to a
// server and dial it lazily (NATS, RabbitMQ). A driver's test calls each
// from a test of its own, with open making a broker whose server address
// is addr ("127.0.0.1:PORT").

// eventually retries send until it succeeds, failing the test after a
// liveness bound (not a speed figure: the drivers' backoff is at most 5 s).
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

// OneDialForManyCallers checks that callers waiting for a connection
// share the one dial in flight and return when their contexts end; none
// dials again, and Close aborts the dial in flight. The server is
// black-holed, so the dial waits for the server's greeting (NATS: INFO,
// 5 s; RabbitMQ: the AMQP handshake, 10 s) for longer than the check.
func OneDialForManyCallers(t *testing.T, open func(addr string) (*pubsubx.Broker, error)) {
	t.Helper()
	hole := blackhole.Start(t)
	b, err := open(hole.Addr())
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
	// The dial is still waiting for the server's greeting: one connection
	// for twenty callers.
	require.Equal(t, 1, hole.Accepted(), "callers dialled again")
	require.NoError(t, b.Close())
	require.NoError(t, hole.WaitFor(watch, func(_, open int) bool { return open == 0 }), "Close aborts the dial in flight")
}

// RecoversWhenServerReturns checks that a broker opened while its server
// is black-holed works once the server answers, without being reopened,
// and reconnects by itself after its connection breaks. server is the real
// server's URL (only its host:port is used).
func RecoversWhenServerReturns(t *testing.T, server string, open func(addr string) (*pubsubx.Broker, error)) {
	t.Helper()
	su, err := url.Parse(server)
	require.NoError(t, err)
	hole := blackhole.Start(t)
	b, err := open(hole.Addr())
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
	// a backoff reaches the server.
	hole.Forward(su.Host)
	hole.Drop()
	eventually(t, "Send once the server answers", send)
	require.NoError(t, b.Ping(t.Context()))

	// The connection breaks: the broker dials again by itself.
	before := hole.Accepted()
	hole.Drop()
	eventually(t, "Send after the connection broke", send)
	require.Greater(t, hole.Accepted(), before, "a new connection was dialled")
}

// FuzzOpenURL checks that any URL opens a broker or is refused with an
// error, never a panic; that opening does not dial; and that an opened
// broker closes. seeds are the driver's example URLs.
func FuzzOpenURL(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		b, err := pubsubx.Open(context.Background(), raw)
		if err != nil {
			return
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
