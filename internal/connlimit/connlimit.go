// Package connlimit bounds the client connections one server process
// holds, so that clients that open connections and leave them idle — one
// GET /health each on a keep-alive connection was enough — cannot take
// every file descriptor of the process, after which nobody, health
// checks included, can connect.
//
// A Listener wraps the server's net.Listener and counts what it accepted
// until each connection is closed, hijacked ones (WebSockets) included.
// It is told each connection's state by http.Server.ConnState
// (Listener.ConnState). At a bound it makes room rather than wait:
//
//   - Limits.MaxPerClient bounds the connections of one client address.
//     A client at its bound loses its own longest-idle connection to its
//     new one; when none of its connections is idle, the new one is
//     refused.
//   - Limits.MaxConns bounds all connections but the health reserve. At
//     the bound, the longest-idle connection of the process is closed for
//     the new one (an idle keep-alive connection, else one that has not
//     sent a request yet); when every connection is busy (a request in
//     progress, a stream, a WebSocket), the new one takes a place in the
//     health reserve, and is refused when that is full.
//   - Limits.HealthReserve more connections are kept for health checks: a
//     connection admitted into the reserve serves only the health routes
//     (Listener.Guard answers anything else 503 and closes it), so a
//     liveness or readiness probe still gets in when the process is full
//     of busy clients.
//
// A refused connection is answered "503 Service Unavailable" with
// Retry-After (HTTP/1.1; a client that speaks HTTP/2 at once reads a
// protocol error) and closed. Refusals and evictions are logged as
// warnings, rate-limited (package internal/lograte).
//
// # Client address
//
// The client is the TCP peer's address: an IPv4 address, or the /64
// prefix of an IPv6 one (a host is usually given a whole /64). A header
// such as X-Forwarded-For is not read: it costs an attacker nothing to
// forge, and what runs out is this process's sockets, one per TCP peer
// connection. Behind a proxy or a load balancer every connection comes
// from the proxy, so the per-client bound must be off there (Cloud Run's
// default) or larger than the proxy's connection pool; the proxy bounds
// its clients itself.
package connlimit

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/heraldevents/herald/internal/lograte"
)

// Limits are a Listener's bounds; a zero field is no bound (no reserve).
type Limits struct {
	// MaxConns bounds the connections the process holds, the health
	// reserve aside (HERALD_MAX_CONNS).
	MaxConns int
	// MaxPerClient bounds the connections of one client address
	// (HERALD_MAX_CONNS_PER_CLIENT).
	MaxPerClient int
	// HealthReserve is how many connections past MaxConns are admitted
	// for the health routes only (HERALD_HEALTH_CONN_RESERVE). It counts
	// only with MaxConns set.
	HealthReserve int
}

// Enabled reports whether l bounds anything.
func (l Limits) Enabled() bool { return l.MaxConns > 0 || l.MaxPerClient > 0 }

// Defaults derived from the process's file-descriptor limit (Derived).
const (
	// MinMaxConns is the least Derived gives MaxConns, however low the
	// descriptor limit.
	MinMaxConns = 64
	// MaxDerivedConns caps what Derived gives MaxConns: an HTTP
	// connection costs some 20 KiB of buffers and goroutine stack, so a
	// million descriptors (a common container limit) are not a million
	// connections' worth of memory.
	MaxDerivedConns = 50_000
	// DefaultHealthReserve is HERALD_HEALTH_CONN_RESERVE's default: room
	// for the probes of a platform and an operator's curl.
	DefaultHealthReserve = 16
)

// Derived returns the bounds for a process whose file-descriptor limit
// (RLIMIT_NOFILE, the soft limit, which the Go runtime raises to the hard
// limit when it starts) is fdLimit: an eighth of the descriptors, at
// least 64 and at most 1,024, stay for the broker's and the store's
// connections, log files and the health reserve; MaxConns is the rest,
// between MinMaxConns and MaxDerivedConns; MaxPerClient is a quarter of
// MaxConns when perClient, else 0 (behind a proxy; see the package doc);
// HealthReserve is DefaultHealthReserve. fdLimit ≤ 0 (unknown) is taken
// as 1,024.
func Derived(fdLimit int, perClient bool) Limits {
	if fdLimit <= 0 {
		fdLimit = 1024
	}
	headroom := min(max(fdLimit/8, 64), 1024)
	l := Limits{MaxConns: min(max(fdLimit-headroom, MinMaxConns), MaxDerivedConns), HealthReserve: DefaultHealthReserve}
	if perClient {
		l.MaxPerClient = max(l.MaxConns/4, 1)
	}
	return l
}

// FDLimit returns the process's file-descriptor limit (RLIMIT_NOFILE's
// soft limit), or 0 where it cannot be read.
func FDLimit() int { return fdLimit() }

