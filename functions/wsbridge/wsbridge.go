// Package wsbridge serves Herald's WebSocket endpoint on servers that can
// hold a connection open, the local adapter and Cloud Run:
//
//	GET /api/v1beta/events/websocket
//
// It carries the notifications API's three streams (ConsumeNonDurableEvents,
// ConsumeDurableEventsWithAcks, ManageDeadLetteredEvents) as the JSON
// frames of package functions/wsframe, over one gorilla/websocket
// connection per stream. docs/websocket.md is the user's reference; this
// comment says how the bridge keeps it.
//
// # Before the upgrade
//
// Failures before the upgrade are plain HTTP answers with the JSON error
// body of package httpx: 401 without a valid bearer token (the
// Authorization header, or the access_token query parameter for browsers,
// which cannot set headers on a WebSocket), 426 for a GET that is not a
// WebSocket upgrade, 403 for a browser page whose Origin is neither the
// server's own nor in HERALD_CORS_ORIGINS (Handler.CheckOrigin), 501 when the server cannot hand the connection over
// (behind API Gateway's HTTP API a Lambda cannot: use the API Gateway
// WebSocket API, package functions/wslambda), 503 while the server shuts
// down. The subprotocol wsframe.Subprotocol is selected when the client
// offers it; none is required.
//
// # Frames and state
//
// wsframe.Dispatch routes every frame, with the rules and error texts
// the API Gateway bridge shares. The first frame that counts is open; one
// open per connection. A frame that fits no state (a second open,
// demand/ack/nack/actions before open, ack or nack on a non-durable or
// dead_letters stream, actions on an event stream) is answered by a
// non-fatal error frame with status 409, and the stream goes on. A frame
// wsframe.Decode refuses is a non-fatal error frame with its status (400
// not JSON, 422 against a rule), except an open
// frame, whose refusal (422: a bad queue_id or reconnect token, bad filter
// groups) is fatal: the error frame is followed by close code
// wsframe.CloseCode(status). Failures to open the stream are fatal the
// same way (4403 no permission, 4404 unknown queue or token, 4422 filters
// that do not match previous_filter_groups).
//
// # Flow control
//
// Events go out only against credit. A demand frame adds n; credit may not
// pass wsframe.MaxCredit (such a demand is a non-fatal 422 and changes
// nothing). Each event or dead_lettered_event frame takes one credit. The
// bridge calls delivery.Stream.Next only while it has credit, so it
// leases events only for a client that asked for them; Next returns up to
// StreamConfig.Batch events at a time, and what passes the credit is held
// in memory, leased to this session, and sent first when credit comes
// (if the connection ends first, Stream.Close puts them back in the queue,
// to be delivered again). Credit is held: events are pushed as they
// arrive, without another demand. A durable stream also stops at the
// session's unsettled limit (StreamConfig.MaxUnsettled, 100) until the
// client settles.
//
// Non-durable events carry no delivery tag and are acknowledged once
// written, as on gRPC. Durable events carry a tag; ack and nack frames
// call Stream.Settle (acks first) and are answered by a settled frame with
// the counts. Dead letters are shown once per connection, with tags from
// delivery.Triage, and the queue is listed again every
// delivery.DeadLetterPoll; an actions frame is answered by one outcome
// frame per action, in order.
//
// # Keep-alive and close codes
//
// The server sends a WebSocket ping every PingInterval
// (HERALD_WS_PING_INTERVAL, 30 s) and gives up on a client from which
// nothing (no pong, no frame) arrived for two intervals: it sends close
// 1001 and drops the connection. A ping frame is answered by a pong frame
// with its id. A client's close is answered with 1000; a frame larger than
// wsframe.MaxFrameBytes closes with 1009; a server shutdown closes every
// connection with 1001 (the server tracks them with httpx.LongLived, since
// http.Server.Shutdown does not). A lost session closes after a fatal
// error frame: 4404 when the queue is gone, 4500 with
// delivery.ConsumerCancelledMessage when the session was taken away
// (reconnect with the same token or queue_id). Whatever the close, the
// events the session did not settle return to the queue.
package wsbridge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/logredact"
	"github.com/heraldevents/herald/internal/netcork"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Path is the endpoint the router mounts (GET).
