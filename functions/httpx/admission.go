package httpx

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/lograte"
)

// Admission sheds load before it costs memory: it bounds the request body
// bytes being processed at once across the process, and the publish
// requests being processed at once, and answers what would pass either
// bound at once with 503 Service Unavailable and Retry-After (gRPC
// RESOURCE_EXHAUSTED, as the notifications API, compatible with NVIDIA
// Omniverse's, tells clients to expect when the service is overloaded),
// without reading the body. It never queues: a client that retries after
// Retry-After finds room or is refused again, and the process's memory
// stays bounded by roughly a small multiple of MaxBytes (decoding a
// publish batch holds the body and the events decoded from it;
// docs/limits.md gives the measured figure).
//
// A body of known length reserves that many bytes before the handler
// runs; one of unknown length (chunked HTTP/1.1, every gRPC request)
// reserves them as they are read, and a read that would pass the bound
// fails with the overload error. Everything a request reserved is released
// when its handler returns. The zero value admits everything.
//
// The protocol of a refusal follows the route, never the request's
// Content-Type: Wrap guards REST routes, whose refusals are always 503
// with Retry-After and the JSON error body (a REST client sends
// Content-Type: application/json, which connect-go would take for its
// own Connect protocol and answer 429), and WrapRPC guards the gRPC
// services, whose refusals are RESOURCE_EXHAUSTED in the caller's RPC
// protocol (gRPC, gRPC-Web or Connect).
//
// A refusal is an expected answer under load, not a server failure: it is
// logged as a warning, rate-limited per bound (package internal/lograte:
// the first refusal of a burst, then one line per DefaultInterval with
// the count of the others), never as an error per request.
type Admission struct {
	// MaxBytes bounds the request body bytes held by requests in
	// progress (HERALD_MAX_INFLIGHT_BYTES); ≤ 0 means no bound.
	MaxBytes int64
	// MaxPublishes bounds the publish requests in progress, REST and
	// gRPC, single and batch (HERALD_MAX_CONCURRENT_PUBLISHES); ≤ 0 means
	// no bound.
	MaxPublishes int64
	// Logger receives the rate-limited warnings of refused requests; nil
	// means slog.Default().
	Logger *slog.Logger

	bytes     atomic.Int64
	publishes atomic.Int64
	shed      atomic.Int64

	logOnce sync.Once
	logs    *lograte.Limiter
}

// RetryAfter is what an overloaded answer's Retry-After header says: load
// that passes a bound is usually gone within a second or two.
const RetryAfter = time.Second

// OverloadedError is the error of a request Admission refused:
// herr.Unavailable for the REST mapping (503), with RetryAfter.
type OverloadedError struct {
	// What names the bound that was reached.
	What string
}

func (e *OverloadedError) Error() string {
	return "the server is overloaded (" + e.What + "): retry after " + strconv.Itoa(int(RetryAfter/time.Second)) + " s"
}

// LoadShed marks the error as a refusal under load (IsLoadShed).
func (e *OverloadedError) LoadShed() bool { return true }

// Unwrap gives the error its herr code and caller-safe message.
func (e *OverloadedError) Unwrap() error {
	return herr.WithRetryAfter(herr.New(herr.Unavailable, "%s", e.Error()), RetryAfter)
}

// Shed returns how many requests a has refused so far.
func (a *Admission) Shed() int64 {
	if a == nil {
		return 0
	}
	return a.shed.Load()
}

// InFlightBytes returns the body bytes reserved by requests in progress.
func (a *Admission) InFlightBytes() int64 {
	if a == nil {
		return 0
	}
	return a.bytes.Load()
}

