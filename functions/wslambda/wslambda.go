// Package wslambda is Herald's WebSocket bridge on AWS: the Lambda
// integration of an API Gateway WebSocket API with the routes $connect,
// $disconnect and $default. It speaks the frame protocol of package
// functions/wsframe (docs/websocket.md), like the gorilla/websocket bridge
// of the local adapter and Cloud Run (package functions/wsbridge), with
// the differences API Gateway imposes, said below.
//
// # Stateless
//
// API Gateway holds the socket; the function runs once per event and keeps
// nothing between them. Everything a connection needs lives in its
// connection record in the lease store (leasestore.Connection, key the
// API Gateway connectionId), as JSON (State): the principal, the stream
// kind, the stream session (delivery.SessionState: queue, session id,
// delivery tags) or the dead-letter triage tags. Two instances sharing the
// store behave as one: API Gateway may run the frames of one connection
// concurrently, so every change of the record is a revision-conditional
// write, retried on a lost race (herr.Aborted) by re-reading the record
// and re-applying the change to the fresh state. The state is written
// BEFORE events are posted to the client, so a crash between leaves
// events tagged and leased, to return to the queue when the session ends
// or lapses: a duplicate, never a loss.
//
// # Routes
//
// $connect authenticates the bearer token of the Authorization header, or
// of the access_token query parameter (browsers cannot set headers on a
// WebSocket); a missing or unknown token refuses the handshake with 401
// (the token is never echoed or logged). The principal (id and
// permissions) is stored in the record: a change of its permissions takes
// effect when the client reconnects. The subprotocol wsframe.Subprotocol
// is selected when the client offers it.
//
// $default takes one frame. open opens the stream (delivery.OpenSession,
// with SessionTTL) and answers connected; demand n is answered by ONE
// bounded pull of up to n events (delivery.PollSession, waiting at most
// PollWait at the broker), the event frames it found, then — when it found
// fewer than n — an idle frame {"type":"idle","unmet":N}. Unlike the
// gorilla bridge, credit is not held: the client sends demand again when
// it wants more (after idle, at once or after a pause of its choosing).
// ack and nack settle tags and answer settled; actions (dead_letters)
// answer one outcome per action; ping answers pong. Non-durable events
// carry no tag and are acknowledged once posted.
//
// $disconnect ends the session (delivery.CloseSession: unsettled events
// return to the queue, to be delivered again) and deletes the record.
//
// # Errors and closing
//
// A frame that fits no state, or that wsframe.Decode refuses, is answered
// by a non-fatal error frame. Failures to open a stream (and an open frame
// Decode refuses) and a lost session (the queue is gone, herr.NotFound; or
// the session was taken away or lapsed, herr.Internal with
// delivery.ConsumerCancelledMessage) are fatal: the error frame is posted,
// then the connection is deleted through the management API. API Gateway
// cannot send a chosen close code, so the client sees a plain close (1000,
// or 1006 depending on the client) after the fatal error frame, not
// wsframe.CloseCode(status): it must read the error frame's status_code.
//
// A session stays attached for SessionTTL (HERALD_WS_SESSION_TTL, 10
// minutes: API Gateway's idle timeout) after the client's last demand,
// ack, nack or ping frame. A client silent for longer gets the "broker
// cancelled" fatal error on its next frame and reconnects with its token (the reconnect
// token or queue_id; its unsettled events are delivered again). API
// Gateway closes idle connections after 10 minutes and every connection
// after 2 hours; a frame larger than wsframe.MaxFrameBytes is a fatal 422.
package wslambda

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Defaults of Config (the deployment sets them with HERALD_WS_POLL_WAIT
// and HERALD_WS_SESSION_TTL; package functions/config has the table).
const (
	DefaultPollWait   = 5 * time.Second
	DefaultSessionTTL = 10 * time.Minute
	// DemandBudget bounds the time one demand frame spends pulling (it
	// pulls again without waiting while the pulls come back full, up to
	// n), inside API Gateway's 29-second integration timeout.
	DemandBudget = 20 * time.Second
	// AccessTokenParam is the query parameter a browser sends its token in.
	AccessTokenParam = "access_token"
	// maxCASAttempts bounds the conditional-write retries of one change.
	maxCASAttempts = 20
)

// Poster is the part of the management API the handler uses
// (apigwmgmt.Client).
type Poster interface {
	PostToConnection(ctx context.Context, connectionID string, data []byte) error
	DeleteConnection(ctx context.Context, connectionID string) error
}

// Endpoints returns the Poster of the management API endpoint a WebSocket
// event names (apigwmgmt.Factory.For, adapted by FactoryEndpoints).
type Endpoints func(domainName, stage string) (Poster, error)

// FactoryEndpoints adapts an apigwmgmt.Factory.
func FactoryEndpoints(f *apigwmgmt.Factory) Endpoints {
	return func(domainName, stage string) (Poster, error) { return f.For(domainName, stage) }
}

// Config configures a Handler.
type Config struct {
	// Service is the core; Store the lease store it uses (for the
	// connection records).
	Service *delivery.Service
	Store   *leasestore.Store
	// Auth resolves bearer tokens (config.Config.Authenticator).
	Auth auth.Authenticator
	// Endpoints gives the management API client of an event.
	Endpoints Endpoints
	// PollWait is how long one demand frame's pull waits at the broker
	// (≤ 0: not at all). The bootstrap passes HERALD_WS_POLL_WAIT, whose
	// default is DefaultPollWait.
	PollWait time.Duration
	// SessionTTL is how long a session stays attached without a demand,
	// ack, nack or ping frame (default DefaultSessionTTL).
	SessionTTL time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Handler handles the events of one API Gateway WebSocket API.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// New returns a Handler. A zero SessionTTL is DefaultSessionTTL; PollWait
// is taken as given (0 = answer at once).
func New(cfg Config) *Handler {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.PollWait < 0 {
		cfg.PollWait = 0
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Handler{cfg: cfg, log: log}
}

// Principal is a stored principal: what authorizes the connection's
// frames until it reconnects.
type Principal struct {
	ID          string   `json:"id"`
	Permissions []string `json:"permissions"`
}

// State is a connection record's Data, as JSON.
type State struct {
	Principal Principal `json:"principal"`
	// Stream is "" until an open frame opened one, then wsframe's stream
	// kind: non_durable, durable or dead_letters.
	Stream string `json:"stream,omitempty"`
	// Session is the event stream's session (non_durable, durable).
	Session *delivery.SessionState `json:"session,omitempty"`
	// DeadLetters is the triage bookkeeping of a dead_letters stream.
	DeadLetters *Triage `json:"dead_letters,omitempty"`
}

// Triage is the persisted bookkeeping of a dead_letters stream, the same
// rules as delivery's in-memory triage: every dead letter is shown once
// per connection with the next tag (1, 2, 3, …); a tag is retired when its
// dead letter is replayed or discarded.
type Triage struct {
	NextTag int64            `json:"next_tag"`
	Tags    map[int64]string `json:"tags"`  // tag → dead-letter id
	Shown   map[string]bool  `json:"shown"` // dead-letter ids shown
}

func (s *State) principal() *auth.Principal {
	return &auth.Principal{ID: s.Principal.ID, Permissions: s.Principal.Permissions}
}

// Handle handles one API Gateway WebSocket event. $connect answers 200
// or the refusal's status (401, 403, 503); $default and $disconnect
// always answer 200: a frame's outcome goes to the client as frames.
func (h *Handler) Handle(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
	switch ev.RequestContext.EventType {
	case "CONNECT":
		return h.connect(ctx, ev), nil
	case "DISCONNECT":
		h.disconnect(ctx, ev.RequestContext.ConnectionID)
		return ok(), nil
	case "MESSAGE":
		h.message(ctx, ev)
		return ok(), nil
	}
	return events.APIGatewayProxyResponse{}, errors.New("wslambda: not an API Gateway WebSocket event (requestContext.eventType must be CONNECT, MESSAGE or DISCONNECT)")
}

func ok() events.APIGatewayProxyResponse {
	return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}
}

// refusal is a $connect answer refusing the handshake.
func refusal(err error) events.APIGatewayProxyResponse {
	code := herr.CodeOf(err)
	b, _ := json.Marshal(httpx.ErrorBody{Code: code.String(), Message: herr.MessageOf(err)})
	return events.APIGatewayProxyResponse{
		StatusCode: httpx.Status(code), Body: string(b),
		Headers: map[string]string{"Content-Type": "application/json"},
	}
}

// header returns the values of header name, matched without regard to case.
func header(ev events.APIGatewayWebsocketProxyRequest, name string) []string {
	for k, vs := range ev.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs
		}
	}
	for k, v := range ev.Headers {
		if strings.EqualFold(k, name) {
			return []string{v}
		}
	}
	return nil
}