const Path = "/api/v1beta/events/websocket"

// DefaultPingInterval is the interval of WebSocket pings when
// Handler.PingInterval is 0 (config.DefaultWSPingInterval).
const DefaultPingInterval = config.DefaultWSPingInterval

// closeWait is how long the server waits for the client's answer to its
// close frame before it drops the connection.
const closeWait = 2 * time.Second

// Handler serves GET /api/v1beta/events/websocket. It must run behind
// httpx.Authenticate (the router mounts it so, with the access_token query
// parameter accepted).
type Handler struct {
	Service *delivery.Service
	// PingInterval is how often the server pings; 0 means
	// DefaultPingInterval. A client silent for two intervals is dropped.
	PingInterval time.Duration
	// Logger logs failures the client is not told the cause of; nil means
	// the request's (accesslog.Logger: the server's logger, slog.Default()
	// outside the access-log middleware).
	Logger *slog.Logger
	// CheckOrigin decides whether a browser page's Origin may open the
	// WebSocket; a refused one is answered 403 before the upgrade. nil
	// admits requests without Origin and of the server's own origin only.
	// The router sets it from HERALD_CORS_ORIGINS.
	CheckOrigin func(*http.Request) bool
}

// upgrader accepts any origin: Handler.CheckOrigin has decided before
// the upgrade (with a JSON 403 the upgrader's own refusal would not give).
var upgrader = websocket.Upgrader{
	Subprotocols:    []string{wsframe.Subprotocol},
	CheckOrigin:     func(*http.Request) bool { return true },
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
		code := herr.Malformed
		if status >= 500 {
			code = herr.Internal
		}
		// gorilla's reasons name headers and rules, never a token.
		httpx.WriteJSON(w, status, httpx.ErrorBody{Code: code.String(), Message: reason.Error()})
	},
}

// ServeHTTP upgrades the request and runs one stream until either side
// closes. See the package comment for the answers before the upgrade.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		httpx.WriteJSON(w, http.StatusUpgradeRequired, httpx.ErrorBody{
			Code:    herr.FailedPrecondition.String(),
			Message: "this endpoint speaks WebSocket only: send a WebSocket upgrade request (see docs/websocket.md)",
		})
		return
	}
	if !h.originAllowed(r) {
		httpx.WriteJSON(w, http.StatusForbidden, httpx.ErrorBody{
			Code:    herr.PermissionDenied.String(),
			Message: "this page's origin may not open the WebSocket: add it to HERALD_CORS_ORIGINS",
		})
		return
	}
	if _, ok := w.(http.Hijacker); !ok {
		// Written, not logged as a failure: the client came the wrong way.
		httpx.WriteJSON(w, http.StatusNotImplemented, httpx.ErrorBody{
			Code:    herr.Unimplemented.String(),
			Message: "this server cannot hold a WebSocket connection (a Lambda behind an HTTP API cannot): use the API Gateway WebSocket API's URL instead",
		})
		return
	}
	var goingAway <-chan struct{}
	if hj := httpx.LongLivedFrom(r.Context()); hj != nil {
		away, done, ok := hj.Track()
		if !ok {
			httpx.WriteError(w, r, herr.New(herr.Unavailable, "the server is shutting down: reconnect"))
			return
		}
		defer done()
		goingAway = away
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered with upgrader.Error
	}
	ping := h.PingInterval
	if ping <= 0 {
		ping = DefaultPingInterval
	}
	log := h.Logger
	if log == nil {
		log = accesslog.Logger(r.Context())
	}
	s := &session{svc: h.Service, p: p, conn: conn, ping: ping, log: log, wake: make(chan struct{}, 1),
		writeWait: h.Service.Streams().WriteTimeout}
	s.run(telemetry.WithTransport(r.Context(), "websocket"), goingAway)
}

