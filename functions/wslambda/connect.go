package wslambda

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
)

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
