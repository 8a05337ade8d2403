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
// wsframe.Dispatch routes every frame, with the rules and error texts the
// gorilla bridge shares: a frame that fits no state, or that
// wsframe.Decode refuses, is answered by a non-fatal error frame. Failures
// to open a stream (and an open frame Decode refuses, unless a stream is
// open: a second open is a non-fatal 409) and a lost session (the queue
// is gone, herr.NotFound; or the session was taken away or lapsed, a
// *delivery.ConsumerCancelledError; other internal errors are not) are
// fatal: the error frame is posted, then the connection is deleted
// through the management API. API Gateway cannot send a chosen close
// code, so the client sees a plain close (1000, or 1006 depending on the
// client) after the fatal error frame, not wsframe.CloseCode(status): it
// must read the error frame's status_code.
//
// A session stays attached for SessionTTL (HERALD_WS_SESSION_TTL, 10
// minutes: API Gateway's idle timeout) after the client's last demand,
// ack, nack or ping frame. A client silent for longer gets the "broker
// cancelled" fatal error on its next frame and reconnects with its token
// (the reconnect token or queue_id; its unsettled events are delivered
// again). API
// Gateway closes idle connections after 10 minutes and every connection
// after 2 hours; a frame larger than wsframe.MaxFrameBytes is a fatal 422.
//
// # Files
//
// One file per job: connect.go ($connect, $disconnect, the stale-record
// reaper), conn.go (one $default invocation: reading the record,
// dispatching the frame, open, keeping the session attached), state.go
// (the record's State and its conditional writes), demand.go (pulling
// and posting events, handing back what could not be posted), settle.go
// (ack, nack and extend), triage.go (a dead_letters stream over
// delivery.TriageState), post.go (posting frames through the management
// API, and what log lines keep out).
package wslambda

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
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