// bearerToken returns the token of the Authorization header, else of the
// access_token query parameter.
func bearerToken(ev events.APIGatewayWebsocketProxyRequest) (string, bool) {
	for _, h := range header(ev, "Authorization") {
		scheme, token, found := strings.Cut(h, " ")
		if found && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
			return strings.TrimSpace(token), true
		}
	}
	if vs := ev.MultiValueQueryStringParameters[AccessTokenParam]; len(vs) > 0 && vs[0] != "" {
		return vs[0], true
	}
	if t := ev.QueryStringParameters[AccessTokenParam]; t != "" {
		return t, true
	}
	return "", false
}

func (h *Handler) connect(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) events.APIGatewayProxyResponse {
	id := ev.RequestContext.ConnectionID
	token, found := bearerToken(ev)
	if !found {
		return refusal(herr.New(herr.Unauthenticated, "a bearer token is required: an Authorization: Bearer <token> header or the access_token query parameter"))
	}
	p, err := h.cfg.Auth.Authenticate(ctx, token)
	if err != nil {
		return refusal(err)
	}
	data, err := json.Marshal(&State{Principal: Principal{ID: p.ID, Permissions: p.Permissions}})
	if err != nil {
		return refusal(herr.Wrap(herr.Internal, err, "cannot encode the connection state"))
	}
	if _, err := h.cfg.Store.CreateConnection(ctx, id, data); err != nil {
		if herr.CodeOf(err) != herr.AlreadyExists {
			h.log.ErrorContext(ctx, "websocket connect: cannot store the connection", "connection", id, "err", err)
			return refusal(err)
		}
		// A repeated $connect of one id: start afresh.
		if err := h.cfg.Store.DeleteConnection(ctx, id); err != nil {
			return refusal(err)
		}
		if _, err := h.cfg.Store.CreateConnection(ctx, id, data); err != nil {
			return refusal(err)
		}
	}
	res := ok()
	for _, v := range header(ev, "Sec-WebSocket-Protocol") {
		for _, offered := range strings.Split(v, ",") {
			if strings.TrimSpace(offered) == wsframe.Subprotocol {
				res.Headers = map[string]string{"Sec-WebSocket-Protocol": wsframe.Subprotocol}
			}
		}
	}
	h.log.InfoContext(ctx, "websocket connected", "connection", id, "principal", p.ID)
	return res
}

