// Package apigwws is a local emulator of an Amazon API Gateway WebSocket
// API with one Lambda proxy integration behind routes $connect,
// $disconnect and $default, for tests. It is not a production gateway: no
// TLS, no IAM policies (with Options.Credentials the management API checks
// SigV4 signatures against those credentials, as API Gateway checks them
// against IAM; without, it accepts requests signed or not), no quotas, no
// route selection expression other than $default.
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
// connection are handed to the integration one at a time, in order, and
// $disconnect only after the last of them finished (Options.Concurrency
// 1). API Gateway gives no such promise; a higher Concurrency lets
// invocations of one connection overlap as they may on AWS, and then
// $disconnect is invoked as soon as the socket closes, while $default
// invocations of the connection may still run (as on AWS).
//
// Fault injection, for tests of a backend's error handling: FailNextPosts
// answers the next POSTs with a chosen status (429 throttling, 500, …),
// SetPostDelay delays every POST.
package apigwws

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
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
	// run at once (default 1: one at a time, in order, and $disconnect
	// after the last). Above 1, $disconnect does not wait for the
	// connection's $default invocations still running, as on AWS.
	Concurrency int
	// Credentials, when set, are the only credentials the management API
	// accepts: every request must carry a SigV4 signature (service
	// "execute-api", any region) made with them, which the emulator
	// recomputes with aws-sdk-go-v2's signer and compares; an unsigned
	// request, another access key or a signature that does not match is
	// 403 (ForbiddenException, or InvalidSignatureException for a wrong
	// signature). nil accepts any request, signed or not.
	Credentials aws.CredentialsProvider
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

	faultMu    sync.Mutex
	failPosts  int // how many of the next POSTs fail
	failStatus int // with this status
	postDelay  time.Duration
	posts      atomic.Int64 // POSTs answered 200
	failed     atomic.Int64 // POSTs answered failStatus
}

// FailNextPosts makes the management API answer the next n
// PostToConnection calls (of any connection) with HTTP status (429 is
// API Gateway's throttling, LimitExceededException; 5xx an
// InternalServerErrorException) without sending anything: fault injection
// for tests. It replaces an earlier FailNextPosts that is not used up.
func (s *Server) FailNextPosts(n, status int) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.failPosts, s.failStatus = n, status
}

// SetPostDelay makes every later PostToConnection call wait d (≥ 0)
// before it is answered: a slow management API, for tests.
func (s *Server) SetPostDelay(d time.Duration) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.postDelay = max(d, 0)
}

// PostCounts returns how many PostToConnection calls were answered 200
// (a message sent) and how many failed by FailNextPosts, since New.
func (s *Server) PostCounts() (sent, failed int64) { return s.posts.Load(), s.failed.Load() }

// postFault returns the delay and the injected status (0: none) of the
// next POST.
func (s *Server) postFault() (time.Duration, int) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.failPosts > 0 {
		s.failPosts--
		return s.postDelay, s.failStatus
	}
	return s.postDelay, 0
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
	defer s.wg.Done()
	// The upgrade is answered under s.mu, so that the connection is listed
	// (Connections, the management API) by the time the client sees it
	// open.
	ws, err := s.upgrader.Upgrade(w, r, respHeader)
	if err != nil {
		s.mu.Unlock()
		// The integration saw a connect that never completed: tell it.
		s.disconnect(c, websocket.CloseAbnormalClosure, "the handshake failed")
		return
	}
	ws.SetReadLimit(MaxMessageBytes)
	c.ws = ws
	c.lastActive.Store(time.Now().UnixMilli())
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
	if s.opts.Concurrency == 1 {
		s.disconnect(c, code, reason) // every $default has finished
		return
	}
	// As on AWS: $disconnect runs while $default invocations may too.
	s.disconnect(c, code, reason)
	inflight.Wait()
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
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxMessageBytes+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestException", "cannot read the body")
		return
	}
	if s.opts.Credentials != nil {
		if status, typ, msg := s.verify(r, body); status != 0 {
			apiError(w, status, typ, msg)
			return
		}
	}
	if c == nil || c.deleted.Load() {
		apiError(w, http.StatusGone, "GoneException", "")
		return
	}
	switch r.Method {
	case http.MethodPost:
		delay, fail := s.postFault()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if fail != 0 {
			s.failed.Add(1)
			typ := "InternalServerErrorException"
			if fail == http.StatusTooManyRequests {
				typ = "LimitExceededException"
			}
			apiError(w, fail, typ, "injected fault")
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
		s.posts.Add(1)
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

// verify checks the SigV4 signature of a management API request against
// Options.Credentials: it parses the Authorization header, signs a copy of
// the request (the signed headers only, the same X-Amz-Date, service,
// region and body hash) with aws-sdk-go-v2's signer, and compares the
// signatures. It returns 0 when they match, else the status, error type
// and message of API Gateway's refusal.
func (s *Server) verify(r *http.Request, body []byte) (int, string, string) {
	auth := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return http.StatusForbidden, "ForbiddenException", "Missing Authentication Token"
	}
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, algo), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/") // AKID/date/region/service/aws4_request
	if len(scope) != 5 || scope[3] != "execute-api" || scope[4] != "aws4_request" || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return http.StatusForbidden, "IncompleteSignatureException", "the Authorization header is not a SigV4 signature for execute-api"
	}
	creds, err := s.opts.Credentials.Retrieve(r.Context())
	if err != nil {
		return http.StatusInternalServerError, "InternalServerErrorException", "the emulator cannot read its credentials"
	}
	if scope[0] != creds.AccessKeyID {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return http.StatusForbidden, "IncompleteSignatureException", "X-Amz-Date is missing or malformed"
	}
	u := "http://" + r.Host + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	cp, err := http.NewRequestWithContext(r.Context(), r.Method, u, bytes.NewReader(body))
	if err != nil {
		return http.StatusBadRequest, "BadRequestException", "cannot rebuild the request"
	}
	cp.Header = http.Header{}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" {
			continue // from cp.URL
		}
		for _, v := range r.Header.Values(h) {
			cp.Header.Add(h, v)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, cp, hex.EncodeToString(sum[:]), scope[3], scope[2], when); err != nil {
		return http.StatusInternalServerError, "InternalServerErrorException", "the emulator cannot sign"
	}
	want := ""
	for _, part := range strings.Split(strings.TrimPrefix(cp.Header.Get("Authorization"), algo), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "Signature="); ok {
			want = v
		}
	}
	if want == "" || !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided."
	}
	return 0, "", ""
}
