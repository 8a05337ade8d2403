// Package apigwws is a local emulator of an Amazon API Gateway WebSocket
// API with one Lambda proxy integration behind routes $connect,
// $disconnect and $default, for tests. It is not a production gateway: no
// TLS, no IAM on the management API (requests are accepted signed or not),
// no quotas, no route selection expression other than $default.
//
// What it does, as API Gateway does (developer guide, "WebSocket APIs"):
//
//   - An upgrade request to /{stage} gets a connection id (16 characters of
//     URL-safe base64 ending in '=', like API Gateway's "L0SM9cOFvHcCIhw=")
//     and invokes the integration with a $connect event (eventType
//     CONNECT: headers, multiValueHeaders, queryStringParameters,
//     multiValueQueryStringParameters, requestContext with routeKey,
//     eventType, connectionId, connectedAt, domainName, stage, apiId,
//     requestId, messageDirection, identity). A 2xx answer completes the
//     handshake, selecting the subprotocol the answer's
//     Sec-WebSocket-Protocol header names; any other status, or a failed
//     invocation (502), refuses it with that status.
//   - Each text message invokes the integration with a $default event
//     (eventType MESSAGE, body; binary messages are base64 with
//     isBase64Encoded). The answer's body is not sent to the client: no
//     route response is configured, the integration answers through the
//     management API. A message over MaxMessageBytes closes the connection
//     with 1009.
//   - When the socket closes, the integration gets a $disconnect event
//     (eventType DISCONNECT, disconnectStatusCode, disconnectReason).
//   - The management API is served on the same listener:
//     POST /{stage}/@connections/{id} sends the body as one text message;
//     DELETE closes the connection with close code 1000 (API Gateway does
//     not document the code its DeleteConnection sends; clients must not
//     rely on it); GET answers {"connectedAt", "lastActiveAt", "identity"}.
//     An unknown id is 410 GoneException. Messages to one connection are
//     written in the order the POSTs arrive, one at a time.
//
// One difference is chosen for tests: by default the messages of one
// connection are handed to the integration one at a time, in order
// (Options.Concurrency 1). API Gateway gives no such promise; a higher
// Concurrency lets invocations of one connection overlap as they may on
// AWS.
package apigwws

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// Limits of API Gateway WebSocket APIs the emulator applies.
const (
	// MaxMessageBytes is the largest message in either direction: 128 KiB.
	MaxMessageBytes = 128 << 10
	// IntegrationTimeout bounds one invocation (API Gateway: 29 s).
	IntegrationTimeout = 29 * time.Second
)

// Invoker invokes the integration: payload is the JSON of an
// events.APIGatewayWebsocketProxyRequest; the answer is the JSON of an
// events.APIGatewayProxyResponse. An error is a failed invocation.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

// Invoke implements Invoker.
func (f InvokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// Handler returns an Invoker around an in-process Lambda handler of the
// WebSocket event type. Events and answers go through JSON both ways, as
// they do on Lambda, so fields the handler relies on must survive it.
func Handler(h func(context.Context, events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error)) Invoker {
	return InvokerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		var ev events.APIGatewayWebsocketProxyRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		res, err := h(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	})
}

// RIE invokes a function running under aws-lambda-rie (or any server of
// the Lambda Invoke API path) at URL, e.g.
// http://127.0.0.1:9000/2015-03-31/functions/function/invocations. The
// emulator runs one execution environment, which serves one invocation at
// a time, so RIE sends one invocation at a time too.
type RIE struct {
	URL string
	// Client defaults to a client with IntegrationTimeout plus a margin.
	Client *http.Client

	mu sync.Mutex
}