// originAllowed applies CheckOrigin, or its default: no Origin, or the
// request's own host.
func (h *Handler) originAllowed(r *http.Request) bool {
	if h.CheckOrigin != nil {
		return h.CheckOrigin(r)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// session is one connection; wsframe.Dispatch routes its frames.
type session struct {
	svc  *delivery.Service
	p    *auth.Principal
	conn *websocket.Conn
	ping time.Duration
	log  *slog.Logger
	// writeWait bounds one write (StreamConfig.WriteTimeout): a client
	// that stops reading for this long is dropped rather than allowed to
	// hold the session.
	writeWait time.Duration

	ctx    context.Context // the connection's life
	cancel context.CancelFunc
	pumps  sync.WaitGroup

	wmu       sync.Mutex // gorilla allows one writer at a time; WriteControl is safe alongside
	closeOnce sync.Once
	closing   atomic.Bool

	mu     sync.Mutex
	credit int
	wake   chan struct{} // a token when credit grew

	// Set by the open frame, on the reader goroutine.
	stream string
	st     *delivery.Stream
	tr     *delivery.Triage
	// proc measures a durable stream's events from send to settlement;
	// nil otherwise, and when telemetry is off.
	proc *telemetry.Processing
}

// run serves the connection until it closes, then ends the stream's
// session (which requeues what it did not settle).
func (s *session) run(ctx context.Context, goingAway <-chan struct{}) {
	s.ctx, s.cancel = context.WithCancel(ctx)
	defer func() {
		s.cancel()
		_ = s.conn.Close()
		s.pumps.Wait()
		if s.st != nil {
			_ = s.st.Close(context.WithoutCancel(ctx))
		}
	}()
	s.conn.SetReadLimit(wsframe.MaxFrameBytes)
	s.alive()
	s.conn.SetPongHandler(func(string) error { s.alive(); return nil })
	s.conn.SetCloseHandler(func(int, string) error {
		// The client closed: answer 1000 and stop reading.
		s.close(wsframe.CloseNormal, "")
		return nil
	})
	go s.keepAlive(goingAway)
	s.read()
}

// alive moves the read deadline: the client has two ping intervals to
// send something (a pong counts). Once the server has sent its close
// frame the shorter close deadline stands.
func (s *session) alive() {
	if !s.closing.Load() {
		_ = s.conn.SetReadDeadline(time.Now().Add(2 * s.ping))
	}
}

// keepAlive pings every interval and closes with 1001 when the server
// shuts down.
func (s *session) keepAlive(goingAway <-chan struct{}) {
	t := time.NewTicker(s.ping)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-goingAway:
			s.close(wsframe.CloseGoingAway, "server shutting down")
			return
		case <-t.C:
			// A failed ping needs no handling here: the read deadline
			// ends a connection that stopped answering.
			_ = s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.writeWait))
		}
	}
}

// close sends a close frame once and gives the client closeWait to
// answer it; the reader then ends the connection.
func (s *session) close(code int, text string) {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(s.writeWait))
		_ = s.conn.SetReadDeadline(time.Now().Add(closeWait))
	})
}

// send writes one frame. A failed write (the client stopped reading for
// s.writeWait, or the connection is gone) ends the connection.
func (s *session) send(f *wsframe.ServerFrame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.writeWait))
	if err := s.conn.WriteMessage(websocket.TextMessage, f.Encode()); err != nil {
		s.cancel()
		_ = s.conn.Close()
		return err
	}
	return nil
}

var _ wsframe.Conn = (*session)(nil)

// Stream is the open stream's kind, "" before open (wsframe.Conn).
func (s *session) Stream() string { return s.stream }

// Fail sends a fatal error frame for err and closes with its close code.
func (s *session) Fail(_ context.Context, id string, err error) {
	f := wsframe.Error(id, err, true)
	if f.StatusCode >= 500 {
		s.log.Error("websocket stream failed", "stream", s.stream, "err", logredact.String(err.Error()))
	}
	_ = s.send(f)
	s.close(wsframe.CloseCode(f.StatusCode), f.Code)
}

// Refuse answers a frame with a non-fatal error frame.
func (s *session) Refuse(_ context.Context, id string, err error) {
	_ = s.send(wsframe.Error(id, err, false))
}

// Ping answers a ping frame.
func (s *session) Ping(_ context.Context, f *wsframe.ClientFrame) { _ = s.send(wsframe.Pong(f.ID)) }

