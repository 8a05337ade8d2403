package grpcapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/grpcapi"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/pubsubx"
)

// TestUnauthenticated: a call without one valid bearer token is
// UNAUTHENTICATED in every protocol, and the answer never repeats what
// was sent.
func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const secret = "wrong-secret-token-xyz"
	headers := map[string][]string{
		"none":         nil,
		"wrong token":  {"Bearer " + secret},
		"not bearer":   {"Basic " + secret},
		"empty bearer": {"Bearer   "},
		"two values":   {"Bearer " + allToken, "Bearer " + allToken},
	}
	protocols := map[string][]connect.ClientOption{
		"grpc":     {connect.WithGRPC()},
		"grpc-web": {connect.WithGRPCWeb()},
		"connect":  {connect.WithProtoJSON()},
	}
	for hname, values := range headers {
		for pname, opts := range protocols {
			t.Run(hname+"/"+pname, func(t *testing.T) {
				req := connect.NewRequest(&pb.PublishEventRequest{Event: &pb.Event{EventType: "a"}})
				for _, v := range values {
					req.Header().Add("Authorization", v)
				}
				_, err := b.client(opts...).PublishEvent(context.Background(), req)
				require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "error: %v", err)
				require.NotContains(t, err.Error(), secret)
			})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	msgs, err := b.broker.Receive(ctx, watchSub, pubsubx.ReceiveParams{Max: 10})
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// TestUnauthenticatedConnectJSON checks the raw Connect answer: HTTP 401
// with a JSON error, as a curl user would see it.
func TestUnauthenticatedConnectJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, err := http.NewRequest("POST", b.url+"/"+publisher+"/PublishEvent", strings.NewReader(`{"event":{"event_type":"a"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer nope-nope-nope")
	res, err := b.h1.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	var body struct{ Code, Message string }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	require.Equal(t, "unauthenticated", body.Code)
	require.NotContains(t, body.Message, "nope-nope-nope")
}

// recordingBody reports whether anyone read it.
type recordingBody struct{ read bool }

func (r *recordingBody) Read([]byte) (int, error) { r.read = true; return 0, nil }
func (r *recordingBody) Close() error             { return nil }

// TestAuthenticateBeforeTheBody: a rejected call's body is never read and
// the wrapped handler never runs; an accepted one runs with the
// principal in its context.
func TestAuthenticateBeforeTheBody(t *testing.T) {
	t.Parallel()
	var principal *auth.Principal
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := auth.FromContext(r.Context())
		require.NoError(t, err)
		principal = p
	})
	h := grpcapi.Authenticate(auth.DevToken("good-token"), next)

	body := &recordingBody{}
	req := httptest.NewRequest("POST", "/"+publisher+"/PublishEvent", nil)
	req.Body = body
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Authorization", "Bearer bad-token")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.False(t, body.read, "the body of a rejected call is not read")
	require.Nil(t, principal, "the handler did not run")
	require.Equal(t, http.StatusOK, rec.Code, "gRPC errors travel in trailers")
	require.Equal(t, "16", rec.Header().Get("Grpc-Status"), "16 is UNAUTHENTICATED")

	req = httptest.NewRequest("POST", "/"+publisher+"/PublishEvent", nil)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("authorization", "bearer good-token") // scheme is case-insensitive
	h.ServeHTTP(httptest.NewRecorder(), req)
	require.NotNil(t, principal)
	require.Equal(t, "herald:dev", principal.ID)
}

// TestAuthenticateNonRPC: a request in no RPC protocol (a browser's GET)
// gets the REST error shape.
func TestAuthenticateNonRPC(t *testing.T) {
	t.Parallel()
	h := grpcapi.Authenticate(auth.DevToken("good-token"), http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("PUT", "/"+publisher+"/PublishEvent", nil))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, `{"code":"unauthenticated","message":"authorization metadata \"Bearer <token>\" is required","detail":"authorization metadata \"Bearer <token>\" is required"}`, rec.Body.String())
}