// Invoke implements Invoker. A function error (X-Amz-Function-Error) or a
// non-200 answer is an error carrying the answer's first 1,000 bytes.
func (r *RIE) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.Client
	if c == nil {
		c = &http.Client{Timeout: IntegrationTimeout + 5*time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Amz-Function-Error") != "" {
		return nil, fmt.Errorf("invoke: HTTP %d, function error %q: %s", res.StatusCode, res.Header.Get("X-Amz-Function-Error"), truncate(b, 1000))
	}
	return b, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// Options configure a Server. Zero fields take the defaults.
type Options struct {
	// Stage is the stage name, the first path segment of the WebSocket URL
	// and of the management API (default "local").
	Stage string
	// APIID is requestContext.apiId (default "local0apiid").
	APIID string
	// DomainName is requestContext.domainName; "" uses the Host of the
	// upgrade request.
	DomainName string
	// Concurrency is how many $default invocations of one connection may
	// run at once (default 1: one at a time, in order).
	Concurrency int
	// Logger receives invocation failures (default: discard).
	Logger *slog.Logger
}

// Server is the emulator: an http.Handler serving WebSocket upgrades and
// the management API.
type Server struct {
	inv      Invoker
	opts     Options
	upgrader websocket.Upgrader
	reqSeq   atomic.Int64

	mu     sync.Mutex
	conns  map[string]*conn
	closed bool
	wg     sync.WaitGroup
}

// conn is one client connection.
type conn struct {
	id          string
	ws          *websocket.Conn
	connectedAt time.Time
	sourceIP    string
	userAgent   string
	domain      string

	writeMu    sync.Mutex // one writer at a time, in arrival order
	lastActive atomic.Int64
	deleted    atomic.Bool  // closed through the management API
	serverCode atomic.Int64 // the close code the server sent, 0 if none
	closeOnce  sync.Once
}

// New returns an emulator that invokes inv.
func New(inv Invoker, opts Options) *Server {
	if opts.Stage == "" {
		opts.Stage = "local"
	}
	if opts.APIID == "" {
		opts.APIID = "local0apiid"
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{
		inv: inv, opts: opts, conns: map[string]*conn{},
		upgrader: websocket.Upgrader{
			ReadBufferSize: 4096, WriteBufferSize: 4096,
			// API Gateway accepts any origin; the integration decides.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
}

// Stage returns the stage name.
func (s *Server) Stage() string { return s.opts.Stage }

// ManagementEndpoint returns the management API's base URL for a server
// listening at baseURL (http://host:port): baseURL/{stage}, what
// AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI is set to.
func (s *Server) ManagementEndpoint(baseURL string) string {
	return strings.TrimRight(baseURL, "/") + "/" + s.opts.Stage
}

// WebSocketURL returns the URL clients dial for a server listening at
// baseURL (http://host:port): ws://host:port/{stage}.
func (s *Server) WebSocketURL(baseURL string) string {
	return "ws" + strings.TrimPrefix(strings.TrimRight(baseURL, "/"), "http") + "/" + s.opts.Stage
}

// Connections returns the ids of the open connections.
func (s *Server) Connections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.conns))
	for id := range s.conns {
		out = append(out, id)
	}
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/"+s.opts.Stage)
	if len(path) == len(r.URL.Path) {
		apiError(w, http.StatusNotFound, "NotFoundException", "no such stage")
		return
	}
	if id, ok := strings.CutPrefix(path, "/@connections/"); ok {
		s.manage(w, r, id)
		return
	}
	if path != "" && path != "/" {
		apiError(w, http.StatusNotFound, "NotFoundException", "no such resource")
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		apiError(w, http.StatusUpgradeRequired, "UpgradeRequired", "a WebSocket upgrade is required")
		return
	}
	s.connect(w, r)
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// newConnectionID returns 11 random bytes in URL-safe base64: 15
// characters and '='.
func newConnectionID() string {
	b := make([]byte, 11)
	_, _ = rand.Read(b)
	return base64.URLEncoding.EncodeToString(b)
}

func (s *Server) requestContext(c *conn, route, eventType string) events.APIGatewayWebsocketProxyRequestContext {
	now := time.Now()
	n := s.reqSeq.Add(1)
	return events.APIGatewayWebsocketProxyRequestContext{
		RouteKey: route, EventType: eventType, MessageDirection: "IN",
		ConnectionID: c.id, ConnectedAt: c.connectedAt.UnixMilli(),
		DomainName: c.domain, Stage: s.opts.Stage, APIID: s.opts.APIID,
		RequestID: fmt.Sprintf("req-%d-%s", n, uuid.NewString()[:8]), ExtendedRequestID: uuid.NewString(),
		RequestTime:      now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
		RequestTimeEpoch: now.UnixMilli(),
		Identity:         events.APIGatewayRequestIdentity{SourceIP: c.sourceIP, UserAgent: c.userAgent},
	}
}

// invoke sends ev to the integration, bounded by IntegrationTimeout.
func (s *Server) invoke(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) (*events.APIGatewayProxyResponse, error) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, IntegrationTimeout)
	defer cancel()
	b, err := s.inv.Invoke(ctx, payload)
	if err != nil {
		return nil, err
	}
	var res events.APIGatewayProxyResponse
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("the integration's answer is not an API Gateway proxy response: %w", err)
	}
	return &res, nil
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	c := &conn{id: newConnectionID(), connectedAt: time.Now(), sourceIP: host, userAgent: r.UserAgent(), domain: s.opts.DomainName}
	if c.domain == "" {
		c.domain = r.Host
	}
	headers := map[string]string{}
	multi := map[string][]string{}
	for k, vs := range r.Header {
		headers[k] = strings.Join(vs, ",")
		multi[k] = vs
	}
	headers["X-Forwarded-For"], multi["X-Forwarded-For"] = host, []string{host}
	headers["X-Forwarded-Proto"], multi["X-Forwarded-Proto"] = "http", []string{"http"}
	var query map[string]string
	var multiQuery map[string][]string
	if q := r.URL.Query(); len(q) > 0 {
		query, multiQuery = map[string]string{}, map[string][]string{}
		for k, vs := range q {
			query[k] = vs[len(vs)-1]
			multiQuery[k] = vs
		}
	}
	ev := events.APIGatewayWebsocketProxyRequest{
		Headers: headers, MultiValueHeaders: multi,
		QueryStringParameters: query, MultiValueQueryStringParameters: multiQuery,
		RequestContext: s.requestContext(c, "$connect", "CONNECT"),
	}
	res, err := s.invoke(r.Context(), ev)
	if err != nil {
		s.opts.Logger.Warn("$connect invocation failed", "connection", c.id, "err", err)
		apiError(w, http.StatusBadGateway, "InternalServerErrorException", "the $connect integration failed")
		return
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.WriteString(w, res.Body)
		return
	}
	respHeader := http.Header{}
	if p := header(res.Headers, "Sec-WebSocket-Protocol"); p != "" {
		respHeader.Set("Sec-WebSocket-Protocol", p)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		apiError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the emulator is shutting down")
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	ws, err := s.upgrader.Upgrade(w, r, respHeader)
	if err != nil {
		// The integration saw a connect that never completed: tell it.
		s.disconnect(c, websocket.CloseAbnormalClosure, "the handshake failed")
		return
	}
	ws.SetReadLimit(MaxMessageBytes)
	c.ws = ws
	c.lastActive.Store(time.Now().UnixMilli())
	s.mu.Lock()
	s.conns[c.id] = c
	s.mu.Unlock()
	s.read(c)
}