func (h *Handler) disconnect(ctx context.Context, id string) {
	c, err := h.cfg.Store.GetConnection(ctx, id)
	if err != nil {
		if herr.CodeOf(err) != herr.NotFound {
			h.log.WarnContext(ctx, "websocket disconnect: cannot read the connection; its session lapses after its TTL", "connection", id, "err", err)
		}
		return
	}
	if st, err := decodeState(c); err == nil && st.Session != nil {
		if err := h.cfg.Service.CloseSession(ctx, st.Session); err != nil {
			h.log.WarnContext(ctx, "websocket disconnect: detach failed; the session's events return once its TTL lapses", "connection", id, "err", err)
		}
	}
	if err := h.cfg.Store.DeleteConnection(ctx, id); err != nil {
		h.log.WarnContext(ctx, "websocket disconnect: cannot delete the connection record; the reaper will", "connection", id, "err", err)
	}
}

// StaleAfter is the age past which a connection record is stale: API
// Gateway ends every connection after 2 hours, and a record is written
// when its connection opens, so a live connection's record is never
// older (no keep-alive write is needed); 5 minutes more allow for clock
// differences.
const StaleAfter = 2*time.Hour + 5*time.Minute

// CloseStale deletes the connection records not written for StaleAfter
// (delivery.Service.ReapConnections, as p, which needs run:jobs) and ends
// their sessions, so their unsettled events return to the queue at once
// rather than when the session TTL lapses. It returns how many records it
// removed; the reap-idle-queues job calls it.
func CloseStale(ctx context.Context, svc *delivery.Service, p *auth.Principal) (int, error) {
	cs, err := svc.ReapConnections(ctx, p, StaleAfter)
	for _, c := range cs {
		if st, derr := decodeState(c); derr == nil && st.Session != nil {
			_ = svc.CloseSession(ctx, st.Session)
		}
	}
	return len(cs), err
}