// Listener is a net.Listener that holds its connections to Limits (see
// the package doc). Serve with it, set its ConnState as the server's
// http.Server.ConnState and its ConnContext in the server's ConnContext,
// and wrap the handler in Guard. It is safe for concurrent use.
type Listener struct {
	net.Listener
	limits Limits
	logger *slog.Logger
	logs   *lograte.Limiter
	// refusing bounds the goroutines that answer refused connections;
	// past it a refused connection is closed without an answer.
	refusing chan struct{}

	mu      sync.Mutex
	all     waiting            // every client's waiting connections
	clients map[string]*client // by client address
	general int                // connections outside the health reserve
	reserve int                // connections in the health reserve
	evicted int64
	refused int64
}

// waiting holds connections that wait for a request — idle keep-alive
// ones, and new ones that have sent none yet — each list oldest first,
// so that the connection to close for room is found at once however many
// there are.
type waiting struct {
	idle, fresh list.List // of *Conn
}

// oldest returns the connection to close first: the longest idle, else
// the oldest new one; nil when none waits.
func (w *waiting) oldest() *Conn {
	if e := w.idle.Front(); e != nil {
		return e.Value.(*Conn)
	}
	if e := w.fresh.Front(); e != nil {
		return e.Value.(*Conn)
	}
	return nil
}

// list returns the list of connections in state s, nil for a busy state.
func (w *waiting) list(s http.ConnState) *list.List {
	switch s {
	case http.StateIdle:
		return &w.idle
	case http.StateNew:
		return &w.fresh
	}
	return nil
}

// client is what a Listener holds of one client address.
type client struct {
	open    int
	waiting waiting
}

// maxRefusing bounds the refused connections being answered at once.
const maxRefusing = 64

// refuseWait bounds the answer to a refused connection and the wait for
// its client to close first (see Listener.refuse).
const refuseWait = time.Second

// NewListener returns ln bounded by limits. Warnings go to logger (nil:
// slog.Default()).
func NewListener(ln net.Listener, limits Limits, logger *slog.Logger) *Listener {
	if logger == nil {
		logger = slog.Default()
	}
	return &Listener{
		Listener: ln, limits: limits, logger: logger, logs: lograte.New(lograte.DefaultInterval),
		refusing: make(chan struct{}, maxRefusing),
		clients:  map[string]*client{},
	}
}

// Limits returns the bounds the Listener holds to.
func (l *Listener) Limits() Limits { return l.limits }

// Stats is what a Listener holds and has done.
type Stats struct {
	// Open counts the connections held (reserve included); Reserve those
	// admitted into the health reserve; Idle those idle between requests
	// (http.StateIdle).
	Open, Reserve, Idle int
	// Evicted counts the idle connections closed to make room; Refused the
	// connections turned away.
	Evicted, Refused int64
}

// Stats returns what l holds and has done.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.general + l.reserve, Reserve: l.reserve, Idle: l.all.idle.Len(), Evicted: l.evicted, Refused: l.refused}
}

// Conn is a connection a Listener accepted.
type Conn struct {
	net.Conn
	l       *Listener
	client  string
	reserve bool // admitted into the health reserve

	// guarded by l.mu
	state   http.ConnState
	tracked bool          // counted; false once closed or evicted
	inAll   *list.Element // in l.all while waiting
	inOwn   *list.Element // in its client's waiting while waiting

	closeOnce sync.Once
	closeErr  error
}

// Accept waits for a connection the bounds admit, making room by closing
// idle ones, and returns it. Connections it refuses are answered and
// closed without returning.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := l.admit(c); ok {
			return tc, nil
		}
	}
}

// admit decides about c: it returns the tracked connection, after
// closing the connections it evicted for it, or refuses c.
func (l *Listener) admit(c net.Conn) (*Conn, bool) {
	tc := &Conn{Conn: c, l: l, client: clientKey(c.RemoteAddr()), state: http.StateNew}
	var victims []*Conn
	l.mu.Lock()
	ok := true
	if own := l.clients[tc.client]; l.limits.MaxPerClient > 0 && own != nil && own.open >= l.limits.MaxPerClient {
		if v := own.waiting.oldest(); v != nil {
			l.untrack(v)
			victims = append(victims, v)
		} else {
			ok = false
		}
	}
	if ok && l.limits.MaxConns > 0 && l.general >= l.limits.MaxConns {
		if v := l.all.oldest(); v != nil {
			l.untrack(v)
			victims = append(victims, v)
			// It takes the victim's place: in the reserve when the
			// victim was, so that the reserve never grows the bound.
			tc.reserve = v.reserve
		} else if l.reserve < l.limits.HealthReserve {
			tc.reserve = true
		} else {
			ok = false
		}
	}
	if ok {
		l.track(tc)
	} else {
		l.refused++
	}
	l.evicted += int64(len(victims))
	l.mu.Unlock()

	for _, v := range victims {
		_ = v.Conn.Close() // the server's goroutine for it sees the close and ends
	}
	if len(victims) > 0 {
		l.warn("idle connections closed to make room for new ones", "the connection bound is reached", tc.client)
	}
	if !ok {
		l.warn("connection refused: the connection bound is reached and no connection is idle", "refused", tc.client)
		l.refuse(c)
		return nil, false
	}
	if tc.reserve {
		l.warn("connection admitted into the health reserve: only health checks are served on it", "reserve", tc.client)
	}
	return tc, true
}

