package nats

import (
	"context"
	"math/rand/v2"
	"net"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldevents/herald/herr"
)

// Connecting (package doc, "Connections"). One goroutine connects; callers
// never do, and b.mu is never held across network I/O.
const (
	// minBackoff and maxBackoff bound the wait between two failed
	// connects; it doubles from minBackoff after each failure (with
	// jitter).
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// pingInterval and maxPingsOut make nats.go notice a server that
	// stopped answering after about 30 s and reconnect (its defaults,
	// 2 min and 2, take 4-6 min).
	pingInterval = 10 * time.Second
	maxPingsOut  = 2
)

// client returns the connection. When there is none it starts the connect
// loop (if it is not running) and waits for the attempt in flight, until
// ctx ends; while the loop backs off after a failed attempt it answers at
// once with herr.Unavailable and that failure. Once connected, nats.go
// reconnects by itself, and calls fail at once while it does.
func (b *broker) client(ctx context.Context) (*natsgo.Conn, jetstream.JetStream, error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, nil, errClosed
		}
		if b.nc != nil && !b.nc.IsClosed() {
			nc, js := b.nc, b.js
			b.mu.Unlock()
			return nc, js, nil
		}
		b.nc, b.js = nil, nil
		if !b.dialing {
			b.dialing, b.backingOff = true, false
			go b.connectLoop()
		}
		if b.backingOff {
			err := b.lastErr
			b.mu.Unlock()
			return nil, nil, herr.Wrap(herr.CodeOf(err), err, "NATS is unreachable (reconnecting in the background)")
		}
		wait := b.attempt
		b.mu.Unlock()
		select {
		case <-wait: // connected, or backing off: look again
		case <-ctx.Done():
			return nil, nil, wrap(ctx.Err(), "NATS did not answer before the deadline (connecting in the background)")
		case <-b.done:
			return nil, nil, errClosed
		}
	}
}

// connectLoop connects until it succeeds or the broker closes, waiting
// between failures with exponential backoff and jitter. The end of each
// attempt wakes the callers waiting for it.
func (b *broker) connectLoop() {
	backoff := minBackoff
	for {
		nc, js, err := b.connect()
		b.mu.Lock()
		done := b.attempt
		b.attempt = make(chan struct{})
		if err == nil && b.closed {
			nc.Close() // Close ran while we connected
			err = errClosed
		}
		if err == nil {
			b.nc, b.js, b.multi = nc, js, versionAtLeast(nc.ConnectedServerVersion(), 2, 10)
			b.dialing, b.backingOff, b.lastErr = false, false, nil
			b.mu.Unlock()
			close(done)
			return
		}
		b.backingOff, b.lastErr = true, err
		b.mu.Unlock()
		close(done)

		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-t.C:
		case <-b.done:
			t.Stop()
			b.mu.Lock()
			b.dialing = false
			b.mu.Unlock()
			return
		}
		b.mu.Lock()
		b.backingOff = false
		b.mu.Unlock()
		backoff = min(2*backoff, maxBackoff)
	}
}

// connect dials (within connectTimeout, the INFO/CONNECT handshake
// included) and makes sure the stream exists (within apiTimeout). Close
// aborts it.
func (b *broker) connect() (*natsgo.Conn, jetstream.JetStream, error) {
	nc, err := natsgo.Connect(b.opts.ServerURL,
		natsgo.Name("herald pubsubx/nats "+b.opts.Stream),
		natsgo.Timeout(connectTimeout),
		natsgo.SetCustomDialer(&dialer{ctx: b.ctx}),
		// Fail at once while reconnecting rather than buffer: a buffered
		// publish is not a stored message.
		natsgo.ReconnectBufSize(-1),
		natsgo.MaxReconnects(-1),
		natsgo.PingInterval(pingInterval),
		natsgo.MaxPingsOutstanding(maxPingsOut),
	)
	if err != nil {
		if b.ctx.Err() != nil {
			return nil, nil, errClosed
		}
		return nil, nil, wrap(err, "cannot connect to NATS")
	}
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(b.ctx, apiTimeout)
		err = b.ensureStream(ctx, js)
		cancel()
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// dialer is nats.go's dialer with a context: the broker's, so Close ends a
// connect in flight, and every socket it made.
type dialer struct{ ctx context.Context }

// Dial implements natsgo.CustomDialer. nats.go bounds the handshake after
// it with natsgo.Timeout.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(d.ctx, connectTimeout)
	defer cancel()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(d.ctx, func() { _ = c.Close() })
	return c, nil
}

// Ping implements driver.Broker: a PING/PONG round trip on the live
// connection. It never dials: with no connection it waits for the
// background attempt in flight (or answers the last failure at once while
// that loop backs off), until ctx ends; while nats.go reconnects it fails
// at once. Errors are herr.Unavailable (or DeadlineExceeded, Canceled
// from ctx).
func (b *broker) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return wrap(err, "ping")
	}
	nc, _, err := b.client(ctx)
	if err != nil {
		return err
	}
	if s := nc.Status(); s != natsgo.CONNECTED {
		return herr.New(herr.Unavailable, "NATS connection is %s", s)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return wrap(nc.FlushWithContext(ctx), "NATS did not answer a ping")
}