func decodeState(c *leasestore.Connection) (*State, error) {
	var st State
	if err := json.Unmarshal(c.Data, &st); err != nil {
		return nil, herr.Wrap(herr.Internal, err, "the connection record does not hold a connection state")
	}
	return &st, nil
}

// conn is one $default invocation's view of its connection.
type conn struct {
	h    *Handler
	id   string
	post Poster
	rec  *leasestore.Connection
	st   *State
}

func (h *Handler) message(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) {
	rc := ev.RequestContext
	post, err := h.cfg.Endpoints(rc.DomainName, rc.Stage)
	if err != nil {
		h.log.ErrorContext(ctx, "websocket frame: no management API endpoint", "connection", rc.ConnectionID, "err", err)
		return
	}
	c := &conn{h: h, id: rc.ConnectionID, post: post}
	rec, err := h.cfg.Store.GetConnection(ctx, c.id)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			c.fatal("", herr.New(herr.NotFound, "this connection is not known (its $connect was not completed, or it was reaped): reconnect"))
			return
		}
		c.refuse("", err)
		return
	}
	st, err := decodeState(rec)
	if err != nil {
		c.fatal("", err)
		return
	}
	c.rec, c.st = rec, st
	if ev.IsBase64Encoded {
		c.refuse("", herr.New(herr.Malformed, "frames are JSON text messages, not binary"))
		return
	}
	if len(ev.Body) > wsframe.MaxFrameBytes {
		c.fatal("", herr.New(herr.InvalidArgument, "a frame must be at most %d bytes", wsframe.MaxFrameBytes))
		return
	}
	f, err := wsframe.Decode([]byte(ev.Body))
	if err != nil {
		if f != nil && f.Type == wsframe.TypeOpen {
			c.fatal(f.ID, err)
			return
		}
		id := ""
		if f != nil {
			id = f.ID
		}
		c.refuse(id, err)
		return
	}
	switch f.Type {
	case wsframe.TypePing:
		// A ping is an idle client's keep-alive (browsers cannot send
		// WebSocket pings): it keeps the stream's session attached too.
		if !c.touch(ctx, f.ID) {
			return
		}
		c.send(wsframe.Pong(f.ID))
	case wsframe.TypeOpen:
		c.open(ctx, f)
	case wsframe.TypeDemand:
		c.demand(ctx, f)
	case wsframe.TypeAck, wsframe.TypeNack:
		c.settle(ctx, f)
	case wsframe.TypeActions:
		c.act(ctx, f)
	}
}

// send posts one frame; false when the client is gone or the post failed
// (logged).
func (c *conn) send(f *wsframe.ServerFrame) bool { return c.sendErr(f) == nil }

// sendErr posts one frame and returns the management API's error
// (apigwmgmt.ErrGone when the client left).
func (c *conn) sendErr(f *wsframe.ServerFrame) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.post.PostToConnection(ctx, c.id, f.Encode())
	if err != nil && !errors.Is(err, apigwmgmt.ErrGone) {
		c.h.log.Warn("websocket: posting a frame failed", "connection", c.id, "type", f.Type, "err", err)
	}
	return err
}

// refuse answers a frame with a non-fatal error frame.
func (c *conn) refuse(id string, err error) { c.send(wsframe.Error(id, err, false)) }

