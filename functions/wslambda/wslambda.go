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
// with SessionTTL) and answers connected; demand n is answered by a
// bounded pull of up to n events (delivery.PollSession, waiting at most
// PollWait at the broker; pulled again at once, 100 events at a time, as
// long as pulls find events, within DemandBudget), the event frames it
// found, then — when it found fewer than n — an idle frame
// {"type":"idle","unmet":N}. Events it could not post (the management API
// throttled or failed past PostAttempts, or the invocation's deadline
// less PostMargin came) are handed back: their tags taken out of the
// state and their leases nacked, to be delivered again at once. A demand,
// ack, nack or actions frame that finds no stream waits up to OpenWait
// for a concurrent open before it is refused. Unlike the
// gorilla bridge, credit is not held: the client sends demand again when
// it wants more (after idle, at once or after a pause of its choosing).
// ack and nack settle tags and answer settled; actions (dead_letters)
// answer one outcome per action; ping answers pong. Non-durable events
// carry no tag and are acknowledged once posted.
//
// $disconnect ends the session (delivery.CloseSession: unsettled events
// return to the queue, to be delivered again) and deletes the record if
// it is unchanged since read (leasestore.DeleteConnectionIfUnchanged);
// when an open wrote it meanwhile, that session is ended too. A repeated
// $connect of one id does the same before it stores the new record.
//
// Log lines never print a non-durable queue's id (its reconnect token):
// it is shortened (delivery.RedactQueue) in the queue attribute and cut
// out of logged error texts.
//
// # Errors and closing
//
// A frame that fits no state, or that wsframe.Decode refuses, is answered
// by a non-fatal error frame. Failures to open a stream (and an open frame
// Decode refuses, unless a stream is open: a second open is a non-fatal
// 409) and a lost session (the queue is gone, herr.NotFound; or the
// session was taken away or lapsed, herr.Internal with
// delivery.ConsumerCancelledMessage; other internal errors are not) are
// fatal: the error frame is posted,
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
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

// Defaults of Config (the deployment sets them with HERALD_WS_POLL_WAIT
// and HERALD_WS_SESSION_TTL; package functions/config has the table).
const (
	DefaultPollWait   = config.DefaultWSPollWait
	DefaultSessionTTL = config.DefaultWSSessionTTL
	// DemandBudget bounds the time one demand frame spends pulling (it
	// pulls again without waiting while the pulls come back full, up to
	// n), inside API Gateway's 29-second integration timeout.
	DemandBudget = 20 * time.Second
	// IntegrationTimeout is API Gateway's integration timeout (29 s): the
	// deadline assumed for an invocation whose context has none.
	IntegrationTimeout = 29 * time.Second
	// PostMargin is how long before the invocation's deadline a demand
	// stops pulling and posting events, so that it still hands back (nacks)
	// what it did not post and answers idle in time.
	PostMargin = 4 * time.Second
	// FinalMargin is how long before the invocation's deadline every post
	// (the last answers included) is cut off.
	FinalMargin = time.Second
	// PostTimeout bounds one PostToConnection call.
	PostTimeout = 10 * time.Second
	// PostAttempts is how often a post answered 429 or 5xx (or not
	// answered: herr.Unavailable) is tried, with a pause of 50 ms, then
	// 100 ms, …, while the time budget allows.
	PostAttempts = 4
	// OpenWait is how long a demand, ack, nack or actions frame that finds
	// no stream open waits (re-reading the record) for an open frame of
	// the same connection handled concurrently, before it is refused with
	// 409.
	OpenWait = 2 * time.Second
	// DefaultMaxTriageTags is the default of Config.MaxTriageTags.
	DefaultMaxTriageTags = 1000
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
	// Auth resolves bearer tokens (app.App.Authenticator: static tokens, then JWTs).
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
	// MaxTriageTags is how many dead letters a dead_letters stream holds
	// shown and not replayed or discarded (its tags; LEFT ones included):
	// at the cap a demand is answered idle until actions retire some. It
	// bounds the connection record (leasestore.MaxConnectionData). ≤ 0:
	// DefaultMaxTriageTags.
	MaxTriageTags int
}