// read reads frames until the connection ends: the client closed, the
// read deadline passed, the frame limit was passed (gorilla has sent 1009)
// or the server closed.
func (s *session) read() {
	for {
		kind, data, err := s.conn.ReadMessage()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !s.closing.Load() {
				// Nothing for two ping intervals: the client is gone or
				// stuck. Tell it (best effort) and drop it.
				s.close(wsframe.CloseGoingAway, "no pong or frame for two ping intervals")
			}
			return
		}
		s.alive()
		if s.closing.Load() {
			continue // only the client's close answer matters now
		}
		if kind != websocket.TextMessage {
			s.Refuse(s.ctx, "", wsframe.ErrBinary)
			continue
		}
		if !utf8.Valid(data) {
			// RFC 6455 §8.1: a text message that is not UTF-8 fails the
			// connection with 1007 (gorilla does not check).
			s.close(websocket.CloseInvalidFramePayloadData, "text frame is not valid UTF-8")
			continue
		}
		f, err := wsframe.Decode(data)
		wsframe.Dispatch(s.ctx, s, f, err)
	}
}

// Open opens the stream the frame names and starts pushing.
func (s *session) Open(_ context.Context, f *wsframe.ClientFrame) {
	switch f.Stream {
	case wsframe.StreamDeadLetters:
		tr, err := s.svc.NewTriage(s.p)
		if err != nil {
			s.Fail(s.ctx, f.ID, err)
			return
		}
		s.stream, s.tr = f.Stream, tr
		if s.send(wsframe.Connected(f.ID, f.Stream, "")) == nil {
			s.start(s.browse)
		}
	default:
		st, err := s.svc.OpenStream(s.ctx, s.p, f.StreamRequest())
		if err != nil {
			s.Fail(s.ctx, f.ID, err)
			return
		}
		s.stream, s.st = f.Stream, st
		if f.Stream == wsframe.StreamDurable {
			s.proc = telemetry.NewProcessing(s.ctx)
		}
		if s.send(wsframe.Connected(f.ID, f.Stream, st.QueueID())) == nil {
			s.start(s.push)
		}
	}
}

// start runs a pump until it ends; a pump's error is fatal.
func (s *session) start(pump func() error) {
	s.pumps.Add(1)
	go func() {
		defer s.pumps.Done()
		if err := pump(); err != nil && s.ctx.Err() == nil {
			s.Fail(s.ctx, "", err)
		}
	}()
}

// Demand adds credit (docs/websocket.md, "Flow control").
func (s *session) Demand(_ context.Context, f *wsframe.ClientFrame) {
	s.mu.Lock()
	if s.credit+f.N > wsframe.MaxCredit {
		held := s.credit
		s.mu.Unlock()
		s.Refuse(s.ctx, f.ID, herr.New(herr.InvalidArgument, "demand would raise the credit past %d (it holds %d); nothing changed", wsframe.MaxCredit, held))
		return
	}
	s.credit += f.N
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// waitCredit blocks until the connection holds credit; false when the
// connection or the session (lost, if done is a stream's) ended first.
func (s *session) waitCredit(done <-chan struct{}) bool {
	for {
		s.mu.Lock()
		n := s.credit
		s.mu.Unlock()
		if n > 0 {
			return true
		}
		select {
		case <-s.ctx.Done():
			return false
		case <-done:
			return false
		case <-s.wake:
		}
	}
}

// take takes up to n credit and returns how much it took. Only the pump
// takes, so credit seen by waitCredit is still there.
func (s *session) take(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, s.credit)
	s.credit -= n
	return n
}

// push sends the stream's events against credit until the connection
// ends (nil) or the session is lost (its error).
func (s *session) push() error {
	var held []delivery.Delivery // leased to this session, beyond the credit
	for {
		if !s.waitCredit(s.st.Done()) {
			return s.st.Err() // nil when the connection ended
		}
		if len(held) == 0 {
			ds, err := s.st.Next(s.ctx)
			if err != nil {
				if serr := s.st.Err(); serr != nil {
					return serr
				}
				if s.ctx.Err() != nil {
					return nil
				}
				return err
			}
			held = ds
		}
		n := s.take(len(held))
		// The batch's frames leave in as few TCP segments as fit
		// (internal/netcork), not one each.
		uncork := func() {}
		if n > 1 {
			uncork = netcork.Cork(s.conn.NetConn())
		}
		err := s.pushEach(held[:n])
		uncork()
		if err != nil {
			return err
		}
		held = held[n:]
	}
}