// header returns the value of name in h, matched without regard to case.
func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// read hands each message to the integration until the socket closes,
// then sends $disconnect.
func (s *Server) read(c *conn) {
	sem := make(chan struct{}, s.opts.Concurrency)
	var inflight sync.WaitGroup
	code, reason := websocket.CloseAbnormalClosure, "Connection closed abnormally"
	for {
		typ, msg, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case c.deleted.Load():
				code, reason = websocket.CloseNormalClosure, "Connection deleted through the management API"
			case c.serverCode.Load() != 0:
				code, reason = int(c.serverCode.Load()), "Closed by the gateway"
			case errors.As(err, &ce):
				code, reason = ce.Code, ce.Text
				if ce.Code == websocket.CloseNoStatusReceived {
					reason = "Client-side close frame status not set"
				}
			case errors.Is(err, websocket.ErrReadLimit):
				code, reason = websocket.CloseMessageTooBig, "Message too big"
				c.close(websocket.CloseMessageTooBig, "Message too big")
			}
			break
		}
		c.lastActive.Store(time.Now().UnixMilli())
		ev := events.APIGatewayWebsocketProxyRequest{RequestContext: s.requestContext(c, "$default", "MESSAGE")}
		ev.RequestContext.MessageID = uuid.NewString()[:16]
		if typ == websocket.BinaryMessage {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(msg), true
		} else {
			ev.Body = string(msg)
		}
		sem <- struct{}{}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-sem }()
			if _, err := s.invoke(context.Background(), ev); err != nil {
				s.opts.Logger.Warn("$default invocation failed", "connection", c.id, "err", err)
			}
		}()
		if s.opts.Concurrency == 1 {
			inflight.Wait() // one at a time, in order
		}
	}
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	c.close(websocket.CloseNormalClosure, "")
	inflight.Wait()
	s.disconnect(c, code, reason)
}