// Handler handles the events of one API Gateway WebSocket API.
type Handler struct {
	cfg Config
	log *slog.Logger

	// writeHook, when set (tests), replaces the store's UpdateConnection
	// in conn.update.
	writeHook func(ctx context.Context, store *leasestore.Store, rec *leasestore.Connection) error
	// beforeDisconnectDelete, when set (tests), runs in $disconnect
	// between reading the record and deleting it.
	beforeDisconnectDelete func()
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
	if cfg.MaxTriageTags <= 0 {
		cfg.MaxTriageTags = DefaultMaxTriageTags
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
	// Writes are the ids of the last 8 writes of the record (an
	// invocation's API Gateway requestId and a count), so that an
	// invocation told its conditional write failed can see it landed and
	// not apply its change twice. Absent in records of older versions.
	Writes []string `json:"writes,omitempty"`
}

// Triage is the persisted bookkeeping of a dead_letters stream, the same
// rules as delivery's in-memory triage: every dead letter is shown once
// per connection with the next tag (1, 2, 3, …); a tag is retired when its
// dead letter is replayed or discarded. A dead letter counts as shown
// while a tag names it (or Shown does). Both shrink: retired tags go, and
// a demand whose listing of the dead-letter queue completed drops the ids
// no longer listed (replayed or discarded elsewhere, expired); at most
// Config.MaxTriageTags tags are held.
type Triage struct {
	NextTag int64            `json:"next_tag"`
	Tags    map[int64]string `json:"tags"` // tag → dead-letter id
	// Shown holds dead-letter ids shown, as records written before the
	// tags alone said so hold them; new writes add none.
	Shown map[string]bool `json:"shown"`
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
	for attempt := 0; ; attempt++ {
		_, err := h.cfg.Store.CreateConnection(ctx, id, data)
		if err == nil {
			break
		}
		if herr.CodeOf(err) != herr.AlreadyExists || attempt+1 >= maxCASAttempts {
			h.log.ErrorContext(ctx, "websocket connect: cannot store the connection", "connection", id, "code", herr.CodeOf(err).String(), "err", herr.MessageOf(err))
			return refusal(err)
		}
		// A repeated $connect of one id: end the old record's session and
		// start afresh.
		if err := h.closeRecord(ctx, id); err != nil {
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
	if err := h.closeRecord(ctx, id); err != nil {
		h.log.WarnContext(ctx, "websocket disconnect: cannot remove the connection record; its session lapses after its TTL and the reaper removes the record", "connection", id, "code", herr.CodeOf(err).String(), "err", herr.MessageOf(err))
	}
}

// closeRecord ends the session of connection record id, if it holds one,
// and deletes the record — only if it is unchanged since read: when
// another invocation wrote it meanwhile (an open attaching a session) it
// reads it again and ends that session too. A record that does not exist
// is not an error.
func (h *Handler) closeRecord(ctx context.Context, id string) error {
	closed := map[string]bool{}
	for attempt := 0; ; attempt++ {
		rec, err := h.cfg.Store.GetConnection(ctx, id)
		if err != nil {
			if herr.CodeOf(err) == herr.NotFound {
				return nil
			}
			return err
		}
		if st, err := decodeState(rec); err == nil && st.Session != nil && !closed[st.Session.Session] {
			closed[st.Session.Session] = true
			if err := h.cfg.Service.CloseSession(ctx, st.Session); err != nil {
				var secrets []string
				if st.Session.Kind == delivery.NonDurable {
					secrets = []string{st.Session.Queue}
				}
				h.log.WarnContext(ctx, "websocket: detach failed; the session's events return once its TTL lapses", "connection", id,
					"queue", delivery.RedactQueue(st.Session.Kind, st.Session.Queue), "code", herr.CodeOf(err).String(), "err", redactTokens(herr.MessageOf(err), secrets))
			}
		}
		if h.beforeDisconnectDelete != nil {
			h.beforeDisconnectDelete()
		}
		err = h.cfg.Store.DeleteConnectionIfUnchanged(ctx, rec)
		if err == nil || herr.CodeOf(err) != herr.Aborted || attempt+1 >= maxCASAttempts {
			return err
		}
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

	// writeID names this invocation's writes of the record (State.Writes);
	// writes counts them.
	writeID string
	writes  int
	// budgetEnd is when a demand stops pulling and posting events: at
	// most DemandBudget after the frame arrived, and PostMargin before
	// the invocation's deadline. hardEnd bounds every post: the
	// invocation's deadline less FinalMargin.
	budgetEnd, hardEnd time.Time
	// secrets are the reconnect tokens this invocation knows of (its
	// non-durable queue, the open frame's token): cut out of log lines.
	secrets []string
}

func (h *Handler) message(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) {
	rc := ev.RequestContext
	post, err := h.cfg.Endpoints(rc.DomainName, rc.Stage)
	if err != nil {
		h.log.ErrorContext(ctx, "websocket frame: no management API endpoint", "connection", rc.ConnectionID, "code", herr.CodeOf(err).String(), "err", herr.MessageOf(err))
		return
	}
	now := time.Now()
	end := now.Add(IntegrationTimeout)
	if d, ok := ctx.Deadline(); ok {
		end = d
	}
	c := &conn{
		h: h, id: rc.ConnectionID, post: post,
		writeID:   rc.RequestID,
		hardEnd:   end.Add(-FinalMargin),
		budgetEnd: minTime(now.Add(DemandBudget), end.Add(-PostMargin)),
	}
	if c.writeID == "" {
		c.writeID = uuid.NewString()
	}
	rec, err := h.cfg.Store.GetConnection(ctx, c.id)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			c.fatal(ctx, "", herr.New(herr.NotFound, "this connection is not known (its $connect was not completed, or it was reaped): reconnect"))
			return
		}
		c.refuse(ctx, "", err)
		return
	}
	st, err := decodeState(rec)
	if err != nil {
		c.fatal(ctx, "", err)
		return
	}
	c.setState(rec, st)
	if ev.IsBase64Encoded {
		c.refuse(ctx, "", herr.New(herr.Malformed, "frames are JSON text messages, not binary"))
		return
	}
	if len(ev.Body) > wsframe.MaxFrameBytes {
		c.fatal(ctx, "", herr.New(herr.InvalidArgument, "a frame must be at most %d bytes", wsframe.MaxFrameBytes))
		return
	}
	f, err := wsframe.Decode([]byte(ev.Body))
	if f != nil && f.Type == wsframe.TypeOpen && f.ReconnectToken != nil && *f.ReconnectToken != "" {
		c.secrets = append(c.secrets, *f.ReconnectToken)
	}
	if err != nil {
		id := ""
		if f != nil {
			id = f.ID
		}
		if f != nil && f.Type == wsframe.TypeOpen {
			if c.st.Stream != "" {
				// A second open, malformed or not, changes nothing: the
				// stream already open stays (docs/websocket.md).
				c.refuse(ctx, id, errAlreadyOpen)
				return
			}
			c.fatal(ctx, id, err)
			return
		}
		c.refuse(ctx, id, err)
		return
	}
	switch f.Type {
	case wsframe.TypeDemand, wsframe.TypeAck, wsframe.TypeNack, wsframe.TypeActions:
		if c.st.Stream == "" {
			c.awaitStream(ctx)
		}
	}
	switch f.Type {
	case wsframe.TypePing:
		// A ping is an idle client's keep-alive (browsers cannot send
		// WebSocket pings): it keeps the stream's session attached too.
		if !c.touch(ctx, f.ID) {
			return
		}
		c.send(ctx, wsframe.Pong(f.ID))
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

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// setState makes rec and st the invocation's view, noting a non-durable
// session's queue id as a secret.
func (c *conn) setState(rec *leasestore.Connection, st *State) {
	c.rec, c.st = rec, st
	if st.Session != nil && st.Session.Kind == delivery.NonDurable && st.Session.Queue != "" && !slices.Contains(c.secrets, st.Session.Queue) {
		c.secrets = append(c.secrets, st.Session.Queue)
	}
}

// awaitStream re-reads the record, with a growing pause, for at most
// OpenWait, until it holds a stream: API Gateway runs the frames of one
// connection concurrently, so a frame sent right after open may be
// handled before open's write landed.
func (c *conn) awaitStream(ctx context.Context) {
	deadline := time.Now().Add(OpenWait)
	pause := 25 * time.Millisecond
	for c.st.Stream == "" && time.Now().Add(pause).Before(deadline) {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		rec, err := c.h.cfg.Store.GetConnection(ctx, c.id)
		if err != nil {
			return
		}
		st, err := decodeState(rec)
		if err != nil {
			return
		}
		c.setState(rec, st)
		pause = min(pause*2, 400*time.Millisecond)
	}
}

// redact cuts the reconnect tokens c knows of out of s.
func (c *conn) redact(s string) string { return redactTokens(s, c.secrets) }

func redactTokens(s string, tokens []string) string {
	for _, t := range tokens {
		if t != "" {
			s = strings.ReplaceAll(s, t, delivery.RedactQueue(delivery.NonDurable, t))
		}
	}
	return s
}

// errAttrs are the attributes of a log line about err: its herr code, its
// caller-safe message, and its cause chain with the reconnect tokens c
// knows of cut out; plus the stream's queue (a non-durable queue by a
// prefix of its id, delivery.RedactQueue).
func (c *conn) errAttrs(err error) []any {
	attrs := []any{"connection", c.id, "code", herr.CodeOf(err).String(), "err", c.redact(herr.MessageOf(err)), "cause", c.redact(err.Error())}
	if c.st != nil && c.st.Session != nil {
		attrs = append(attrs, "queue", delivery.RedactQueue(c.st.Session.Kind, c.st.Session.Queue))
	}
	return attrs
}

// send posts one frame that answers the client (not an event): false when
// the client is gone or the post failed (logged).
func (c *conn) send(ctx context.Context, f *wsframe.ServerFrame) bool {
	return c.postFrame(ctx, f, c.hardEnd) == nil
}

// postFrame posts one frame before until, retrying a throttled or failed
// post (429, 5xx, unreachable: herr.Unavailable) with a short backoff
// while time is left, at most PostAttempts times. It returns the
// management API's last error (apigwmgmt.ErrGone when the client left);
// failures other than a gone client are logged.
func (c *conn) postFrame(ctx context.Context, f *wsframe.ServerFrame, until time.Time) error {
	data := f.Encode()
	pause := 50 * time.Millisecond
	var err error
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(PostTimeout), until))
		err = c.post.PostToConnection(pctx, c.id, data)
		cancel()
		if err == nil || errors.Is(err, apigwmgmt.ErrGone) {
			return err
		}
		if herr.CodeOf(err) != herr.Unavailable || attempt >= PostAttempts || !time.Now().Add(pause).Before(until) {
			break
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause *= 2
	}
	c.h.log.WarnContext(ctx, "websocket: posting a frame failed", append(c.errAttrs(err), "type", f.Type)...)
	return err
}

// tooLarge reports whether a post failed because the message is over API
// Gateway's limit (413, or apigwmgmt's own check before sending).
func tooLarge(err error) bool {
	var apiErr *apigwmgmt.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status == http.StatusRequestEntityTooLarge
	}
	return herr.CodeOf(err) == herr.InvalidArgument
}

// refuse answers a frame with a non-fatal error frame.
func (c *conn) refuse(ctx context.Context, id string, err error) {
	c.send(ctx, wsframe.Error(id, err, false))
}

// fatal posts a fatal error frame, then deletes the connection; its
// $disconnect ends the session and removes the record.
func (c *conn) fatal(ctx context.Context, id string, err error) {
	if herr.CodeOf(err) == herr.Unknown || herr.CodeOf(err) == herr.Internal {
		c.h.log.WarnContext(ctx, "websocket stream failed", c.errAttrs(err)...)
	}
	c.send(ctx, wsframe.Error(id, err, true))
	dctx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(PostTimeout), c.hardEnd))
	defer cancel()
	if err := c.post.DeleteConnection(dctx, c.id); err != nil && !errors.Is(err, apigwmgmt.ErrGone) {
		c.h.log.WarnContext(ctx, "websocket: deleting the connection failed", c.errAttrs(err)...)
	}
}

