package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/local/apigwws"
)

// rieLimited is a valid token without stream rights, rieOther one of
// another principal that may receive everything, rieReader one with
// wstest.ReaderPermissions, for the suite.
const (
	rieLimited = "rie-limited-token-0123456789"
	rieOther   = "rie-other-token-0123456789"
	rieReader  = "rie-reader-token-0123456789"
)

// restGateway turns HTTP requests into API Gateway HTTP API (payload 2.0)
// events for inv and the answers back: a minimal stand-in for the HTTP
// API in front of the same function, so the suite can publish and create
// queues through REST.
func restGateway(inv apigwws.Invoker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		headers := map[string]string{}
		for k, vs := range r.Header {
			headers[strings.ToLower(k)] = strings.Join(vs, ",")
		}
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
			Headers: headers, Body: string(body),
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				DomainName: r.Host, Stage: "$default", RequestID: "rest",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
			},
		}
		payload, _ := json.Marshal(ev)
		out, err := inv.Invoke(r.Context(), payload)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var res events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &res); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(res.StatusCode)
		b := []byte(res.Body)
		if res.IsBase64Encoded {
			b, _ = base64.StdEncoding.DecodeString(res.Body)
		}
		_, _ = w.Write(b)
	})
}

// TestWebSocketUnderRIE runs the WebSocket frame protocol's suite against
// the real bootstrap under aws-lambda-rie, behind the API Gateway
// WebSocket emulator (local/apigwws): $connect, $default and $disconnect
// are invoked through the emulator's Invoke API, and the function answers
// through the emulator's management API (AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI,
// signed with fake credentials).
//
// State sharing: the in-memory broker and store of one process cannot be
// shared with another, so the one RIE-hosted function serves both sides
// (HERALD_FUNCTION=all: REST and WebSocket events); the suite's REST
// calls reach it as HTTP API events through restGateway. One emulator
// process is one execution environment, so invocations are serialized, as
// on one Lambda instance; the store's conditional writes are exercised by
// the in-process tests of functions/wslambda.
func TestWebSocketUnderRIE(t *testing.T) {
	bootstrap := buildBootstrap(t)
	inv := &apigwws.RIE{}
	emu := apigwws.New(inv, apigwws.Options{
		Stage: "rie", Credentials: credentials.NewStaticCredentialsProvider("AKIDRIETEST", "rie-secret", ""),
	})
	emuSrv := httptest.NewServer(emu)
	t.Cleanup(func() { emu.Close(); emuSrv.Close() })

	readerPermissions, err := json.Marshal(wstest.ReaderPermissions)
	require.NoError(t, err)
	r := startRIE(t, bootstrap, map[string]string{
		"HERALD_FUNCTION":                          "all",
		"HERALD_TOPIC_URL":                         "mem://rie-ws",
		"HERALD_STORE_URL":                         "mem://rie-ws/key",
		"HERALD_TOKENS":                            `{"` + rieToken + `": {"id": "rie-test", "permissions": ["*"]}, "` + rieLimited + `": {"id": "publisher", "permissions": ["publish:*"]}, "` + rieOther + `": {"id": "other", "permissions": ["receive:*"]}, "` + rieReader + `": {"id": "reader", "permissions": ` + string(readerPermissions) + `}}`,
		"HERALD_DELIVERY_LIMIT":                    "2",
		"HERALD_WS_POLL_WAIT":                      "200ms",
		"AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI": emu.ManagementEndpoint(emuSrv.URL),
		"AWS_REGION":                               "us-east-1",
		"AWS_ACCESS_KEY_ID":                        "AKIDRIETEST",
		"AWS_SECRET_ACCESS_KEY":                    "rie-secret",
	})
	inv.URL = r.url
	rest := httptest.NewServer(restGateway(inv))
	t.Cleanup(rest.Close)

	// The suite's subtests are parallel: they end when Run returns.
	t.Run("suite", func(t *testing.T) {
		wstest.Run(t, wstest.Harness{
			Dial:          wstest.Dialer(emu.WebSocketURL(emuSrv.URL)),
			RESTURL:       rest.URL,
			Token:         rieToken,
			LimitedToken:  rieLimited,
			OtherToken:    rieOther,
			ReaderToken:   rieReader,
			DeliveryLimit: 2,
			Push:          false,
			NoCloseCodes:  true,
		})
	})
	require.NotContains(t, r.output.String(), rieToken, "the token is never logged")
	require.NotContains(t, r.output.String(), "rie-secret")
}
