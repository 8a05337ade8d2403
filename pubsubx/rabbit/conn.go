package rabbit

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldevents/herald/herr"
)

// Connection management (package doc, "Connections"). One goroutine per
// connection dials; callers never do. conn.mu guards only memory and is
// never held across network I/O.
const (
	// dialTimeout bounds one dial: TCP connect, the AMQP handshake and
	// declaring the deployment exchange.
	dialTimeout = 10 * time.Second
	// minBackoff and maxBackoff bound the wait between two failed dials;
	// it doubles from minBackoff after each failure (with jitter).
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// closeTimeout bounds closing a connection whose server may not
	// answer the close handshake.
	closeTimeout = 2 * time.Second
)

// readBuffer is the read buffer under amqp091's own 4 KiB one: a burst of
// deliveries (about 1.3 KiB each for a typical event) then costs one read
// system call per 64 KiB instead of one per 4 KiB.
const readBuffer = 64 << 10

// bufferedConn is a connection whose reads go through a larger buffer and,
// on the publishing connection, whose writes are coalesced.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
	w *coalescer // nil: writes go straight to the socket
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufferedConn) Write(p []byte) (int, error) {
	if c.w == nil {
		return c.Conn.Write(p)
	}
	return c.w.write(p)
}

func (c *bufferedConn) Close() error {
	if c.w != nil {
		c.w.close()
	}
	return c.Conn.Close()
}

// maxCoalesced bounds the bytes a coalescer holds unwritten; a writer
// past it waits for the socket, so a server that stops reading blocks
// publishers as it would without the coalescer.
const maxCoalesced = 1 << 20

// coalescer gathers the writes made while the socket is busy into one. amqp091
// flushes after every published message, one write system call each, and
// RabbitMQ then reads each message as a segment of its own; a batch of
// pipelined publishes (SendBatch) instead leaves in a few writes. A write
// returns once its bytes are queued, in order: the first one that reaches
// the socket is written at once (no delay is added), the ones made
// meanwhile go with the next. A failed socket write closes the socket, so
// amqp091's reader sees the connection end, and fails every later write.
type coalescer struct {
	nc   net.Conn
	mu   sync.Mutex
	cond *sync.Cond // signalled when buf is taken or err is set
	buf  []byte
	busy bool // the flush goroutine runs
	err  error
}

func newCoalescer(nc net.Conn) *coalescer {
	w := &coalescer{nc: nc}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *coalescer) write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && len(w.buf) >= maxCoalesced {
		w.cond.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if !w.busy {
		w.busy = true
		go w.flush()
	}
	return len(p), nil
}

// flush writes what is queued until nothing is.
func (w *coalescer) flush() {
	var out []byte
	w.mu.Lock()
	for len(w.buf) > 0 && w.err == nil {
		out, w.buf = w.buf, out[:0]
		w.cond.Broadcast()
		w.mu.Unlock()
		_, err := w.nc.Write(out)
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.cond.Broadcast()
			_ = w.nc.Close()
		}
	}
	w.busy = false
	w.mu.Unlock()
}