// tryAdd adds n to c unless that would pass limit (≤ 0: no limit).
func tryAdd(c *atomic.Int64, n, limit int64) bool {
	if limit <= 0 {
		c.Add(n)
		return true
	}
	for {
		cur := c.Load()
		if cur+n > limit && cur > 0 {
			// A single request larger than the whole bound is let in
			// when nothing else is held, so that a bound below the body
			// limits of the routes does not refuse those bodies forever.
			return false
		}
		if c.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// Wrap returns the REST handler next behind a's bounds: a refusal is 503
// with Retry-After and the JSON error body, whatever the request's
// Content-Type. publish says next serves publish requests, which also
// take a publish slot.
func (a *Admission) Wrap(next http.Handler, publish bool) http.Handler {
	return a.wrap(next, publish, false)
}

// WrapRPC is Wrap for a connect-go handler (the gRPC services): a refusal
// is RESOURCE_EXHAUSTED with Retry-After, in the request's RPC protocol
// (gRPC, gRPC-Web or Connect; the notifications API: "RESOURCE_EXHAUSTED
// (gRPC) … if temporarily overloaded"). A request on that route that
// speaks none of them gets the REST answer.
func (a *Admission) WrapRPC(next http.Handler, publish bool) http.Handler {
	return a.wrap(next, publish, true)
}

func (a *Admission) wrap(next http.Handler, publish, rpc bool) http.Handler {
	if a == nil || (a.MaxBytes <= 0 && (a.MaxPublishes <= 0 || !publish)) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rpc := rpc && rpcErrors.IsSupported(r)
		if publish {
			if !tryAdd(&a.publishes, 1, a.MaxPublishes) {
				a.refuse(w, r, rpc, &OverloadedError{What: "too many publishes in progress"})
				return
			}
			defer a.publishes.Add(-1)
		}
		if a.MaxBytes > 0 && r.Body != nil && r.Body != http.NoBody {
			held := int64(0)
			defer func() { a.bytes.Add(-held) }()
			if n := r.ContentLength; n > 0 {
				if !tryAdd(&a.bytes, n, a.MaxBytes) {
					a.refuse(w, r, rpc, &OverloadedError{What: "too many request bytes in progress"})
					return
				}
				held = n
			} else if n < 0 {
				r.Body = &admittedBody{ReadCloser: r.Body, a: a, r: r, held: &held, rpc: rpc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

var rpcErrors = connect.NewErrorWriter()

// refuse answers err: RESOURCE_EXHAUSTED in the caller's RPC protocol
// when rpc (a gRPC service's route, and a request in one of its
// protocols), else 503 with Retry-After. Either way it counts the refusal
// and logs it, rate-limited.
func (a *Admission) refuse(w http.ResponseWriter, r *http.Request, rpc bool, err *OverloadedError) {
	a.refused(r, err)
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	if rpc {
		_ = rpcErrors.Write(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New(err.Error())))
		return
	}
	WriteError(w, r, err) // an *OverloadedError: not logged again there
}

// refused counts a refusal and logs it as a warning, one line per bound
// and DefaultInterval (lograte): a flood of refusals is one line with a
// count, where an error line per request buried everything else (2,322
// lines in 10 s under one test's load).
func (a *Admission) refused(r *http.Request, err *OverloadedError) {
	a.shed.Add(1)
	a.logOnce.Do(func() { a.logs = lograte.New(lograte.DefaultInterval) })
	logger := a.Logger
	if logger == nil {
		logger = slog.Default()
	}
	a.logs.Log(context.WithoutCancel(r.Context()), logger, slog.LevelWarn, err.What,
		"request shed: the server is overloaded", "bound", err.What, "route", r.Pattern, "retry_after_s", int(RetryAfter/time.Second))
}

// admittedBody reserves body bytes as they are read.
type admittedBody struct {
	io.ReadCloser
	a    *Admission
	r    *http.Request // for the log line of a refusal
	held *int64
	used int64
	rpc  bool // a gRPC service's request: fail reads as RESOURCE_EXHAUSTED
	err  error
}

// admitChunk is how many bytes a body of unknown length reserves at a
// time, so that a read loop does not touch the shared counter per read.
const admitChunk = 64 << 10

func (b *admittedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	used := b.used + int64(n)
	for used > *b.held {
		if !tryAdd(&b.a.bytes, admitChunk, b.a.MaxBytes) {
			oe := &OverloadedError{What: "too many request bytes in progress"}
			b.a.refused(b.r, oe)
			b.err = oe
			if b.rpc {
				// connect passes a *connect.Error from the body on as
				// the call's status.
				b.err = connect.NewError(connect.CodeResourceExhausted, errors.New(oe.Error()))
			}
			return 0, b.err
		}
		*b.held += admitChunk
	}
	b.used = used
	return n, err
}