// maxWriteIDs is how many write ids State.Writes keeps.
const maxWriteIDs = 8

// update applies change to the connection's state and writes it
// conditionally; when another invocation wrote first it re-reads the
// record and applies change again to the fresh state. change may refuse
// (its error is returned and nothing is written). On success c.rec and
// c.st are the written record and state.
//
// Every write carries a write id of its own in State.Writes: when a write
// is reported lost (Aborted) although it landed (a store call retried
// after a timeout, whose retry then failed its condition), the re-read
// record carries that id, and the write counts as done — change is not
// applied a second time.
func (c *conn) update(ctx context.Context, change func(st *State) error) error {
	for attempt := 0; ; attempt++ {
		if err := change(c.st); err != nil {
			return err
		}
		c.writes++
		wid := fmt.Sprintf("%s/%d", c.writeID, c.writes)
		c.st.Writes = append(c.st.Writes, wid)
		if n := len(c.st.Writes); n > maxWriteIDs {
			c.st.Writes = slices.Clone(c.st.Writes[n-maxWriteIDs:])
		}
		data, err := json.Marshal(c.st)
		if err != nil {
			return herr.Wrap(herr.Internal, err, "cannot encode the connection state")
		}
		if len(data) > leasestore.MaxConnectionData {
			return herr.New(herr.ResourceExhausted, "the connection's state is full (%d bytes): settle events, or reconnect", len(data))
		}
		c.rec.Data = data
		write := c.h.cfg.Store.UpdateConnection
		if c.h.writeHook != nil {
			write = func(ctx context.Context, rec *leasestore.Connection) error {
				return c.h.writeHook(ctx, c.h.cfg.Store, rec)
			}
		}
		err = write(ctx, c.rec)
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
		c.setState(rec, st)
		if slices.Contains(st.Writes, wid) {
			return nil // our write landed after all
		}
	}
}

