package httpx

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/heraldevents/herald/herr"
)

// LongLived tracks the requests that outlive a normal response: the
// connections handlers took over from an http.Server (WebSockets, package
// functions/wsbridge), which http.Server.Shutdown neither closes nor
// waits for, and the streams that hold a request open (gRPC server and
// bidi streams, SSE), which Shutdown would wait out to its deadline. The
// server installs one in its base context (WithLongLived; app.Serve
// does). A handler registers with Track (or StreamContext), ends when
// goingAway is closed — a WebSocket closes with 1001, a gRPC stream ends
// UNAVAILABLE so that its client reconnects (the notifications API, status codes) — and
// calls the done func. Shutdown tells every tracked request to go away and
// waits for them, so a process closes its broker and store only after
// their sessions have detached.
type LongLived struct {
	mu      sync.Mutex
	closing bool
	away    chan struct{}
	// awayCtx is done when away is closed: streams register on it with
	// context.AfterFunc, which costs no goroutine per stream.
	awayCtx    context.Context
	awayCancel context.CancelFunc
	wg         sync.WaitGroup
}

// NewLongLived returns an empty tracker.
func NewLongLived() *LongLived {
	ctx, cancel := context.WithCancel(context.Background())
	return &LongLived{away: make(chan struct{}), awayCtx: ctx, awayCancel: cancel}
}

type longLivedKey struct{}

// WithLongLived returns ctx carrying h, for http.Server.BaseContext.
func WithLongLived(ctx context.Context, h *LongLived) context.Context {
	return context.WithValue(ctx, longLivedKey{}, h)
}

// LongLivedFrom returns the tracker of the server that serves ctx's
// request, or nil when the server installed none (the handler then sees
// no shutdown; its connections end when their clients or the process go).
func LongLivedFrom(ctx context.Context) *LongLived {
	h, _ := ctx.Value(longLivedKey{}).(*LongLived)
	return h
}

// Track registers one hijacked connection. goingAway is closed when the
// server shuts down; done must be called once the connection is closed.
// ok is false when the server is already shutting down: the handler
// should then refuse the connection (503) instead of hijacking it.
func (h *LongLived) Track() (goingAway <-chan struct{}, done func(), ok bool) {
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
func (h *LongLived) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	if !h.closing {
		h.closing = true
		close(h.away)
		h.awayCancel()
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

// ErrShuttingDown is the cause of a StreamContext's end when the server
// shuts down, and the error of a stream that could not start because it
// already is: herr.Unavailable, so gRPC clients see UNAVAILABLE and
// reconnect (to another instance, or this one once it is back).
var ErrShuttingDown = herr.New(herr.Unavailable, "the server is shutting down: reconnect (with the same reconnect token or queue_id) to resume")

// StreamContext returns a context for a long-lived response that ends
// when ctx does or, with cause ErrShuttingDown, when the server serving
// ctx's request shuts down; done must be called when the handler returns.
// It returns ErrShuttingDown when the server is shutting down already.
// Without a tracker in ctx (a server other than app.Serve's) the context
// only ends with ctx.
func StreamContext(ctx context.Context) (context.Context, func(), error) {
	ll := LongLivedFrom(ctx)
	if ll == nil {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	_, tracked, ok := ll.Track()
	if !ok {
		return nil, nil, ErrShuttingDown
	}
	sctx, cancel := context.WithCancelCause(ctx)
	// A callback, not a goroutine per stream: idle streams cost memory.
	stop := context.AfterFunc(ll.awayCtx, func() { cancel(ErrShuttingDown) })
	return sctx, func() { stop(); cancel(nil); tracked() }, nil
}

// ShuttingDown reports whether ctx (from StreamContext, or derived from
// it) ended because the server is shutting down.
func ShuttingDown(ctx context.Context) bool {
	return ctx.Err() != nil && context.Cause(ctx) == ErrShuttingDown
}

// Server timeouts (app.Serve): a request must send its headers within
// ReadHeaderTimeout and its whole body within ReadTimeout, so a body that
// trickles in at a byte a second cannot hold a connection and its buffers
// for ever, and a keep-alive connection with no request for IdleTimeout
// is closed. A stream reads its request for as long as it lives: its route
// is wrapped in Unbounded, which lifts the read deadline.
const (
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout leaves a 32 MiB publish batch 1 MiB/s.
	ReadTimeout = 60 * time.Second
	// IdleTimeout is longer than the idle timeouts of the load balancers
	// in front of Herald (Google Cloud's is 600 s; AWS ALB's 60 s), so
	// they, not Herald, close an idle connection: a server that closes
	// first races the balancer's next request on it.
	IdleTimeout = 620 * time.Second
)

// Unbounded wraps a streaming handler (SSE, WebSocket, gRPC streams) so
// that the server's ReadTimeout does not cut it: it clears the request's
// read deadline before next runs (over HTTP/1.1 and HTTP/2 alike). The
// stream's own keep-alives bound a dead peer instead.
func Unbounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		next.ServeHTTP(w, r)
	})
}
