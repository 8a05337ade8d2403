package grpcapi

import (
	"context"
	"net/http"
	"sync"

	"github.com/heraldevents/herald/internal/netcork"
)

// heldFlushes lets a stream hold back the flushes connect makes after
// every message it sends (one write to the socket per event) while it
// sends a batch, and flush once at the end. A stream delivers events in
// the batches the lease store hands out (up to 100), so a backlog costs
// one socket write per batch instead of one per event; HTTP/2 still sends
// a frame whenever its buffer fills.
//
// holdFlushes installs it around a handler; holdFrom finds it in the
// request's context (nil when the handler is not wrapped, and all its
// methods are then no-ops).
type heldFlushes struct {
	http.ResponseWriter
	ctx     context.Context // the request's: its connection, to cork
	mu      sync.Mutex
	held    bool
	pending bool
	uncork  func()
}

type heldKey struct{}

// holdFlushes wraps h so that its streams can hold flushes (heldFlushes).
func holdFlushes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			h.ServeHTTP(w, r)
			return
		}
		hw := &heldFlushes{ResponseWriter: w, ctx: r.Context()}
		h.ServeHTTP(hw, r.WithContext(context.WithValue(r.Context(), heldKey{}, hw)))
	})
}

func holdFrom(ctx context.Context) *heldFlushes {
	hw, _ := ctx.Value(heldKey{}).(*heldFlushes)
	return hw
}

// Flush implements http.Flusher: it flushes now unless flushes are held,
// and then at Release.
func (w *heldFlushes) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held {
		w.pending = true
		return
	}
	w.ResponseWriter.(http.Flusher).Flush()
}

// Hold holds back flushes until Release, and corks the connection
// (internal/netcork) so that the frames HTTP/2 writes when its buffer
// fills leave in few segments.
func (w *heldFlushes) Hold() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.held = true
	w.uncork = netcork.CorkContext(w.ctx)
	w.mu.Unlock()
}

// Release flushes what was held back, if anything was, and lets flushes
// through again.
func (w *heldFlushes) Release() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = false
	if w.pending {
		w.pending = false
		w.ResponseWriter.(http.Flusher).Flush()
	}
	if w.uncork != nil {
		w.uncork()
		w.uncork = nil
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *heldFlushes) Unwrap() http.ResponseWriter { return w.ResponseWriter }
