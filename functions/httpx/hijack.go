package httpx

import (
	"context"
	"sync"
)

// Hijacked tracks the connections that handlers took over from an
// http.Server (WebSockets, package functions/wsbridge), which
// http.Server.Shutdown neither closes nor waits for. The server installs
// one in its base context (WithHijacked; app.Serve does); a handler that
// hijacks registers with Track, watches GoingAway to close its connection
// with 1001 (going away), and calls the done func when it has. Shutdown
// then tells every tracked connection to go away and waits for them, so a
// process closes its broker and store only after their sessions have
// detached.
type Hijacked struct {
	mu      sync.Mutex
	closing bool
	away    chan struct{}
	wg      sync.WaitGroup
}

// NewHijacked returns an empty tracker.
func NewHijacked() *Hijacked { return &Hijacked{away: make(chan struct{})} }

type hijackedKey struct{}

// WithHijacked returns ctx carrying h, for http.Server.BaseContext.
func WithHijacked(ctx context.Context, h *Hijacked) context.Context {
	return context.WithValue(ctx, hijackedKey{}, h)
}

// HijackedFrom returns the tracker of the server that serves ctx's
// request, or nil when the server installed none (the handler then sees
// no shutdown; its connections end when their clients or the process go).
func HijackedFrom(ctx context.Context) *Hijacked {
	h, _ := ctx.Value(hijackedKey{}).(*Hijacked)
	return h
}

// Track registers one hijacked connection. goingAway is closed when the
// server shuts down; done must be called once the connection is closed.
// ok is false when the server is already shutting down: the handler
// should then refuse the connection (503) instead of hijacking it.
func (h *Hijacked) Track() (goingAway <-chan struct{}, done func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, nil, false
	}
	h.wg.Add(1)
	return h.away, sync.OnceFunc(h.wg.Done), true
}

// Shutdown closes every tracked connection's goingAway and waits until
// each has called done, or until ctx ends (its error). It is idempotent.
func (h *Hijacked) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	if !h.closing {
		h.closing = true
		close(h.away)
	}
	h.mu.Unlock()
	waited := make(chan struct{})
	go func() { h.wg.Wait(); close(waited) }()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
