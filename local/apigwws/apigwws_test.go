package apigwws_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/local/apigwws"
)

// echo is an integration that records every event and answers each
// message through the management API: "echo:N" posts N numbered
// messages, "bye" deletes the connection, anything else is echoed.
type echo struct {
	t    *testing.T
	mgmt func() *apigwmgmt.Client

	mu     sync.Mutex
	events []events.APIGatewayWebsocketProxyRequest
	gone   chan events.APIGatewayWebsocketProxyRequest
}

func (e *echo) handle(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
	rc := ev.RequestContext
	switch rc.EventType {
	case "CONNECT":
		if ev.QueryStringParameters["access_token"] != "ok" {
			return events.APIGatewayProxyResponse{StatusCode: http.StatusUnauthorized, Body: `{"code":"unauthenticated"}`}, nil
		}
		res := events.APIGatewayProxyResponse{StatusCode: http.StatusOK}
		if strings.Contains(ev.Headers["Sec-Websocket-Protocol"], "herald.v1") {
			res.Headers = map[string]string{"Sec-WebSocket-Protocol": "herald.v1"}
		}
		return res, nil
	case "DISCONNECT":
		e.gone <- ev
		return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}, nil
	}
	c := e.mgmt()
	var n int
	switch {
	case ev.Body == "bye":
		return events.APIGatewayProxyResponse{StatusCode: 200}, c.DeleteConnection(ctx, rc.ConnectionID)
	case ev.Body == "info":
		info, err := c.GetConnection(ctx, rc.ConnectionID)
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
		return events.APIGatewayProxyResponse{StatusCode: 200}, c.PostToConnection(ctx, rc.ConnectionID, []byte("ip="+info.Identity.SourceIP))
	case strings.HasPrefix(ev.Body, "echo:"):
		_, _ = fmt.Sscanf(ev.Body, "echo:%d", &n)
		for i := range n {
			if err := c.PostToConnection(ctx, rc.ConnectionID, fmt.Appendf(nil, "%d", i)); err != nil {
				return events.APIGatewayProxyResponse{}, err
			}
		}
		return events.APIGatewayProxyResponse{StatusCode: 200}, nil
	}
	return events.APIGatewayProxyResponse{StatusCode: 200, Body: "ignored"}, c.PostToConnection(ctx, rc.ConnectionID, []byte(ev.Body))
}

