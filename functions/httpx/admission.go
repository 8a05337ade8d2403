package httpx

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/heraldevents/herald/herr"
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
type Admission struct {
	// MaxBytes bounds the request body bytes held by requests in
	// progress (HERALD_MAX_INFLIGHT_BYTES); ≤ 0 means no bound.
	MaxBytes int64
	// MaxPublishes bounds the publish requests in progress, REST and
	// gRPC, single and batch (HERALD_MAX_CONCURRENT_PUBLISHES); ≤ 0 means
	// no bound.
	MaxPublishes int64

	bytes     atomic.Int64
	publishes atomic.Int64
	shed      atomic.Int64
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

// Wrap returns next behind a's bounds. publish says next serves publish
// requests, which also take a publish slot.
func (a *Admission) Wrap(next http.Handler, publish bool) http.Handler {
	if a == nil || (a.MaxBytes <= 0 && (a.MaxPublishes <= 0 || !publish)) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publish {
			if !tryAdd(&a.publishes, 1, a.MaxPublishes) {
				a.refuse(w, r, &OverloadedError{What: "too many publishes in progress"})
				return
			}
			defer a.publishes.Add(-1)
		}
		if a.MaxBytes > 0 && r.Body != nil && r.Body != http.NoBody {
			held := int64(0)
			defer func() { a.bytes.Add(-held) }()
			if n := r.ContentLength; n > 0 {
				if !tryAdd(&a.bytes, n, a.MaxBytes) {
					a.refuse(w, r, &OverloadedError{What: "too many request bytes in progress"})
					return
				}
				held = n
			} else if n < 0 {
				r.Body = &admittedBody{ReadCloser: r.Body, a: a, held: &held, grpc: grpcErrors.IsSupported(r)}
			}
		}
		next.ServeHTTP(w, r)
	})
}

var grpcErrors = connect.NewErrorWriter()

// refuse answers err in the request's protocol: a gRPC (or Connect)
// client gets RESOURCE_EXHAUSTED, anyone else 503 with Retry-After.
func (a *Admission) refuse(w http.ResponseWriter, r *http.Request, err *OverloadedError) {
	a.shed.Add(1)
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	if grpcErrors.IsSupported(r) {
		_ = grpcErrors.Write(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New(err.Error())))
		return
	}
	WriteError(w, r, err)
}

// admittedBody reserves body bytes as they are read.
type admittedBody struct {
	io.ReadCloser
	a    *Admission
	held *int64
	used int64
	grpc bool // a gRPC or Connect request: fail reads as RESOURCE_EXHAUSTED
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
			b.a.shed.Add(1)
			oe := &OverloadedError{What: "too many request bytes in progress"}
			b.err = oe
			if b.grpc {
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
