// Package accesslog writes one structured log line per HTTP request and
// gives every request an id.
//
// A line is logged at Info when the request ends, with message "request"
// and these attributes:
//
//	method       GET, POST, …
//	route        the route's pattern, e.g. /v1/event-destinations/{id}/pull,
//	             never the raw path (which carries ids); a gRPC call's route
//	             is its procedure, /package.Service/Method
//	status       the response status; 101 for an upgraded WebSocket
//	duration_ms  from the first byte read to the handler's return, in
//	             milliseconds (a stream's whole life)
//	bytes        response body bytes written
//	principal    the authenticated principal's id, "" when none
//	request_id   see below
//
// Nothing else of the request is logged: not the query (which may hold an
// access_token or a reconnect token), not a header, not a body. The format
// is the logger's: JSON lines in the clouds, text locally.
//
// # Request ids
//
// The id is the request's X-Request-Id when it is 1–128 characters of
// letters, digits and ._:- (so a client or a proxy can correlate), else the
// trace id of a valid W3C traceparent header, else 32 random hex digits.
// It is returned in the X-Request-Id response header and available to
// handlers through RequestID.
//
// # Logging from handlers
//
// Logger returns the middleware's logger to the handlers inside it, so
// that what they log (a 5xx's cause, say) lands with the access log,
// through the same handler chain (level, format, redaction), and Route
// gives them the route pattern to name the request by.
package accesslog

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixge/httpsnoop"
)

// Header is the request and response header carrying the request id.
const Header = "X-Request-Id"

// MaxRequestIDLength is the longest X-Request-Id taken from a request.
const MaxRequestIDLength = 128

type ctxKey struct{}

// entry is what the handlers inside the middleware add to the line.
type entry struct {
	id        string
	logger    *slog.Logger
	mu        sync.Mutex
	principal string
}

// Logger returns the logger of the middleware the request ctx belongs to,
// or slog.Default() outside one.
func Logger(ctx context.Context) *slog.Logger {
	if e, ok := ctx.Value(ctxKey{}).(*entry); ok && e.logger != nil {
		return e.logger
	}
	return slog.Default()
}

// RequestID returns the id of the request ctx belongs to, or "" outside
// the middleware.
func RequestID(ctx context.Context) string {
	if e, ok := ctx.Value(ctxKey{}).(*entry); ok {
		return e.id
	}
	return ""
}

// SetPrincipal records the authenticated principal's id for the request's
// line (httpx.Authenticate and the gRPC authenticator call it). Outside
// the middleware it does nothing.
func SetPrincipal(ctx context.Context, id string) {
	if e, ok := ctx.Value(ctxKey{}).(*entry); ok {
		e.mu.Lock()
		e.principal = id
		e.mu.Unlock()
	}
}

// Middleware returns next wrapped so that every request logs one line to
// logger and carries a request id. The response writer keeps next's
// abilities (flushing for SSE, hijacking for WebSocket, full duplex for
// gRPC streams).
func Middleware(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		e := &entry{id: requestID(r.Header), logger: logger}
		w.Header().Set(Header, e.id)
		var status atomic.Int64
		var written atomic.Int64
		setStatus := func(code int) {
			if code == http.StatusSwitchingProtocols || code >= 200 {
				status.CompareAndSwap(0, int64(code))
			}
		}
		ww := httpsnoop.Wrap(w, httpsnoop.Hooks{
			WriteHeader: func(f httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
				return func(code int) { setStatus(code); f(code) }
			},
			Write: func(f httpsnoop.WriteFunc) httpsnoop.WriteFunc {
				return func(b []byte) (int, error) {
					setStatus(http.StatusOK)
					n, err := f(b)
					written.Add(int64(n))
					return n, err
				}
			},
			WriteString: func(f httpsnoop.WriteStringFunc) httpsnoop.WriteStringFunc {
				return func(s string) (int, error) {
					setStatus(http.StatusOK)
					n, err := f(s)
					written.Add(int64(n))
					return n, err
				}
			},
			ReadFrom: func(f httpsnoop.ReadFromFunc) httpsnoop.ReadFromFunc {
				return func(src io.Reader) (int64, error) {
					setStatus(http.StatusOK)
					n, err := f(src)
					written.Add(n)
					return n, err
				}
			},
			Hijack: func(f httpsnoop.HijackFunc) httpsnoop.HijackFunc {
				return func() (net.Conn, *bufio.ReadWriter, error) {
					c, rw, err := f()
					if err == nil {
						setStatus(http.StatusSwitchingProtocols)
					}
					return c, rw, err
				}
			},
		})
		r2 := r.WithContext(context.WithValue(r.Context(), ctxKey{}, e))
		defer func() {
			code := int(status.Load())
			if code == 0 {
				code = http.StatusOK // net/http's answer to a handler that wrote nothing
			}
			e.mu.Lock()
			principal := e.principal
			e.mu.Unlock()
			ms := float64(time.Since(start).Microseconds()) / 1000
			logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", r.Method),
				slog.String("route", Route(r2)),
				slog.Int("status", code),
				slog.Float64("duration_ms", math.Round(ms*1000)/1000),
				slog.Int64("bytes", written.Load()),
				slog.String("principal", principal),
				slog.String("request_id", e.id),
			)
		}()
		next.ServeHTTP(ww, r2)
	})
}

// Route returns r's pattern without its method ("GET /health" →
// "/health"), as net/http's ServeMux set it on r: what a log line names a
// request by, never the raw path, which carries ids (a non-durable
// queue's is its reconnect token). A gRPC service is mounted on a prefix
// ("/pkg.Service/"): its route is the procedure, whose name is a fixed
// identifier, not a value. "" when no mux matched.
func Route(r *http.Request) string {
	p := r.Pattern
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = p[i+1:]
	}
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		if method, ok := strings.CutPrefix(r.URL.Path, p); ok && method != "" && isIdentifier(method) {
			return p + method
		}
	}
	return p
}

func isIdentifier(s string) bool {
	if len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// requestID picks the request's id: X-Request-Id, the traceparent's trace
// id, or a new random one.
func requestID(h http.Header) string {
	if id := h.Get(Header); validRequestID(id) {
		return id
	}
	if id, ok := traceID(h.Get("Traceparent")); ok {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func validRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLength {
		return false
	}
	for _, c := range id {
		if !(c == '.' || c == '_' || c == ':' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// traceID returns the trace id of a W3C Trace Context traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>"; https://www.w3.org/TR/trace-context/),
// refusing version ff and the all-zero id the spec calls invalid.
func traceID(tp string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", false
	}
	if parts[0] == "00" && len(parts) != 4 {
		return "", false
	}
	for _, p := range parts[:4] {
		if !isLowerHex(p) {
			return "", false
		}
	}
	if strings.Trim(parts[1], "0") == "" {
		return "", false
	}
	return parts[1], true
}

func isLowerHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