// fatal posts a fatal error frame, then deletes the connection; its
// $disconnect ends the session and removes the record.
func (c *conn) fatal(id string, err error) {
	if herr.CodeOf(err) == herr.Unknown || herr.CodeOf(err) == herr.Internal {
		c.h.log.Warn("websocket stream failed", "connection", c.id, "err", err)
	}
	c.send(wsframe.Error(id, err, true))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.post.DeleteConnection(ctx, c.id); err != nil && !errors.Is(err, apigwmgmt.ErrGone) {
		c.h.log.Warn("websocket: deleting the connection failed", "connection", c.id, "err", err)
	}
}

// update applies change to the connection's state and writes it
// conditionally; when another invocation wrote first it re-reads the
// record and applies change again to the fresh state. change may refuse
// (its error is returned and nothing is written). On success c.rec and
// c.st are the written record and state.
func (c *conn) update(ctx context.Context, change func(st *State) error) error {
	for attempt := 0; ; attempt++ {
		if err := change(c.st); err != nil {
			return err
		}
		data, err := json.Marshal(c.st)
		if err != nil {
			return herr.Wrap(herr.Internal, err, "cannot encode the connection state")
		}
		if len(data) > leasestore.MaxConnectionData {
			return herr.New(herr.ResourceExhausted, "the connection's state is full (%d bytes): settle events, or reconnect", len(data))
		}
		c.rec.Data = data
		err = c.h.cfg.Store.UpdateConnection(ctx, c.rec)
		if err == nil {
			return nil
		}
		if herr.CodeOf(err) != herr.Aborted || attempt+1 >= maxCASAttempts {
			return err
		}
		rec, gerr := c.h.cfg.Store.GetConnection(ctx, c.id)
		if gerr != nil {
			return gerr
		}
		st, derr := decodeState(rec)
		if derr != nil {
			return derr
		}
		c.rec, c.st = rec, st
	}
}

var errAlreadyOpen = herr.New(herr.FailedPrecondition, "this connection already has a stream: one open frame per connection")

func (c *conn) open(ctx context.Context, f *wsframe.ClientFrame) {
	if c.st.Stream != "" {
		c.refuse(f.ID, errAlreadyOpen)
		return
	}
	p := c.st.principal()
	if f.Stream == wsframe.StreamDeadLetters {
		if err := p.Require(auth.PermInspectDeadLetters); err != nil {
			c.fatal(f.ID, err)
			return
		}
		err := c.update(ctx, func(st *State) error {
			if st.Stream != "" {
				return errAlreadyOpen
			}
			st.Stream = f.Stream
			st.DeadLetters = &Triage{Tags: map[int64]string{}, Shown: map[string]bool{}}
			return nil
		})
		if err != nil {
			c.refuse(f.ID, err)
			return
		}
		c.send(wsframe.Connected(f.ID, f.Stream, ""))
		return
	}
	sess, _, err := c.h.cfg.Service.OpenSession(ctx, p, f.StreamRequest(), c.h.cfg.SessionTTL)
	if err != nil {
		c.fatal(f.ID, err)
		return
	}
	err = c.update(ctx, func(st *State) error {
		if st.Stream != "" {
			return errAlreadyOpen
		}
		st.Stream, st.Session = f.Stream, sess
		return nil
	})
	if err != nil {
		// Another frame opened first, or the record cannot be written:
		// this session is nobody's.
		_ = c.h.cfg.Service.CloseSession(ctx, sess)
		if err == errAlreadyOpen {
			c.refuse(f.ID, err)
		} else {
			c.fatal(f.ID, err)
		}
		return
	}
	c.send(wsframe.Connected(f.ID, f.Stream, sess.Queue))
}

// lost reports whether err means the session is gone for good.
func lost(err error) bool {
	switch herr.CodeOf(err) {
	case herr.NotFound, herr.Internal:
		return true
	}
	return false
}