func start(t *testing.T) (*apigwws.Server, *httptest.Server, *echo) {
	t.Helper()
	e := &echo{t: t, gone: make(chan events.APIGatewayWebsocketProxyRequest, 10)}
	emu := apigwws.New(apigwws.Handler(e.handle), apigwws.Options{
		Stage: "test", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
	srv := httptest.NewServer(emu)
	t.Cleanup(func() { emu.Close(); srv.Close() })
	client := &apigwmgmt.Client{
		Endpoint: emu.ManagementEndpoint(srv.URL), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	}
	e.mgmt = func() *apigwmgmt.Client { return client }
	return emu, srv, e
}

func TestConnectMessagesAndDisconnect(t *testing.T) {
	t.Parallel()
	emu, srv, e := start(t)
	url := emu.WebSocketURL(srv.URL)

	// A non-2xx $connect answer refuses the handshake with its status.
	_, res, err := websocket.DefaultDialer.Dial(url+"?access_token=bad", nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	d := websocket.Dialer{Subprotocols: []string{"herald.v1"}}
	ws, res, err := d.Dial(url+"?access_token=ok&x=1&x=2", http.Header{"Authorization": {"Bearer abc"}})
	require.NoError(t, err)
	defer ws.Close()
	require.Equal(t, "herald.v1", res.Header.Get("Sec-WebSocket-Protocol"))
	require.Len(t, emu.Connections(), 1)
	id := emu.Connections()[0]
	require.Regexp(t, `^[A-Za-z0-9_-]{15}=$`, id)

	// Ordered delivery of what the integration posts.
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("echo:50")))
	for i := range 50 {
		_, msg, err := ws.ReadMessage()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(msg))
	}
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("hello")))
	_, msg, err := ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "hello", string(msg), "the integration's answer body is not sent; its post is")
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("info")))
	_, msg, err = ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "ip=127.0.0.1", string(msg))

	// DELETE closes the socket with 1000; the integration gets $disconnect.
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("bye")))
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "a close frame: %v", err)
	require.Equal(t, websocket.CloseNormalClosure, ce.Code)
	select {
	case ev := <-e.gone:
		require.Equal(t, id, ev.RequestContext.ConnectionID)
		require.Equal(t, "$disconnect", ev.RequestContext.RouteKey)
		require.Equal(t, int64(1000), ev.RequestContext.DisconnectStatusCode)
	case <-time.After(10 * time.Second):
		t.Fatal("no $disconnect")
	}

	// The events had API Gateway's shape.
	e.mu.Lock()
	defer e.mu.Unlock()
	var connect *events.APIGatewayWebsocketProxyRequest
	for i := range e.events {
		if e.events[i].RequestContext.ConnectionID == id && e.events[i].RequestContext.EventType == "CONNECT" {
			connect = &e.events[i]
		}
	}
	require.NotNil(t, connect)
	rc := connect.RequestContext
	require.Equal(t, "$connect", rc.RouteKey)
	require.Equal(t, "test", rc.Stage)
	require.Equal(t, strings.TrimPrefix(srv.URL, "http://"), rc.DomainName)
	require.NotEmpty(t, rc.RequestID)
	require.NotZero(t, rc.ConnectedAt)
	require.Equal(t, "Bearer abc", connect.Headers["Authorization"])
	require.Equal(t, []string{"1", "2"}, connect.MultiValueQueryStringParameters["x"])
	require.Equal(t, "2", connect.QueryStringParameters["x"])
	msgs := 0
	for _, ev := range e.events {
		if ev.RequestContext.EventType == "MESSAGE" && ev.RequestContext.ConnectionID == id {
			msgs++
			require.Equal(t, "$default", ev.RequestContext.RouteKey)
			require.NotNil(t, ev.RequestContext.MessageID)
		}
	}
	require.Equal(t, 4, msgs)
}

func TestManagementAPI(t *testing.T) {
	t.Parallel()
	emu, srv, e := start(t)
	c := e.mgmt()
	err := c.PostToConnection(t.Context(), "nope=", []byte("x"))
	require.ErrorIs(t, err, apigwmgmt.ErrGone, "unknown ids are 410")
	require.ErrorIs(t, c.DeleteConnection(t.Context(), "nope="), apigwmgmt.ErrGone)

	ws, _, err := websocket.DefaultDialer.Dial(emu.WebSocketURL(srv.URL)+"?access_token=ok", nil)
	require.NoError(t, err)
	defer ws.Close()
	id := emu.Connections()[0]
	err = c.PostToConnection(t.Context(), id, make([]byte, apigwws.MaxMessageBytes))
	require.NoError(t, err)
	_, msg, err := ws.ReadMessage()
	require.NoError(t, err)
	require.Len(t, msg, apigwws.MaxMessageBytes)

	// A client close: $disconnect with the client's code; the id is gone.
	require.NoError(t, ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "done")))
	select {
	case ev := <-e.gone:
		require.Equal(t, int64(4000), ev.RequestContext.DisconnectStatusCode)
		require.Equal(t, "done", *ev.RequestContext.DisconnectReason)
	case <-time.After(10 * time.Second):
		t.Fatal("no $disconnect")
	}
	require.ErrorIs(t, c.PostToConnection(t.Context(), id, []byte("x")), apigwmgmt.ErrGone)

	// Not an upgrade: 426; another stage: 404.
	res, err := http.Get(srv.URL + "/test")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUpgradeRequired, res.StatusCode)
	res, err = http.Get(srv.URL + "/prod")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestFailedConnectInvocationIs502(t *testing.T) {
	t.Parallel()
	emu := apigwws.New(apigwws.InvokerFunc(func(context.Context, []byte) ([]byte, error) {
		return nil, errors.New("boom")
	}), apigwws.Options{})
	srv := httptest.NewServer(emu)
	defer srv.Close()
	_, res, err := websocket.DefaultDialer.Dial(emu.WebSocketURL(srv.URL), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusBadGateway, res.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	require.NotEmpty(t, body["message"])
}

// TestSigV4Checked: with Options.Credentials the management API accepts
// only requests signed with them.
func TestSigV4Checked(t *testing.T) {
	t.Parallel()
	emu, srv, e := start(t)
	ws, _, err := websocket.DefaultDialer.Dial(emu.WebSocketURL(srv.URL)+"?access_token=ok", nil)
	require.NoError(t, err)
	defer ws.Close()
	id := emu.Connections()[0]
	require.NoError(t, e.mgmt().PostToConnection(t.Context(), id, []byte("signed")))

	for name, creds := range map[string][2]string{"wrong secret": {"AKID", "OTHER"}, "wrong key": {"AKOTHER", "SECRET"}} {
		bad := &apigwmgmt.Client{
			Endpoint: emu.ManagementEndpoint(srv.URL), Region: "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider(creds[0], creds[1], ""),
		}
		err := bad.PostToConnection(t.Context(), id, []byte("forged"))
		require.Equal(t, herr.PermissionDenied, herr.CodeOf(err), "%s: %v", name, err)
	}
	res, err := http.Post(emu.ManagementEndpoint(srv.URL)+"/@connections/"+id, "text/plain", strings.NewReader("unsigned"))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	_, msg, err := ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "signed", string(msg))
	require.NoError(t, e.mgmt().PostToConnection(t.Context(), id, []byte("after")))
	_, msg, err = ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "after", string(msg), "nothing refused was sent")
}