// track counts c. Called with l.mu held.
func (l *Listener) track(c *Conn) {
	c.tracked = true
	own := l.clients[c.client]
	if own == nil {
		own = &client{}
		l.clients[c.client] = own
	}
	own.open++
	if c.reserve {
		l.reserve++
	} else {
		l.general++
	}
	l.wait(c, own)
}

// wait puts c, in its state, at the back of the waiting lists (nothing
// for a busy state). Called with l.mu held.
func (l *Listener) wait(c *Conn, own *client) {
	if all := l.all.list(c.state); all != nil {
		c.inAll, c.inOwn = all.PushBack(c), own.waiting.list(c.state).PushBack(c)
	}
}

// unwait takes c out of the waiting lists. Called with l.mu held.
func (l *Listener) unwait(c *Conn, own *client) {
	if c.inAll != nil {
		l.all.list(c.state).Remove(c.inAll)
		own.waiting.list(c.state).Remove(c.inOwn)
		c.inAll, c.inOwn = nil, nil
	}
}

// untrack forgets c. Called with l.mu held.
func (l *Listener) untrack(c *Conn) {
	if !c.tracked {
		return
	}
	c.tracked = false
	own := l.clients[c.client]
	l.unwait(c, own)
	if own.open--; own.open <= 0 {
		delete(l.clients, c.client)
	}
	if c.reserve {
		l.reserve--
	} else {
		l.general--
	}
}

// ConnState is the server's http.Server.ConnState: it tells l which
// connections wait for a request.
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	tc, ok := c.(*Conn)
	if !ok || tc.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !tc.tracked || tc.state == s {
		return
	}
	own := l.clients[tc.client]
	l.unwait(tc, own)
	tc.state = s
	l.wait(tc, own)
}

type connKey struct{}

// ConnContext is for the server's http.Server.ConnContext: it puts the
// connection in the context of its requests, for Guard.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// Guard wraps a server's handler: a request that arrived on a connection
// of the health reserve is served only when health says its route is a
// health route; any other is answered 503 with Retry-After and its
// connection closed after the answer (HTTP/1.1; HTTP/2 has no such
// header, and the idle connection is the first to go when room is
// needed).
func Guard(next http.Handler, health func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*Conn); ok && c.reserve && !health(r) {
			h := w.Header()
			h.Set("Retry-After", "1")
			if r.ProtoMajor == 1 {
				h.Set("Connection", "close")
			}
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(busyBody))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// busyBody is the JSON error body (package functions/httpx's shape) of a
// request refused for want of connections.
const busyBody = `{"code":"unavailable","message":"the server holds as many connections as it may: retry after 1 s","detail":"the server holds as many connections as it may: retry after 1 s"}` + "\n"

// refuse answers a refused connection 503 and closes it, in the
// background: it writes the answer, half-closes, and reads what the
// client sends until the client closes or refuseWait passes, so that the
// unread request does not make the close a reset that discards the
// answer. Past maxRefusing answers at once, it closes at once.
func (l *Listener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseWait))
		if _, err := c.Write([]byte(refusal)); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

// refusal is the whole answer to a refused connection.
var refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
	strconv.Itoa(len(busyBody)) + "\r\n\r\n" + busyBody

// warn logs a rate-limited warning: one line per kind, then one per
// interval with a count.
func (l *Listener) warn(msg, kind, client string) {
	s := l.Stats()
	l.logs.Log(context.Background(), l.logger, slog.LevelWarn, kind, msg,
		"open", s.Open, "max_conns", l.limits.MaxConns, "max_per_client", l.limits.MaxPerClient,
		"health_reserve", l.limits.HealthReserve, "evicted", s.Evicted, "refused", s.Refused, "client", client)
}

// Close closes the connection and forgets it. It is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		c.l.untrack(c)
		c.l.mu.Unlock()
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}

// Reserve reports whether c was admitted into the health reserve.
func (c *Conn) Reserve() bool { return c.reserve }

// SyscallConn gives the socket underneath, so that package
// internal/netcork can cork it and the runtime poll it as usual.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes the connection when the socket can (net/http
// does it before closing a connection it answered with an error).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// clientKey names the client of a connection from its peer address: the
// IPv4 address, or the /64 prefix of an IPv6 one.
func clientKey(a net.Addr) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		if a == nil {
			return ""
		}
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		ip = net.ParseIP(host)
		if ip == nil {
			return host
		}
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
