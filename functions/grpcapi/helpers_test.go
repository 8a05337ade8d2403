package grpcapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/grpcapi"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// Tokens of the test server.
const (
	allToken  = "all-token-0123456789"  // every permission, principal "dev"
	shopToken = "shop-token-0123456789" // publish:shop.*, principal "shop-app"
	noneToken = "none-token-0123456789" // no permission, principal "idle"
	watchSub  = "watch"                 // subscription that sees every published event
	timeout   = 30 * time.Second        // bound on any one test call
	publisher = publisherv1betaconnect.EventPublishingServiceName
)

// publishTime is the test server's clock: every event is published then.
var publishTime = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// bundle is a test server: grpcapi.Mounts over a delivery.Service whose
// mem broker has one subscription (watchSub) that receives everything.
type bundle struct {
	broker *pubsubx.Broker
	url    string
	h2c    *http.Client // HTTP/2 without TLS, as gRPC clients speak to a local Herald
	h1     *http.Client // HTTP/1.1 only
}

// setup starts the server. wrap, if set, wraps the broker the service
// publishes to (the watch subscription stays on the real one).
func setup(t *testing.T, wrap func(driver.Broker) driver.Broker) *bundle {
	t.Helper()
	broker := mem.New(0)
	t.Cleanup(func() { require.NoError(t, broker.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, broker.CreateSubscription(ctx, watchSub, nil))
	published := broker
	if wrap != nil {
		published = pubsubx.NewBroker(wrap(broker.Driver()))
	}
	svc := delivery.New(delivery.Config{Broker: published, Source: "/test", Now: func() time.Time { return publishTime }})
	tokens := auth.StaticTokens{
		allToken:  {ID: "dev", Permissions: []string{auth.PermAll}},
		shopToken: {ID: "shop-app", Permissions: []string{auth.PermPublishPrefix + "shop.*"}},
		noneToken: {ID: "idle"},
	}
	mux := http.NewServeMux()
	for _, m := range grpcapi.Mounts(svc, tokens, grpcapi.Services{Publisher: true}) {
		mux.Handle(m.Path, m.Handler)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)

	h2 := new(http.Protocols)
	h2.SetUnencryptedHTTP2(true)
	h2c := &http.Transport{Protocols: h2}
	h1 := &http.Transport{}
	t.Cleanup(h2c.CloseIdleConnections)
	t.Cleanup(h1.CloseIdleConnections)
	return &bundle{
		broker: broker, url: srv.URL,
		h2c: &http.Client{Transport: h2c, Timeout: timeout},
		h1:  &http.Client{Transport: h1, Timeout: timeout},
	}
}

// client returns a publisher client speaking gRPC over h2c, with opts
// (e.g. connect.WithGRPCWeb()) replacing the protocol.
func (b *bundle) client(opts ...connect.ClientOption) publisherv1betaconnect.EventPublishingServiceClient {
	if len(opts) == 0 {
		opts = []connect.ClientOption{connect.WithGRPC()}
	}
	return publisherv1betaconnect.NewEventPublishingServiceClient(b.h2c, b.url, opts...)
}

// request wraps msg with `authorization: Bearer token` metadata ("" for
// none).
func request[T any](msg *T, token string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	return req
}

// cloudEvent is the part of a published CloudEvent the tests check.
type cloudEvent struct {
	SpecVersion       string          `json:"specversion"`
	ID                string          `json:"id"`
	Type              string          `json:"type"`
	Source            string          `json:"source"`
	Subject           string          `json:"subject"`
	Time              string          `json:"time"`
	DataContentType   string          `json:"datacontenttype"`
	Data              json.RawMessage `json:"data"`
	PrincipalIdentity string          `json:"principalidentity"`
}

// received returns the n events the watch subscription holds, decoded,
// and acknowledges them; it fails the test if fewer arrive. Publish has
// returned before this is called, so every event is already there: no
// waiting is involved.
func (b *bundle) received(t *testing.T, n int) []cloudEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []cloudEvent
	for len(out) < n {
		msgs, err := b.broker.Receive(ctx, watchSub, pubsubx.ReceiveParams{Max: n - len(out), Wait: 0})
		require.NoError(t, err)
		require.NotEmpty(t, msgs, "the broker holds %d of %d events", len(out), n)
		for _, m := range msgs {
			var ce cloudEvent
			require.NoError(t, json.Unmarshal(m.Body, &ce))
			out = append(out, ce)
		}
		require.NoError(t, b.broker.Ack(ctx, watchSub, msgs))
	}
	return out
}

// requireCode asserts that err is a connect error with code and a message
// containing msg.
func requireCode(t *testing.T, err error, code connect.Code, msg string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, connect.CodeOf(err), "error: %v", err)
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Message(), msg)
}

// newClient is a publisher client over hc: Connect protocol unless opts
// say otherwise.
func newClient(hc connect.HTTPClient, url string, opts ...connect.ClientOption) publisherv1betaconnect.EventPublishingServiceClient {
	return publisherv1betaconnect.NewEventPublishingServiceClient(hc, url, opts...)
}