var errAlreadyOpen = herr.New(herr.FailedPrecondition, "this connection already has a stream: one open frame per connection")

func (c *conn) open(ctx context.Context, f *wsframe.ClientFrame) {
	if c.st.Stream != "" {
		c.refuse(ctx, f.ID, errAlreadyOpen)
		return
	}
	p := c.st.principal()
	if f.Stream == wsframe.StreamDeadLetters {
		if err := p.Require(auth.PermInspectDeadLetters); err != nil {
			c.fatal(ctx, f.ID, err)
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
			c.refuse(ctx, f.ID, err)
			return
		}
		c.send(ctx, wsframe.Connected(f.ID, f.Stream, ""))
		return
	}
	sess, _, err := c.h.cfg.Service.OpenSession(ctx, p, f.StreamRequest(), c.h.cfg.SessionTTL)
	if err != nil {
		c.fatal(ctx, f.ID, err)
		return
	}
	if sess.Kind == delivery.NonDurable {
		c.secrets = append(c.secrets, sess.Queue)
	}
	err = c.update(ctx, func(st *State) error {
		if st.Stream != "" {
			return errAlreadyOpen
		}
		st.Stream, st.Session = f.Stream, sess
		return nil
	})
	if err != nil {
		// Another frame opened first, or the record cannot be written (or
		// is gone: $disconnect came first): this session is nobody's.
		_ = c.h.cfg.Service.CloseSession(ctx, sess)
		if err == errAlreadyOpen {
			c.refuse(ctx, f.ID, err)
		} else {
			c.fatal(ctx, f.ID, err)
		}
		return
	}
	c.send(ctx, wsframe.Connected(f.ID, f.Stream, sess.Queue))
}