func (c *conn) demand(ctx context.Context, f *wsframe.ClientFrame) {
	switch c.st.Stream {
	case "":
		c.refuse(f.ID, herr.New(herr.FailedPrecondition, "send an open frame first"))
		return
	case wsframe.StreamDeadLetters:
		c.demandDeadLetters(ctx, f)
		return
	}
	p := c.st.principal()
	deadline := time.Now().Add(DemandBudget)
	sent, wait := 0, c.h.cfg.PollWait
	for sent < f.N && time.Now().Before(deadline) {
		want := f.N - sent
		ds, err := c.h.cfg.Service.PollSession(ctx, p, c.st.Session, want, wait, c.h.cfg.SessionTTL)
		if err != nil {
			if lost(err) {
				c.fatal(f.ID, err)
			} else {
				c.refuse(f.ID, err)
			}
			return
		}
		if len(ds) == 0 {
			break
		}
		// Tag and persist before anything is posted.
		err = c.update(ctx, func(st *State) error {
			if st.Session == nil {
				return herr.New(herr.FailedPrecondition, "the stream was closed")
			}
			st.Session.Tag(ds)
			return nil
		})
		if err != nil {
			// The events stay leased to the session, untagged: they return
			// to the queue when it ends or lapses.
			c.refuse(f.ID, err)
			return
		}
		durable := c.st.Stream == wsframe.StreamDurable
		var posted []delivery.Delivery
		for _, d := range ds {
			tag := d.Tag
			if !durable {
				tag = 0 // acknowledged once posted: nothing to settle
			}
			if err := c.sendErr(wsframe.Event(d, tag)); err != nil {
				if errors.Is(err, apigwmgmt.ErrGone) {
					// The client left: its $disconnect ends the session,
					// which returns what it did not settle to the queue.
					return
				}
				if durable {
					// Too big for API Gateway, or the client left: the
					// tag stays unsettled; the client may nack it.
					c.refuse(f.ID, herr.New(herr.ResourceExhausted, "event with delivery_tag %d could not be posted to this connection (API Gateway messages are at most 128 KB); nack it to return it to the queue", d.Tag))
				}
				continue
			}
			posted = append(posted, d)
		}
		if !durable {
			if err := c.h.cfg.Service.AckDeliveries(ctx, c.st.Session, posted); err != nil {
				c.refuse(f.ID, err)
				return
			}
		}
		sent += len(ds)
		if len(ds) < want {
			break
		}
		wait = 0 // more may be there: look again at once
	}
	if sent < f.N {
		c.send(wsframe.Idle(f.N - sent))
	}
}

func (c *conn) demandDeadLetters(ctx context.Context, f *wsframe.ClientFrame) {
	p := c.st.principal()
	var unshown []*leasestore.DeadLetter
	token := ""
	for len(unshown) < f.N {
		page, next, err := c.h.cfg.Service.ListDeadLetters(ctx, p, delivery.MaxDeadLetterPage, token)
		if err != nil {
			c.refuse(f.ID, err)
			return
		}
		for _, d := range page {
			if !c.st.DeadLetters.Shown[d.ID] && len(unshown) < f.N {
				unshown = append(unshown, d)
			}
		}
		if token = next; token == "" {
			break
		}
	}
	tags := map[string]int64{}
	err := c.update(ctx, func(st *State) error {
		clear(tags)
		tr := st.DeadLetters
		for _, d := range unshown {
			if tr.Shown[d.ID] {
				continue // a concurrent frame showed it
			}
			tr.Shown[d.ID] = true
			tr.NextTag++
			tr.Tags[tr.NextTag] = d.ID
			tags[d.ID] = tr.NextTag
		}
		return nil
	})
	if err != nil {
		c.refuse(f.ID, err)
		return
	}
	sent := 0
	for _, d := range unshown {
		if tag, ok := tags[d.ID]; ok {
			c.send(wsframe.DeadLettered(d, tag))
			sent++
		}
	}
	if sent < f.N {
		c.send(wsframe.Idle(f.N - sent))
	}
}

