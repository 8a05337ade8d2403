package grpcapi

import (
	"context"
	"net/http"
	"sync"
	"time"

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
	armed   time.Time // when Arm last moved the write deadline
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
		hw.Disarm()
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

// Hold holds back flushes until Release. For a batch of more than one
// message (n) it also corks the connection (internal/netcork) so that the
// frames HTTP/2 writes when its buffer fills leave in few segments; one
// message leaves in one write at the flush anyway, and corking it would
// only add two system calls to every delivery of a fan-out.
func (w *heldFlushes) Hold(n int) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.held = true
	if n > 1 {
		w.uncork = netcork.CorkContext(w.ctx)
	}
	w.mu.Unlock()
}

// Release flushes what was held back, if anything was, and lets flushes
// through again. Its error says the flush failed (the client is gone, or
// did not take the data within the write deadline): what was held back
// did not all leave.
func (w *heldFlushes) Release() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = false
	var err error
	if w.pending {
		w.pending = false
		err = http.NewResponseController(w.ResponseWriter).Flush()
	}
	if w.uncork != nil {
		w.uncork()
		w.uncork = nil
	}
	return err
}

// Disarm clears the write deadline Arm set, once what was written has
// been flushed. An armed deadline must not outlive the writes it bounds:
// over HTTP/2 it resets the stream when it passes, written or not, so a
// stream waiting for its next event would be dropped; over HTTP/1.1
// (Connect or gRPC-Web streaming) net/http would leave it on the
// connection for its next request.
func (w *heldFlushes) Disarm() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed.IsZero() {
		w.armed = time.Time{}
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Time{})
	}
}

// Arm gives the stream's next writes until d from now: a client that does
// not take them by then is dropped (the write fails; over HTTP/2 the
// stream is reset). Until Disarm it re-arms at most every d/10, so that
// a batch of many small messages does not reset a timer per message; a
// write is thus given at least nine tenths of d. Without a write deadline
// underneath (a test's recorder) it does nothing.
func (w *heldFlushes) Arm(d time.Duration) {
	if w == nil || d <= 0 {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed.IsZero() && now.Sub(w.armed) < d/10 {
		return
	}
	w.armed = now
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(now.Add(d))
}

// Bounded runs send (one message, flushed by connect) with the write
// deadline armed for d, and clears it after.
func (w *heldFlushes) Bounded(d time.Duration, send func() error) error {
	w.Arm(d)
	defer w.Disarm()
	return send()
}