// TestFailNextPosts: injected faults answer the next posts with the
// chosen status and send nothing; later posts go through.
func TestFailNextPosts(t *testing.T) {
	t.Parallel()
	emu, srv, e := start(t)
	ws, _, err := websocket.DefaultDialer.Dial(emu.WebSocketURL(srv.URL)+"?access_token=ok", nil)
	require.NoError(t, err)
	defer ws.Close()
	id := emu.Connections()[0]
	c := e.mgmt()
	emu.FailNextPosts(2, http.StatusTooManyRequests)
	for range 2 {
		err := c.PostToConnection(t.Context(), id, []byte("throttled"))
		var apiErr *apigwmgmt.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusTooManyRequests, apiErr.Status)
		require.Equal(t, herr.Unavailable, herr.CodeOf(err))
	}
	emu.FailNextPosts(1, http.StatusInternalServerError)
	var apiErr *apigwmgmt.APIError
	require.ErrorAs(t, c.PostToConnection(t.Context(), id, []byte("broken")), &apiErr)
	require.Equal(t, http.StatusInternalServerError, apiErr.Status)
	require.NoError(t, c.PostToConnection(t.Context(), id, []byte("ok")))
	_, msg, err := ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "ok", string(msg), "failed posts sent nothing")
	sent, failed := emu.PostCounts()
	require.Equal(t, [2]int64{1, 3}, [2]int64{sent, failed})
}

// TestDisconnectWhileInvoking: with Concurrency above 1, $disconnect is
// invoked while a $default invocation of the connection still runs (as
// on AWS); with 1 it waits for it.
func TestDisconnectWhileInvoking(t *testing.T) {
	t.Parallel()
	for _, conc := range []int{1, 2} {
		disconnected := make(chan struct{})
		var overlapped atomicBool
		inv := apigwws.Handler(func(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
			switch ev.RequestContext.EventType {
			case "MESSAGE":
				select {
				case <-disconnected:
					overlapped.set()
				case <-time.After(time.Second):
				}
			case "DISCONNECT":
				close(disconnected)
			}
			return events.APIGatewayProxyResponse{StatusCode: 200}, nil
		})
		emu := apigwws.New(inv, apigwws.Options{Concurrency: conc})
		srv := httptest.NewServer(emu)
		ws, _, err := websocket.DefaultDialer.Dial(emu.WebSocketURL(srv.URL), nil)
		require.NoError(t, err)
		require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("slow")))
		require.NoError(t, ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, "")))
		select {
		case <-disconnected:
		case <-time.After(10 * time.Second):
			t.Fatal("no $disconnect")
		}
		emu.Close()
		srv.Close()
		_ = ws.Close()
		require.Equal(t, conc > 1, overlapped.get(), "Concurrency %d", conc)
	}
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) set() { b.mu.Lock(); b.v = true; b.mu.Unlock() }
func (b *atomicBool) get() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.v
}