func (w *coalescer) close() {
	w.mu.Lock()
	if w.err == nil {
		w.err = net.ErrClosed
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}

// conn is one AMQP connection, dialled in the background on first use and
// again, with backoff, whenever it breaks, with a pool of idle channels.
type conn struct {
	b    *broker
	url  string
	role string // "publish" or "receive": the connection name's suffix

	mu      sync.Mutex
	c       *amqp.Connection
	idle    []*amqp.Channel
	pubCh   *amqp.Channel // the confirm-mode publishing channel (pub only)
	opening chan struct{} // non-nil while pubCh is being opened; closed when done

	dialing    bool          // the reconnect loop runs
	attempt    chan struct{} // closed when the loop's current dial ends
	backingOff bool          // the last dial failed; the loop waits to retry
	lastErr    error         // why the last dial failed
}

func newConn(b *broker, url, role string) *conn {
	return &conn{b: b, url: url, role: role, attempt: make(chan struct{})}
}

// connection returns the live connection. When there is none it starts the
// reconnect loop (if it is not running) and waits for the dial in flight,
// until ctx ends; while the loop backs off after a failed dial it answers
// at once with herr.Unavailable and that failure. A caller thus waits for
// at most one dial, and never dials itself.
func (c *conn) connection(ctx context.Context) (*amqp.Connection, error) {
	for {
		if c.b.isClosed() {
			return nil, errClosed
		}
		c.mu.Lock()
		if c.c != nil && !c.c.IsClosed() {
			ac := c.c
			c.mu.Unlock()
			return ac, nil
		}
		c.dropLocked()
		c.startLocked()
		if c.backingOff {
			err := c.lastErr
			c.mu.Unlock()
			return nil, herr.Wrap(herr.CodeOf(err), err, "RabbitMQ is unreachable (reconnecting in the background)")
		}
		wait := c.attempt
		c.mu.Unlock()
		select {
		case <-wait: // connected, or backing off: look again
		case <-ctx.Done():
			return nil, wrap(ctx.Err(), "RabbitMQ did not answer before the deadline (connecting in the background)")
		case <-c.b.ctx.Done():
			return nil, errClosed
		}
	}
}

// dropLocked forgets a broken connection and its channels.
func (c *conn) dropLocked() {
	c.c, c.idle, c.pubCh = nil, nil, nil
}

// startLocked starts the reconnect loop unless it runs or the broker is
// closed.
func (c *conn) startLocked() {
	if c.dialing || c.b.ctx.Err() != nil {
		return
	}
	c.dialing, c.backingOff = true, false
	go c.reconnect()
}

// reconnect dials until it succeeds or the broker closes, waiting between
// failures with exponential backoff and jitter. Each dial's end wakes the
// callers waiting for it.
func (c *conn) reconnect() {
	backoff := minBackoff
	for {
		ac, ch, err := c.dial()
		c.mu.Lock()
		done := c.attempt
		c.attempt = make(chan struct{})
		if err == nil && c.b.ctx.Err() != nil {
			err = errClosed // Close ran while we dialled
		}
		if err == nil {
			c.c, c.idle, c.pubCh = ac, []*amqp.Channel{ch}, nil
			c.dialing, c.backingOff, c.lastErr = false, false, nil
			c.mu.Unlock()
			close(done)
			go c.watch(ac)
			return
		}
		if ac != nil {
			go func() { _ = ac.CloseDeadline(time.Now().Add(closeTimeout)) }()
		}
		c.backingOff, c.lastErr = true, err
		c.mu.Unlock()
		close(done)

		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-t.C:
		case <-c.b.ctx.Done():
			t.Stop()
			c.mu.Lock()
			c.dialing = false
			c.mu.Unlock()
			close(c.attemptNow())
			return
		}
		c.mu.Lock()
		c.backingOff = false
		c.mu.Unlock()
		backoff = min(2*backoff, maxBackoff)
	}
}

// attemptNow swaps in a fresh attempt channel and returns the old one, so
// that closing it wakes whoever waits (used once the loop stops).
func (c *conn) attemptNow() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := c.attempt
	c.attempt = make(chan struct{})
	return done
}

// watch starts the reconnect loop as soon as ac breaks, so the next caller
// finds a connection or a dial already in flight.
func (c *conn) watch(ac *amqp.Connection) {
	<-ac.NotifyClose(make(chan *amqp.Error, 1))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == ac {
		c.dropLocked()
		c.startLocked()
	}
}

// dial connects, completes the handshake and declares the deployment
// exchange (so a deleted exchange comes back on reconnect), all within
// dialTimeout, and aborts as soon as the broker closes.
func (c *conn) dial() (*amqp.Connection, *amqp.Channel, error) {
	ctx, cancel := context.WithTimeout(c.b.ctx, dialTimeout)
	defer cancel()
	var stops []func() bool
	var mu sync.Mutex
	var d net.Dialer
	ac, err := amqp.DialConfig(c.url, amqp.Config{
		Dial: func(network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake has no context: a deadline bounds it (amqp091
			// clears it once the connection is open), and the broker's
			// Close or the dial timeout closes the socket under it.
			if dl, ok := ctx.Deadline(); ok {
				_ = nc.SetDeadline(dl)
			}
			mu.Lock()
			stops = append(stops, context.AfterFunc(ctx, func() { _ = nc.Close() }))
			mu.Unlock()
			bc := &bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, readBuffer)}
			if c.role == "publish" {
				bc.w = newCoalescer(nc)
			}
			return bc, nil
		},
		Properties: amqp.Table{"connection_name": "herald pubsubx/rabbit " + c.b.exchange + " " + c.role},
	})
	if err != nil {
		return nil, nil, wrap(err, "cannot connect to RabbitMQ")
	}
	ch, err := ac.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(c.b.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	// From here the connection's heartbeats watch it; the socket must
	// outlive this dial's context.
	mu.Lock()
	aborted := false
	for _, stop := range stops {
		aborted = !stop() || aborted
	}
	mu.Unlock()
	if err == nil && aborted {
		err = ctx.Err()
	}
	if err != nil {
		return ac, nil, wrap(err, "cannot declare the deployment exchange")
	}
	return ac, ch, nil
}

