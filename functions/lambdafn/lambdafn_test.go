package lambdafn_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/lambdafn"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/internal/version"
)

// event builds an API Gateway HTTP API payload 2.0 event as API Gateway
// sends it: lower-case header names, the raw path and query string.
func event(method, path, query, token, body string, base64Body bool) []byte {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, RawQueryString: query,
		Headers: map[string]string{"content-type": "application/json", "user-agent": "test"},
		Body:    body, IsBase64Encoded: base64Body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "api.example.com", Stage: "$default", RequestID: "req-1",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.1"},
		},
	}
	if token != "" {
		ev.Headers["authorization"] = "Bearer " + token
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

func newHandler(t *testing.T, jobs lambdafn.JobRunner) *lambdafn.Handler {
	t.Helper()
	svc := inmem.New(t, inmem.Options{}).Service
	return lambdafn.New(router.New(svc, auth.DevToken("tok")), jobs)
}

func invoke(t *testing.T, h *lambdafn.Handler, payload []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out, err := h.Invoke(t.Context(), payload)
	require.NoError(t, err)
	var res events.APIGatewayV2HTTPResponse
	require.NoError(t, json.Unmarshal(out, &res))
	return res
}

func TestHTTPEvents(t *testing.T) {
	t.Parallel()
	h := newHandler(t, nil)

	res := invoke(t, h, event("POST", "/v1/event-destinations", "", "tok", `{"type":"DURABLE_CONSUMER"}`, false))
	require.Equal(t, http.StatusCreated, res.StatusCode, res.Body)
	require.Equal(t, "application/json", res.Headers["Content-Type"])
	var dest struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(res.Body), &dest))
	require.NotEmpty(t, dest.ID)
	require.Equal(t, "/v1/event-destinations/"+dest.ID, res.Headers["Location"])

	// Caught up: 204 with no body.
	res = invoke(t, h, event("POST", "/v1/event-destinations/"+dest.ID+"/pull", "limit=5&workerId=w1", "tok", "", false))
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	require.Empty(t, res.Body)

	// A base64-encoded body, as API Gateway sends binary payloads.
	body := base64.StdEncoding.EncodeToString([]byte(`{"event":{"event_type":"a.b","message":{"n":1}}}`))
	res = invoke(t, h, event("POST", "/api/v1beta/events", "", "tok", body, true))
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	require.False(t, res.IsBase64Encoded)

	// The query string reaches the handler.
	res = invoke(t, h, event("POST", "/v1/event-destinations/"+dest.ID+"/pull", "limit=1&visibility=30&workerId=w1", "tok", "", false))
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	var lease struct {
		LeaseID string           `json:"leaseId"`
		Events  []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &lease))
	require.Len(t, lease.Events, 1)
	res = invoke(t, h, event("POST", "/v1/event-destinations/"+dest.ID+"/pull", "limit=500", "tok", "", false))
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "limit out of range")

	// No token: 401 with its challenge header.
	res = invoke(t, h, event("GET", "/v1/event-destinations", "", "", "", false))
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, res.Headers["Www-Authenticate"], "Bearer")

	res = invoke(t, h, event("GET", "/health", "", "", "", false))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.JSONEq(t, `{"status":"ok","version":"`+version.Get().Version+`"}`, res.Body)
}

func TestHandlerThatWritesNothingAnswers200(t *testing.T) {
	t.Parallel()
	h := lambdafn.New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil)
	res := invoke(t, h, event("GET", "/", "", "", "", false))
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestJobEvents(t *testing.T) {
	t.Parallel()
	var ran []string
	h := newHandler(t, func(_ context.Context, name string) (any, error) {
		ran = append(ran, name)
		if name == "broken" {
			return nil, errors.New("store unavailable")
		}
		return map[string]string{"job": name}, nil
	})
	out, err := h.Invoke(t.Context(), []byte(`{"job":"lease-expiry"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"job":"lease-expiry"}`, string(out))
	_, err = h.Invoke(t.Context(), []byte(`{"job":"broken"}`))
	require.ErrorContains(t, err, "job broken: store unavailable")
	require.Equal(t, []string{"lease-expiry", "broken"}, ran)

	noJobs := newHandler(t, nil)
	_, err = noJobs.Invoke(t.Context(), []byte(`{"job":"lease-expiry"}`))
	require.ErrorContains(t, err, "runs no jobs")
}

func TestUnsupportedEvents(t *testing.T) {
	t.Parallel()
	h := newHandler(t, nil)
	for _, p := range []string{`{"Records":[]}`, `[]`, `not json`, `{"version":"1.0","httpMethod":"GET","path":"/health"}`} {
		_, err := h.Invoke(t.Context(), []byte(p))
		require.ErrorIs(t, err, lambdafn.ErrUnsupportedEvent, p)
	}
}

// TestWebSocketEvents: WebSocket events go to the WebSocket handler when
// one is set, and are unsupported otherwise.
func TestWebSocketEvents(t *testing.T) {
	t.Parallel()
	var got []events.APIGatewayWebsocketProxyRequest
	h := newHandler(t, nil).WithWebSocket(func(_ context.Context, ev events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
		got = append(got, ev)
		if ev.Body == "fail" {
			return events.APIGatewayProxyResponse{}, errors.New("boom")
		}
		return events.APIGatewayProxyResponse{StatusCode: 200, Headers: map[string]string{"Sec-WebSocket-Protocol": "herald.v1"}}, nil
	})
	for _, typ := range []string{"CONNECT", "MESSAGE", "DISCONNECT"} {
		ev := events.APIGatewayWebsocketProxyRequest{Body: "x", RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			EventType: typ, ConnectionID: "L0SM9cOFvHcCIhw=", RouteKey: "$default", Stage: "prod", DomainName: "abc.execute-api.us-east-1.amazonaws.com",
		}}
		payload, err := json.Marshal(ev)
		require.NoError(t, err)
		out, err := h.Invoke(t.Context(), payload)
		require.NoError(t, err)
		var res events.APIGatewayProxyResponse
		require.NoError(t, json.Unmarshal(out, &res))
		require.Equal(t, 200, res.StatusCode)
		require.Equal(t, "herald.v1", res.Headers["Sec-WebSocket-Protocol"])
	}
	require.Len(t, got, 3)
	require.Equal(t, "L0SM9cOFvHcCIhw=", got[2].RequestContext.ConnectionID)
	require.Equal(t, "DISCONNECT", got[2].RequestContext.EventType)
	_, err := h.Invoke(t.Context(), []byte(`{"body":"fail","requestContext":{"eventType":"MESSAGE","connectionId":"c="}}`))
	require.ErrorContains(t, err, "boom")

	// No connection id, or no WebSocket handler: unsupported.
	_, err = h.Invoke(t.Context(), []byte(`{"requestContext":{"eventType":"MESSAGE"}}`))
	require.ErrorIs(t, err, lambdafn.ErrUnsupportedEvent)
	_, err = newHandler(t, nil).Invoke(t.Context(), []byte(`{"requestContext":{"eventType":"CONNECT","connectionId":"c="}}`))
	require.ErrorIs(t, err, lambdafn.ErrUnsupportedEvent)
}
