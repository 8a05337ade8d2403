// Package conntrack keeps the network connections a client library dials,
// so that closing the client closes every one of them: idle, in use, or
// still being dialed when Close was called.
//
// An http.Transport only closes idle connections on CloseIdleConnections;
// a request in flight keeps its connection until its context ends, and a
// dial that finishes after its request was canceled parks the new
// connection in the idle pool for IdleConnTimeout (90 s by default). A
// driver's Close must not leave those behind, so it dials through a
// Tracker and closes the Tracker.
package conntrack

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrClosed is returned by Dial once the Tracker is closed.
var ErrClosed = errors.New("conntrack: closed")

// DialFunc is the shape of net.Dialer.DialContext and
// http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Tracker records the connections dialed through it. The zero value is not
// usable; call New. It is safe for concurrent use.
type Tracker struct {
	dial DialFunc

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
}

// New returns a Tracker that dials with dial (a net.Dialer's DialContext
// when nil).
func New(dial DialFunc) *Tracker {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return &Tracker{dial: dial, conns: map[*conn]struct{}{}}
}

// Dial dials with the Tracker's dial function and records the connection
// until it is closed. After Close it returns ErrClosed without dialing; a
// dial that completes after Close is closed at once and ErrClosed returned.
func (t *Tracker) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	c, err := t.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &conn{Conn: c, t: t}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = c.Close()
		return nil, ErrClosed
	}
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// Open reports how many recorded connections are not closed yet.
func (t *Tracker) Open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// Close closes every recorded connection and makes later dials fail with
// ErrClosed. Requests using those connections fail with a network error.
// It is idempotent and returns nil.
func (t *Tracker) Close() error {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = map[*conn]struct{}{}
	t.mu.Unlock()
	// Closing a socket does no network round trip, but it is done outside
	// the lock all the same: a conn's own Close takes it.
	for c := range conns {
		_ = c.Conn.Close()
	}
	return nil
}

// conn forgets itself in its Tracker when closed.
type conn struct {
	net.Conn
	t    *Tracker
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}
