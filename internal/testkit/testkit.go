// Package testkit holds the small helpers Herald's tests share, so that
// each is written once: a clock the test moves by hand, a buffer safe
// for concurrent writers (a logger's output read by the test) and a server
// served on a loopback listener until the test stops it. Free ports
// come from internal/emulators.FreePort. Do calls a JSON handler as a
// client with a bearer token would. Only tests import it.
package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Clock is a clock the test moves by hand; its Now is what a
// Config.Now-style field takes. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers:
// give it to a slog handler and read it in the test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Take returns everything written so far and empties the buffer, in
// one step, so that a test reads each write once.
func (s *SyncBuffer) Take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}

// Serve runs serve (a server's Serve method) in a goroutine on a new
// listener on a free 127.0.0.1 port, as a command's main would, and
// returns the listener's address ("127.0.0.1:PORT"), stop, which cancels
// serve's context (a shutdown; it also runs when t ends), and a channel
// that receives serve's result.
func Serve(t testing.TB, serve func(context.Context, net.Listener) error) (addr string, stop context.CancelFunc, served <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: listen: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	return ln.Addr().String(), stop, done
}

// Answer is one JSON response of a handler: its status, its
// WWW-Authenticate header ("" when none) and its body decoded into a map.
type Answer struct {
	Code      int
	Challenge string
	Body      map[string]any
}

// Do serves one request on h, with body and, unless token is "", the
// header "Authorization: Bearer token", and returns the answer. An answer
// that is not application/json, or not a JSON object, fails t.
func Do(t testing.TB, h http.Handler, method, target, token, body string) Answer {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("testkit: %s %s answered %d with Content-Type %q: %.200s", method, target, rec.Code, ct, rec.Body.String())
	}
	a := Answer{Code: rec.Code, Challenge: rec.Header().Get("WWW-Authenticate")}
	if err := json.Unmarshal(rec.Body.Bytes(), &a.Body); err != nil {
		t.Fatalf("testkit: %s %s: the answer is not a JSON object: %v: %.200s", method, target, err, rec.Body.String())
	}
	return a
}
