package wslambda

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

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

// message handles one $default event: it reads the connection record,
// decodes the frame and hands it to wsframe.Dispatch, which calls conn's
// methods (wsframe.Conn) or answers with the shared error frames.
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
			c.Fail(ctx, "", herr.New(herr.NotFound, "this connection is not known (its $connect was not completed, or it was reaped): reconnect"))
			return
		}
		c.Refuse(ctx, "", err)
		return
	}
	st, err := decodeState(rec)
	if err != nil {
		c.Fail(ctx, "", err)
		return
	}
	c.setState(rec, st)
	if ev.IsBase64Encoded {
		c.Refuse(ctx, "", wsframe.ErrBinary)
		return
	}
	if len(ev.Body) > wsframe.MaxFrameBytes {
		c.Fail(ctx, "", herr.New(herr.InvalidArgument, "a frame must be at most %d bytes", wsframe.MaxFrameBytes))
		return
	}
	f, err := wsframe.Decode([]byte(ev.Body))
	if f != nil && f.Type == wsframe.TypeOpen && f.ReconnectToken != nil && *f.ReconnectToken != "" {
		c.secrets = append(c.secrets, *f.ReconnectToken)
	}
	if err == nil && c.st.Stream == "" {
		switch f.Type {
		case wsframe.TypeDemand, wsframe.TypeAck, wsframe.TypeNack, wsframe.TypeActions:
			c.awaitStream(ctx)
		}
	}
	wsframe.Dispatch(ctx, c, f, err)
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

var _ wsframe.Conn = (*conn)(nil)

// Stream is the open stream's kind in the record, "" before open.
func (c *conn) Stream() string { return c.st.Stream }

// Ping answers a ping frame. A ping is an idle client's keep-alive
// (browsers cannot send WebSocket pings): it keeps the stream's session
// attached too.
func (c *conn) Ping(ctx context.Context, f *wsframe.ClientFrame) {
	if !c.touch(ctx, f.ID) {
		return
	}
	c.send(ctx, wsframe.Pong(f.ID))
}

// Open opens the stream: a dead_letters stream's triage state, or an
// event stream's session (delivery.Service.OpenSession), written into
// the record unless a concurrent open wrote one first.
func (c *conn) Open(ctx context.Context, f *wsframe.ClientFrame) {
	p := c.st.principal()
	if f.Stream == wsframe.StreamDeadLetters {
		if err := p.Require(auth.PermInspectDeadLetters); err != nil {
			c.Fail(ctx, f.ID, err)
			return
		}
		err := c.update(ctx, func(st *State) error {
			if st.Stream != "" {
				return wsframe.ErrAlreadyOpen
			}
			st.Stream = f.Stream
			st.DeadLetters = delivery.NewTriageState()
			return nil
		})
		if err != nil {
			c.Refuse(ctx, f.ID, err)
			return
		}
		c.send(ctx, wsframe.Connected(f.ID, f.Stream, ""))
		return
	}
	opened, err := c.h.cfg.Service.OpenSession(ctx, p, f.StreamRequest(), c.h.cfg.SessionTTL)
	if err != nil {
		c.Fail(ctx, f.ID, err)
		return
	}
	sess := opened.State
	if sess.Kind == delivery.NonDurable {
		c.secrets = append(c.secrets, sess.Queue)
	}
	err = c.update(ctx, func(st *State) error {
		if st.Stream != "" {
			return wsframe.ErrAlreadyOpen
		}
		st.Stream, st.Session = f.Stream, sess
		return nil
	})
	if err != nil {
		// Another frame opened first, or the record cannot be written (or
		// is gone: $disconnect came first): this session is nobody's.
		_ = c.h.cfg.Service.CloseSession(ctx, sess)
		if errors.Is(err, wsframe.ErrAlreadyOpen) {
			c.Refuse(ctx, f.ID, err)
		} else {
			c.Fail(ctx, f.ID, err)
		}
		return
	}
	c.send(ctx, wsframe.Connected(f.ID, f.Stream, sess.Queue))
}

// lost reports whether err means the session is gone for good: the queue
// is gone (herr.NotFound), or the session was taken away or lapsed (a
// *delivery.ConsumerCancelledError). Other failures, other internal
// errors included, leave the stream as it is.
func lost(err error) bool {
	var cancelled *delivery.ConsumerCancelledError
	return herr.CodeOf(err) == herr.NotFound || errors.As(err, &cancelled)
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
		c.Fail(ctx, id, err)
		return false
	}
	if err != nil {
		c.h.log.WarnContext(ctx, "websocket: session refresh failed", c.errAttrs(err)...)
	}
	return true
}