func (c *conn) settle(ctx context.Context, f *wsframe.ClientFrame) {
	if c.st.Stream != wsframe.StreamDurable {
		c.refuse(f.ID, herr.New(herr.FailedPrecondition, "only a durable stream's events are settled: %s frames do not apply to a %s stream", f.Type, orNone(c.st.Stream)))
		return
	}
	var acks, nacks []int64
	if f.Type == wsframe.TypeAck {
		acks = f.DeliveryTags
	} else {
		nacks = f.DeliveryTags
	}
	if !c.touch(ctx, f.ID) {
		return
	}
	var ackRefs, nackRefs []leasestore.EventRef
	var taken map[int64]leasestore.EventRef
	var rep delivery.SettleReport
	err := c.update(ctx, func(st *State) error {
		ackRefs, nackRefs, taken, rep = st.Session.Take(acks, nacks)
		return nil
	})
	if err != nil {
		c.refuse(f.ID, err)
		return
	}
	final, err := c.h.cfg.Service.SettleRefs(ctx, c.st.Session, ackRefs, nackRefs, rep)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			c.fatal(f.ID, err)
			return
		}
		// Put the tags back so that the frame may be sent again.
		if uerr := c.update(ctx, func(st *State) error { st.Session.Untake(taken); return nil }); uerr != nil {
			c.h.log.Warn("websocket: cannot restore tags after a failed settle; they return to the queue when the session ends", "connection", c.id, "err", uerr)
		}
		c.refuse(f.ID, err)
		return
	}
	c.send(wsframe.Settled(f.ID, final))
}

// touch refreshes the stream session, if one is open, so that any frame
// (not only demand) keeps it attached. A session or queue that is gone is
// fatal (false); other failures are logged: the next frame tries again.
func (c *conn) touch(ctx context.Context, id string) bool {
	if c.st.Session == nil {
		return true
	}
	err := c.h.cfg.Service.TouchSession(ctx, c.st.Session, c.h.cfg.SessionTTL)
	if err != nil && lost(err) {
		c.fatal(id, err)
		return false
	}
	if err != nil {
		c.h.log.WarnContext(ctx, "websocket: session refresh failed", "connection", c.id, "err", err)
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "not yet opened"
	}
	return s
}

func (c *conn) act(ctx context.Context, f *wsframe.ClientFrame) {
	if c.st.Stream != wsframe.StreamDeadLetters {
		c.refuse(f.ID, herr.New(herr.FailedPrecondition, "actions frames apply to a dead_letters stream only"))
		return
	}
	outs := make([]delivery.TriageOutcome, len(f.Actions))
	var reqs []delivery.DeadLetterRequest
	var index []int // reqs[k] is f.Actions[index[k]]
	for i, a := range f.Actions {
		outs[i] = delivery.TriageOutcome{DeliveryTag: a.DeliveryTag, Outcome: delivery.OutcomeLeft}
		action, _ := delivery.ParseDeadLetterAction(a.Action) // Decode checked it
		id, known := c.st.DeadLetters.Tags[a.DeliveryTag]
		if !known {
			outs[i].Detail = delivery.DetailUnknownTag
			continue
		}
		reqs = append(reqs, delivery.DeadLetterRequest{ID: id, Action: action})
		index = append(index, i)
	}
	var retired []int64
	if len(reqs) > 0 {
		res, err := c.h.cfg.Service.ActOnDeadLetters(ctx, c.st.principal(), reqs)
		if err != nil {
			c.refuse(f.ID, err)
			return
		}
		for k, r := range res {
			o := &outs[index[k]]
			o.Outcome, o.Detail = r.Outcome, r.Detail
			if r.Outcome == delivery.OutcomeReplayed || r.Outcome == delivery.OutcomeDiscarded {
				retired = append(retired, o.DeliveryTag)
			}
		}
	}
	if len(retired) > 0 {
		err := c.update(ctx, func(st *State) error {
			for _, tag := range retired {
				delete(st.DeadLetters.Tags, tag)
			}
			return nil
		})
		if err != nil {
			c.h.log.Warn("websocket: cannot retire dead-letter tags; acting on them again finds nothing", "connection", c.id, "err", err)
		}
	}
	for _, o := range outs {
		if !c.send(wsframe.Outcome(f.ID, o)) {
			return
		}
	}
}
