// Package blackhole is a test server that accepts TCP connections and never
// answers: what a client sees when a broker's host is up but its process is
// wedged, or a firewall drops replies. Dials succeed at once; every
// handshake and request then waits for bytes that never come, so only the
// client's own deadlines end it.
//
// Tests use it to check that broker calls honour their context, that a
// driver dials once rather than once per waiting caller (Accepted), and
// that nothing keeps a connection open after the caller gave up and closed
// the client (Open). Forward turns it into a proxy to a real server and
// Drop resets what is open, to check that a driver recovers.
package blackhole

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Listener is a running black hole on 127.0.0.1.
type Listener struct {
	ln net.Listener

	mu       sync.Mutex
	accepted int
	open     int
	conns    map[net.Conn]bool
	changed  chan struct{} // closed and replaced on every accept or close
	wg       sync.WaitGroup
	stopping bool
	target   string // when set, new connections are forwarded here
}

// Start listens on a free port of 127.0.0.1 and stops when the test ends.
func Start(t testing.TB) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("blackhole: listen: %v", err)
	}
	l := &Listener{ln: ln, conns: map[net.Conn]bool{}, changed: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.Close)
	return l
}

// Addr is the listener's address, "127.0.0.1:PORT".
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Port is the listener's port.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.stopping {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.accepted++
		l.open++
		l.conns[c] = true
		l.signalLocked()
		l.wg.Add(1)
		target := l.target
		l.mu.Unlock()
		if target != "" {
			go l.forward(c, target)
		} else {
			go l.swallow(c)
		}
	}
}

// Forward makes the listener a plain TCP proxy to target ("host:port")
// for connections accepted from now on: the server "comes back". Open
// connections stay black-holed until Drop.
func (l *Listener) Forward(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target = target
}

// Drop resets every open connection, as a broker restart or a network
// failure does.
func (l *Listener) Drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.SetDeadline(time.Now())
	}
}

// forward pipes c to target both ways until either side ends.
func (l *Listener) forward(c net.Conn, target string) {
	defer l.wg.Done()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err == nil {
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
		<-done
		_ = up.Close()
	}
	_ = c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.open--
	l.signalLocked()
	l.mu.Unlock()
}

// swallow reads and discards what the client sends, so its writes never
// block, until the client closes the connection.
func (l *Listener) swallow(c net.Conn) {
	defer l.wg.Done()
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	_ = c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.open--
	l.signalLocked()
	l.mu.Unlock()
}

func (l *Listener) signalLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Accepted is how many connections the black hole has accepted so far.
func (l *Listener) Accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// Open is how many accepted connections the client has not closed yet.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// WaitFor returns once cond (called with Accepted and Open) holds, or
// ctx's error when ctx ends first.
func (l *Listener) WaitFor(ctx context.Context, cond func(accepted, open int) bool) error {
	for {
		l.mu.Lock()
		ok, changed := cond(l.accepted, l.open), l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting and drops every open connection.
func (l *Listener) Close() {
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		return
	}
	l.stopping = true
	for c := range l.conns {
		// Reset rather than FIN, so a client still waiting sees an error.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.SetDeadline(time.Now())
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	l.wg.Wait()
}