// pushEach sends the events of ds, which the session has credit for.
func (s *session) pushEach(ds []delivery.Delivery) error {
	for _, d := range ds {
		tag := d.Tag
		if s.stream == wsframe.StreamNonDurable {
			tag = 0 // acknowledged once written: nothing to settle
		}
		// Noted before the send: the client may settle it first.
		s.proc.Delivered(tag)
		if err := s.send(wsframe.Event(d, tag)); err != nil {
			return nil // the connection is gone; Close requeues the rest
		}
		if s.stream == wsframe.StreamNonDurable {
			// Written means acknowledged, even when the client closes
			// right after reading it: a cancelled ack would have it
			// delivered again on the next connection. run waits for
			// this before it closes the session.
			if _, err := s.st.Ack(context.WithoutCancel(s.ctx), d.Tag); err != nil && s.ctx.Err() == nil {
				return err
			}
		}
	}
	return nil
}

// browse shows dead letters against credit: it lists the queue when it
// holds credit, shows what it has not shown yet while credit lasts, and
// lists again at once when credit runs out and comes back, else every
// delivery.DeadLetterPoll.
func (s *session) browse() error {
	for {
		if !s.waitCredit(nil) {
			return nil
		}
		ds, err := s.tr.Unshown(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		ranOut := false
		for _, d := range ds {
			if s.take(1) == 0 {
				ranOut = true
				break
			}
			// Only this goroutine shows, and Unshown left out what was
			// shown: Show always issues a tag here.
			tag, _ := s.tr.Show(d)
			if err := s.send(wsframe.DeadLettered(d, tag)); err != nil {
				return nil
			}
		}
		if ranOut {
			continue
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-time.After(delivery.DeadLetterPoll):
		}
	}
}

// Settle acks or nacks a durable stream's tags (a nack after its delay,
// when it has one) and answers settled.
func (s *session) Settle(_ context.Context, f *wsframe.ClientFrame) {
	acks, nacks := f.Settlement()
	rep, err := s.st.SettleDelayed(s.ctx, acks, nacks, f.NackDelay())
	if err != nil {
		if serr := s.st.Err(); serr != nil || herr.CodeOf(err) == herr.NotFound {
			s.Fail(s.ctx, f.ID, err)
			return
		}
		// The store could not be reached: the tags stay unsettled and the
		// frame may be sent again.
		s.Refuse(s.ctx, f.ID, err)
		return
	}
	s.proc.Settled(s.ctx, acks, nacks)
	_ = s.send(wsframe.Settled(f.ID, rep))
}

// Extend keeps a durable stream's unsettled events of the frame's tags
// with it for the frame's seconds and answers extended. The tags stay
// unsettled (and count against the unsettled limit).
func (s *session) Extend(_ context.Context, f *wsframe.ClientFrame) {
	rep, err := s.st.Extend(s.ctx, f.DeliveryTags, f.ExtendBy())
	if err != nil {
		if serr := s.st.Err(); serr != nil || herr.CodeOf(err) == herr.NotFound {
			s.Fail(s.ctx, f.ID, err)
			return
		}
		s.Refuse(s.ctx, f.ID, err) // the store could not be reached: send it again
		return
	}
	_ = s.send(wsframe.Extended(f.ID, rep))
}

// Act runs a dead_letters stream's actions: one outcome frame per action,
// in order.
func (s *session) Act(_ context.Context, f *wsframe.ClientFrame) {
	outs, err := s.tr.Act(s.ctx, f.TriageActions())
	if err != nil {
		s.Refuse(s.ctx, f.ID, err)
		return
	}
	for _, o := range outs {
		if s.send(wsframe.Outcome(f.ID, o)) != nil {
			return
		}
	}
}