// lost reports whether err means the session is gone for good: the queue
// is gone (herr.NotFound), or the session was taken away or lapsed
// (herr.Internal with delivery.ConsumerCancelledMessage). Other failures,
// other internal errors included, leave the stream as it is.
func lost(err error) bool {
	switch herr.CodeOf(err) {
	case herr.NotFound:
		return true
	case herr.Internal:
		return herr.MessageOf(err) == delivery.ConsumerCancelledMessage
	}
	return false
}

func (c *conn) demand(ctx context.Context, f *wsframe.ClientFrame) {
	switch c.st.Stream {
	case "":
		c.refuse(ctx, f.ID, herr.New(herr.FailedPrecondition, "send an open frame first"))
		return
	case wsframe.StreamDeadLetters:
		c.demandDeadLetters(ctx, f)
		return
	}
	p := c.st.principal()
	deadline := c.budgetEnd
	durable := c.st.Stream == wsframe.StreamDurable
	sent, wait := 0, c.h.cfg.PollWait
	var postErr error // the first failed post (not too large, not gone)
	for sent < f.N && time.Now().Before(deadline) {
		// One pull has at most delivery.MaxPullLimit events (and, on a
		// durable stream, the unsettled room): pull again, without
		// waiting, as long as pulls find events, up to n.
		ds, err := c.h.cfg.Service.PollSession(ctx, p, c.st.Session, f.N-sent, min(wait, time.Until(deadline)), c.h.cfg.SessionTTL)
		if err != nil {
			if lost(err) {
				c.fatal(ctx, f.ID, err)
			} else {
				c.refuse(ctx, f.ID, err)
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
			// to the queue when it ends or lapses, or their ack timeout
			// passes.
			c.refuse(ctx, f.ID, err)
			return
		}
		var posted, unposted []delivery.Delivery
		gone := false
		for i, d := range ds {
			if postErr != nil || !time.Now().Before(deadline) {
				unposted = append(unposted, ds[i:]...)
				break
			}
			tag := d.Tag
			if !durable {
				tag = 0 // acknowledged once posted: nothing to settle
			}
			err := c.postFrame(ctx, wsframe.Event(d, tag), deadline)
			switch {
			case err == nil:
				posted = append(posted, d)
			case errors.Is(err, apigwmgmt.ErrGone):
				// The client left: hand back what it did not get; its
				// $disconnect ends the session.
				gone = true
				unposted = append(unposted, ds[i:]...)
			case durable && tooLarge(err):
				// It never fits: the tag stays for the client to nack
				// (after the delivery limit it is dead-lettered).
				c.refuse(ctx, f.ID, herr.New(herr.ResourceExhausted, "event with delivery_tag %d could not be posted to this connection (API Gateway messages are at most 128 KB); nack it to return it to the queue", d.Tag))
			default:
				postErr = err
				unposted = append(unposted, d)
			}
			if gone {
				break
			}
		}
		if len(unposted) > 0 {
			c.handBack(ctx, unposted)
		}
		if !durable && len(posted) > 0 {
			if err := c.h.cfg.Service.AckDeliveries(ctx, c.st.Session, posted); err != nil {
				c.refuse(ctx, f.ID, err)
				return
			}
		}
		if gone {
			return
		}
		sent += len(posted)
		if postErr != nil || len(unposted) > 0 {
			break
		}
		wait = 0 // more may be there: look again at once
	}
	if postErr != nil {
		c.refuse(ctx, f.ID, herr.New(herr.Unavailable, "events could not be posted to this connection (%s); they were returned to the queue and will be delivered again: send demand again", herr.MessageOf(postErr)))
	}
	if sent < f.N {
		c.send(ctx, wsframe.Idle(f.N-sent))
	}
}

// handBack returns deliveries that were tagged and persisted but not
// posted to the queue at once: a durable stream's tags are taken out of
// the state (the client never saw them) and their events nacked; a
// non-durable stream's events are nacked. Both are delivered again at
// once, rather than after their ack timeout. A failure is logged: the
// events then return when the session ends or their ack timeout passes.
func (c *conn) handBack(ctx context.Context, ds []delivery.Delivery) {
	var nackRefs []leasestore.EventRef
	var rep delivery.SettleReport
	if c.st.Stream == wsframe.StreamDurable {
		tags := make([]int64, len(ds))
		for i, d := range ds {
			tags[i] = d.Tag
		}
		err := c.update(ctx, func(st *State) error {
			if st.Session == nil {
				return herr.New(herr.FailedPrecondition, "the stream was closed")
			}
			_, nackRefs, _, rep = st.Session.Take(nil, tags)
			return nil
		})
		if err != nil {
			c.h.log.WarnContext(ctx, "websocket: cannot take back unposted tags; their events return after their ack timeout or when the session ends", c.errAttrs(err)...)
			return
		}
	} else {
		for _, d := range ds {
			nackRefs = append(nackRefs, d.Ref)
		}
		rep.Nacked = len(nackRefs)
	}
	if _, err := c.h.cfg.Service.SettleRefs(ctx, c.st.Session, nil, nackRefs, rep); err != nil {
		c.h.log.WarnContext(ctx, "websocket: cannot hand back unposted events; they return after their ack timeout or when the session ends", c.errAttrs(err)...)
	}
}

// shown reports whether tr showed dead letter id: recorded in Shown (older
// records), or named by one of Tags.
func (tr *Triage) shown() map[string]bool {
	out := make(map[string]bool, len(tr.Shown)+len(tr.Tags))
	for id := range tr.Shown {
		out[id] = true
	}
	for _, id := range tr.Tags {
		out[id] = true
	}
	return out
}

func (c *conn) demandDeadLetters(ctx context.Context, f *wsframe.ClientFrame) {
	p := c.st.principal()
	maxTags := c.h.cfg.MaxTriageTags
	// Up to n candidates: the cap is applied after pruning, in the write.
	want := f.N
	shown := c.st.DeadLetters.shown()
	var unshown []*leasestore.DeadLetter
	listed := map[string]bool{}
	complete := false
	token := ""
	// Once the state holds half the cap, list the whole queue (within the
	// time budget) so that the ids no longer listed (replayed or discarded
	// elsewhere, expired) are pruned from it; a listing cut short prunes
	// nothing. Below that, stop once n unshown dead letters are found.
	prune := len(c.st.DeadLetters.Tags)+len(c.st.DeadLetters.Shown) >= maxTags/2
	for time.Now().Before(c.budgetEnd) {
		page, next, err := c.h.cfg.Service.ListDeadLetters(ctx, p, delivery.MaxDeadLetterPage, token)
		if err != nil {
			c.refuse(ctx, f.ID, err)
			return
		}
		for _, d := range page {
			listed[d.ID] = true
			if !shown[d.ID] && len(unshown) < want {
				unshown = append(unshown, d)
			}
		}
		if token = next; token == "" {
			complete = true
			break
		}
		if len(unshown) >= want && !prune {
			break
		}
	}
	tags := map[string]int64{}
	err := c.update(ctx, func(st *State) error {
		clear(tags)
		tr := st.DeadLetters
		if tr.Tags == nil {
			tr.Tags = map[int64]string{}
		}
		if complete {
			for id := range tr.Shown {
				if !listed[id] {
					delete(tr.Shown, id)
				}
			}
			for tag, id := range tr.Tags {
				if !listed[id] {
					delete(tr.Tags, tag)
				}
			}
		}
		now := tr.shown()
		for _, d := range unshown {
			if now[d.ID] || len(tr.Tags) >= maxTags {
				continue // a concurrent frame showed it, or the cap is reached
			}
			tr.NextTag++
			tr.Tags[tr.NextTag] = d.ID
			tags[d.ID] = tr.NextTag
		}
		return nil
	})
	if err != nil {
		c.refuse(ctx, f.ID, err)
		return
	}
	sent := 0
	for _, d := range unshown {
		if tag, ok := tags[d.ID]; ok {
			if err := c.postFrame(ctx, wsframe.DeadLettered(d, tag), c.hardEnd); errors.Is(err, apigwmgmt.ErrGone) {
				return
			}
			// A dead letter whose post failed keeps its tag: it is shown
			// again on the next connection.
			sent++
		}
	}
	if sent < f.N {
		c.send(ctx, wsframe.Idle(f.N-sent))
	}
}

func (c *conn) settle(ctx context.Context, f *wsframe.ClientFrame) {
	if c.st.Stream != wsframe.StreamDurable {
		c.refuse(ctx, f.ID, herr.New(herr.FailedPrecondition, "only a durable stream's events are settled: %s frames do not apply to a %s stream", f.Type, orNone(c.st.Stream)))
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
		c.refuse(ctx, f.ID, err)
		return
	}
	final, err := c.h.cfg.Service.SettleRefs(ctx, c.st.Session, ackRefs, nackRefs, rep)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			c.fatal(ctx, f.ID, err)
			return
		}
		// Put the tags back so that the frame may be sent again.
		if uerr := c.update(ctx, func(st *State) error { st.Session.Untake(taken); return nil }); uerr != nil {
			c.h.log.WarnContext(ctx, "websocket: cannot restore tags after a failed settle; they return to the queue when the session ends", c.errAttrs(uerr)...)
		}
		c.refuse(ctx, f.ID, err)
		return
	}
	c.send(ctx, wsframe.Settled(f.ID, final))
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
		c.fatal(ctx, id, err)
		return false
	}
	if err != nil {
		c.h.log.WarnContext(ctx, "websocket: session refresh failed", c.errAttrs(err)...)
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
		c.refuse(ctx, f.ID, herr.New(herr.FailedPrecondition, "actions frames apply to a dead_letters stream only"))
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
			c.refuse(ctx, f.ID, err)
			return
		}
		for k, r := range res {
			o := &outs[index[k]]
			o.Outcome, o.Detail = r.Outcome, r.Detail
			telemetry.Triaged(ctx, string(r.Action), string(r.Outcome))
			if r.Outcome == delivery.OutcomeReplayed || r.Outcome == delivery.OutcomeDiscarded {
				retired = append(retired, o.DeliveryTag)
			}
		}
	}
	if len(retired) > 0 {
		err := c.update(ctx, func(st *State) error {
			for _, tag := range retired {
				// The dead letter is gone: neither its tag nor its id
				// needs keeping.
				if id, ok := st.DeadLetters.Tags[tag]; ok {
					delete(st.DeadLetters.Shown, id)
				}
				delete(st.DeadLetters.Tags, tag)
			}
			return nil
		})
		if err != nil {
			c.h.log.WarnContext(ctx, "websocket: cannot retire dead-letter tags; acting on them again finds nothing", c.errAttrs(err)...)
		}
	}
	for _, o := range outs {
		// A failed post loses only that outcome (logged); a gone client
		// ends the answer.
		if err := c.postFrame(ctx, wsframe.Outcome(f.ID, o), c.hardEnd); errors.Is(err, apigwmgmt.ErrGone) {
			return
		}
	}
}