// bounded runs fn and returns its result, or ctx's error as soon as ctx
// ends (amqp091's calls take no context). fn then finishes in the
// background, bounded by the connection's heartbeats, and abandon, when
// not nil, receives what it returned so nothing leaks.
func bounded[T any](ctx context.Context, fn func() (T, error), abandon func(T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		go func() {
			r := <-done
			if abandon != nil {
				abandon(r.v, r.err)
			}
		}()
		var zero T
		return zero, wrap(ctx.Err(), "RabbitMQ did not answer before the deadline")
	}
}

// channel returns an open channel: an idle one, or a new one.
func (c *conn) channel(ctx context.Context) (*amqp.Channel, error) {
	ac, err := c.connection(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	for len(c.idle) > 0 {
		ch := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		if !ch.IsClosed() {
			c.mu.Unlock()
			return ch, nil
		}
	}
	c.mu.Unlock()
	ch, err := bounded(ctx, ac.Channel, func(ch *amqp.Channel, err error) {
		if err == nil {
			c.release(ch)
		}
	})
	if err != nil {
		return nil, wrap(err, "cannot open a RabbitMQ channel")
	}
	return ch, nil
}

// release returns ch to the pool, or closes it when the pool is full or
// the channel belongs to a connection that was replaced.
func (c *conn) release(ch *amqp.Channel) {
	if ch.IsClosed() {
		return
	}
	c.mu.Lock()
	if c.c != nil && !c.c.IsClosed() && len(c.idle) < maxPooledChannels && !c.b.isClosed() {
		c.idle = append(c.idle, ch)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	_ = ch.Close()
}

// do runs fn on a pooled channel, until ctx ends. A channel exception
// closes the channel, so it is dropped then; otherwise it goes back to
// the pool (once fn returns, if ctx ended first).
func (c *conn) do(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	ch, err := c.channel(ctx)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, func() (struct{}, error) {
		err := fn(ch)
		c.release(ch)
		return struct{}{}, err
	}, nil)
	return err
}

// close closes the connection, bounding the close handshake.
func (c *conn) close() error {
	c.mu.Lock()
	ac := c.c
	c.dropLocked()
	c.mu.Unlock()
	if ac == nil || ac.IsClosed() {
		return nil
	}
	return ac.CloseDeadline(time.Now().Add(closeTimeout))
}

// publisher returns the confirm-mode channel, opening it when needed. One
// caller opens it, outside the lock; the others wait for that, until
// their ctx ends.
func (c *conn) publisher(ctx context.Context) (*amqp.Channel, error) {
	for {
		ac, err := c.connection(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.pubCh != nil && !c.pubCh.IsClosed() {
			ch := c.pubCh
			c.mu.Unlock()
			return ch, nil
		}
		if wait := c.opening; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, wrap(ctx.Err(), "RabbitMQ did not open the publishing channel before the deadline")
			}
		}
		opening := make(chan struct{})
		c.opening = opening
		c.mu.Unlock()
		ch, err := bounded(ctx, func() (*amqp.Channel, error) {
			ch, err := c.openPublisher(ac)
			c.mu.Lock()
			if err == nil && c.c == ac {
				c.pubCh = ch
			} else if err == nil {
				// The connection was replaced meanwhile.
				go func() { _ = ch.Close() }()
			}
			c.opening = nil
			c.mu.Unlock()
			close(opening)
			return ch, err
		}, nil)
		if err != nil {
			return nil, err
		}
		return ch, nil
	}
}

// openPublisher opens a confirm-mode channel on ac and declares the
// deployment exchange on it: the last publishing channel may have died
// because the exchange was deleted (a 404 on publish closes the channel).
func (c *conn) openPublisher(ac *amqp.Connection) (*amqp.Channel, error) {
	ch, err := ac.Channel()
	if err != nil {
		return nil, wrap(err, "cannot open a RabbitMQ channel")
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, wrap(err, "cannot enable publisher confirms")
	}
	if err := ch.ExchangeDeclare(c.b.exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		_ = ch.Close()
		return nil, wrap(err, "cannot declare the deployment exchange")
	}
	return ch, nil
}