func (s *Server) disconnect(c *conn, code int, reason string) {
	ev := events.APIGatewayWebsocketProxyRequest{
		Headers:        map[string]string{"Host": c.domain, "X-Forwarded-For": c.sourceIP},
		RequestContext: s.requestContext(c, "$disconnect", "DISCONNECT"),
	}
	ev.RequestContext.DisconnectStatusCode = int64(code)
	ev.RequestContext.DisconnectReason = &reason
	if _, err := s.invoke(context.Background(), ev); err != nil {
		s.opts.Logger.Warn("$disconnect invocation failed", "connection", c.id, "err", err)
	}
}

// close sends a close frame with code (once) and closes the socket.
func (c *conn) close(code int, text string) {
	c.closeOnce.Do(func() {
		c.serverCode.Store(int64(code))
		c.writeMu.Lock()
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
		c.writeMu.Unlock()
		_ = c.ws.Close()
	})
}

// manage serves the management API for connection id.
func (s *Server) manage(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c == nil || c.deleted.Load() {
		apiError(w, http.StatusGone, "GoneException", "")
		return
	}
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxMessageBytes+1))
		if err != nil {
			apiError(w, http.StatusBadRequest, "BadRequestException", "cannot read the body")
			return
		}
		if len(body) > MaxMessageBytes {
			apiError(w, http.StatusRequestEntityTooLarge, "PayloadTooLargeException", "Message too long")
			return
		}
		c.writeMu.Lock()
		_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		err = c.ws.WriteMessage(websocket.TextMessage, body)
		c.writeMu.Unlock()
		if err != nil {
			apiError(w, http.StatusGone, "GoneException", "")
			return
		}
		w.WriteHeader(http.StatusOK)
	case http.MethodDelete:
		c.deleted.Store(true)
		c.close(websocket.CloseNormalClosure, "")
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"connectedAt":  c.connectedAt.UTC().Format(time.RFC3339Nano),
			"lastActiveAt": time.UnixMilli(c.lastActive.Load()).UTC().Format(time.RFC3339Nano),
			"identity":     map[string]string{"sourceIp": c.sourceIP, "userAgent": c.userAgent},
		})
	default:
		w.Header().Set("Allow", "POST, DELETE, GET")
		apiError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method "+strconv.Quote(r.Method)+" is not allowed")
	}
}

// Close closes every connection with 1001 (going away), waits for their
// $disconnect invocations, and refuses new ones. The caller closes the
// listener.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(websocket.CloseGoingAway, "Going away")
	}
	s.wg.Wait()
}
