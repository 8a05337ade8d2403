package local_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth"
	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	consumerpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
	publisherpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/local"
)

// The identity-provider tests run Herald with an in-test OpenID Connect
// issuer (package jwttest: discovery and key set over httptest, keys
// generated in the test) and talk to it over REST, gRPC, SSE and
// WebSocket as a client of that issuer would.

// withIssuer configures an instance to accept iss's tokens for
// jwttest.DefaultAudience, beside its static token.
func withIssuer(iss *jwttest.Issuer, origins ...string) local.Option {
	return func(c *local.Config) {
		c.JWT = jwtauth.Config{Issuer: iss.URL, Audiences: []string{jwttest.DefaultAudience}}
		c.CORSOrigins = origins
	}
}

// as returns a client of c's instance that sends token.
func (c *client) as(token string) *client { return &client{base: c.base, token: token, hc: c.hc} }

// challengeOf returns the WWW-Authenticate of r.
func challengeOf(r *response) string { return r.Header.Get("WWW-Authenticate") }

// TestJWTPullAndAcknowledge is the "done when": read:events pulls
// and acknowledges; without it, 403 insufficient_scope; expired, 401
// invalid_token "token expired".
func TestJWTPullAndAcknowledge(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	admin := start(t, withIssuer(iss))
	id := admin.create(t, nil)
	admin.publish(t, ev("orders.created", "o-1", map[string]any{"n": 1}))

	// receive:… is the per-event right every delivery checks, as for
	// static tokens.
	reader := admin.as(iss.Token(t, "reader-svc", "read:events receive:orders.*"))
	l := reader.pullLease(t, id)
	require.Len(t, l.Events, 1)
	require.Equal(t, "committed", reader.ack(t, id, l.LeaseID, l.Generation, "ok").Status)

	other := admin.as(iss.Token(t, "other-svc", "openid publish:orders.*"))
	r := other.pull(t, id)
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	require.Contains(t, challengeOf(r), `error="insufficient_scope"`)
	require.Contains(t, challengeOf(r), "read:events")

	c := iss.Claims("reader-svc", "read:events")
	c["exp"] = time.Now().Add(-time.Hour).Unix()
	expired := iss.Sign(t, c)
	r = admin.as(expired).pull(t, id)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Equal(t, `Bearer realm="herald", error="invalid_token", error_description="token expired"`, challengeOf(r))
	require.Contains(t, string(r.Body), "token expired")
	containsNone(t, r.Body, expired, "reader-svc")
}

// TestJWTRefusals: every kind of bad token is a 401 invalid_token that
// says which check failed and repeats nothing of the token.
func TestJWTRefusals(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	claims := func(k string, v any) map[string]any {
		c := iss.Claims("alice", "manage:destinations")
		c[k] = v
		return c
	}
	now := time.Now()
	for desc, token := range map[string]string{
		"token expired":                        iss.Sign(t, claims("exp", now.Add(-time.Hour).Unix())),
		"token not yet valid":                  iss.Sign(t, claims("nbf", now.Add(time.Hour).Unix())),
		"wrong issuer":                         iss.Sign(t, claims("iss", "https://evil.example")),
		"wrong audience":                       iss.Sign(t, claims("aud", "https://elsewhere.example")),
		"token signing algorithm not accepted": iss.Unsigned(t, iss.Claims("alice", "*")),
	} {
		r, err := h.raw("GET", "/v1/event-destinations", token, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, r.Status, desc)
		require.Equal(t, `Bearer realm="herald", error="invalid_token", error_description="`+desc+`"`, challengeOf(r), desc)
		containsNone(t, r.Body, token, "alice")
	}
	// An HS256 token "signed" with the public key: the same refusal.
	r, err := h.raw("GET", "/v1/event-destinations", iss.HS256WithPublicKey(t, iss.Claims("alice", "*")), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Contains(t, challengeOf(r), "algorithm not accepted")

	// The scheme name is case-insensitive; no token is a bare challenge.
	r, err = h.rawWithHeader("GET", "/v1/event-destinations", "bearer "+iss.Token(t, "alice", "manage:destinations"), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r, err = h.raw("GET", "/v1/event-destinations", "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Equal(t, `Bearer realm="herald"`, challengeOf(r))

	// Static tokens keep working beside the issuer's.
	h.expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil)
}

// TestJWTRotatedKey: a token signed with a key the issuer published after
// Herald cached its set is accepted after one fetch.
func TestJWTRotatedKey(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	h.as(iss.Token(t, "alice", "manage:destinations")).expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil)
	before := iss.KeySetFetches()
	iss.Rotate(t)
	h.as(iss.Token(t, "alice", "manage:destinations")).expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil)
	require.Equal(t, before+1, iss.KeySetFetches())
}

// TestJWTIssuerDown: keys that cannot be fetched are 503 on REST, SSE and
// WebSocket and UNAVAILABLE on gRPC, never 401; static tokens still work.
func TestJWTIssuerDown(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	iss.SetDown(true)
	h := start(t, withIssuer(iss))
	token := iss.Token(t, "alice", "*")
	for _, path := range []string{"/v1/event-destinations", streamPath(), wsbridge.Path} {
		r, err := h.raw("GET", path, token, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s: %s", path, r.Body)
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Empty(t, challengeOf(r))
	}
	_, err := publisher(t, h).PublishEvent(t.Context(), rpc(&publisherpb.PublishEventRequest{Event: &publisherpb.Event{EventType: "a.b"}}, token))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
	h.expect(t, http.StatusOK, "GET", "/v1/event-destinations", nil)
}

// TestJWTScopesOnEveryRoute: each route admits a token holding exactly
// its permission (either spelling of the consumer-service ones) and
// answers 403 insufficient_scope to one holding every other. The routes
// come from the router, so a route added without a case here fails the
// test instead of escaping the scope check. Every answer of an
// authenticated route, refusals included, is Cache-Control: no-store: it
// carries what only its caller may see (events, principal ids, reconnect
// tokens).
func TestJWTScopesOnEveryRoute(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	dest := h.create(t, nil)
	doomed := h.create(t, nil)
	all := []string{"publish:orders.*", "manage:destinations", "read:events", "receive:orders.*", "run:jobs",
		"consume-durable-queues", "create-durable-queues", "delete-durable-queues", "inspect-and-replay-all-dlq"}
	without := func(perm string) string {
		var out []string
		for _, p := range all {
			if p != strings.TrimPrefix(perm, "event-consumer-service:") {
				out = append(out, p)
			}
		}
		return strings.Join(out, " ")
	}
	const queue = "jwt-scopes-q"
	groups := `[{"event_type":"orders.created"}]`
	// In the order they run. The pull comes before the publish: an event
	// of orders.created would be withheld from a token without
	// receive:orders.* (403, see TestStreamPermissionsE2E), which is not
	// what this test is about. perm "" marks a route that needs only a
	// valid token; what its frames may do is checked per frame
	// (TestJWTWebSocket).
	cases := []struct {
		route            string // "METHOD PATTERN", as router.Routes names it
		perm, path, body string
		ok               int
	}{
		{"GET /v1/event-destinations", "manage:destinations", "/v1/event-destinations", "", http.StatusOK},
		{"POST /v1/event-destinations", "manage:destinations", "/v1/event-destinations", `{"type":"DURABLE_CONSUMER"}`, http.StatusCreated},
		{"GET /v1/event-destinations/{id}", "manage:destinations", "/v1/event-destinations/" + dest, "", http.StatusOK},
		{"GET /v1/event-destinations/{id}/leases", "manage:destinations", "/v1/event-destinations/" + dest + "/leases", "", http.StatusOK},
		{"GET /v1/info", "manage:destinations", "/v1/info", "", http.StatusOK},
		{"POST /v1/event-destinations/{id}/pause", "manage:destinations", "/v1/event-destinations/" + dest + "/pause", "", http.StatusOK},
		{"POST /v1/event-destinations/{id}/resume", "manage:destinations", "/v1/event-destinations/" + dest + "/resume", "", http.StatusOK},
		// dest is no webhook: 404 once the scope let the request through.
		{"POST /v1/event-destinations/{id}/rotate-secret", "manage:destinations", "/v1/event-destinations/" + dest + "/rotate-secret", "", http.StatusNotFound},
		{"GET /v1/event-destinations/{id}/attempts", "manage:destinations", "/v1/event-destinations/" + dest + "/attempts", "", http.StatusNotFound},
		{"DELETE /v1/event-destinations/{id}", "manage:destinations", "/v1/event-destinations/" + doomed, "", http.StatusNoContent},
		{"PATCH /v1/event-destinations/{id}", "manage:destinations", "/v1/event-destinations/" + dest, `{"dead_letter_policy":{"max_delivery_attempts":5}}`, http.StatusOK},
		{"POST /v1/event-destinations/{id}/pull", "read:events", pullPath(dest, nil), "", http.StatusNoContent},
		{"POST /v1/event-destinations/{id}/acknowledge", "read:events", "/v1/event-destinations/" + dest + "/acknowledge", `{"leaseId":"nope","generation":0,"status":"ok"}`, http.StatusOK},
		{"POST /v1/event-destinations/{id}/extend", "read:events", "/v1/event-destinations/" + dest + "/extend", `{"leaseId":"nope","generation":0,"visibility":60}`, http.StatusOK},
		{"POST /api/v1beta/events", "publish:orders.*", "/api/v1beta/events", `{"event":{"event_type":"orders.created"}}`, http.StatusOK},
		{"POST /api/v1beta/events/batch", "publish:orders.*", "/api/v1beta/events/batch", `{"events":[{"event_type":"orders.created"}]}`, http.StatusOK},
		{"GET /api/v1beta/events/stream", "receive:orders.*", streamPath("filter_groups", groups), "", http.StatusOK},
		{"POST /api/v1beta/queues/durable", "event-consumer-service:create-durable-queues", "/api/v1beta/queues/durable", `{"queue_id":"` + queue + `","filter_groups":` + groups + `}`, http.StatusCreated},
		{"GET /api/v1beta/events/stream-durable", "consume-durable-queues", durablePath(queue), "", http.StatusOK},
		{"PATCH /api/v1beta/queues/durable", "create-durable-queues", "/api/v1beta/queues/durable", `{"queue_id":"` + queue + `","current_filter_groups":` + groups + `,"new_filter_groups":[{"event_type":"orders.updated"}]}`, http.StatusOK},
		{"DELETE /api/v1beta/queues/durable", "delete-durable-queues", "/api/v1beta/queues/durable?queue_id=" + queue, "", http.StatusOK},
		{"GET " + wsbridge.Path, "", wsbridge.Path, "", http.StatusUpgradeRequired},
		{"GET /api/v1beta/dead-letters", "event-consumer-service:inspect-and-replay-all-dlq", "/api/v1beta/dead-letters", "", http.StatusOK},
		{"POST /api/v1beta/dead-letters/actions", "inspect-and-replay-all-dlq", "/api/v1beta/dead-letters/actions", `{"actions":[{"id":"nope","action":"LEAVE"}]}`, http.StatusOK},
		{"POST /v1/jobs/{job}", "run:jobs", "/v1/jobs/lease-expiry", "", http.StatusOK},
	}

	// A batch publish answers a refused event in its per-event result
	// (success:false), not with 403.
	const perEvent = "POST /api/v1beta/events/batch"
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.route] = true
	}
	for _, r := range router.Routes() {
		if !r.Public {
			require.True(t, covered[r.Method+" "+r.Path], "route %s %s has no case in this test", r.Method, r.Path)
		}
	}

	for _, c := range cases {
		method := strings.Fields(c.route)[0]
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r := h.head(t, method, c.path, "", body)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s without a token: %s", c.route, r.Body)
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"), "%s: a 401", c.route)
		if c.perm != "" {
			r = h.head(t, method, c.path, iss.Token(t, "svc", without(c.perm)), body)
			if c.route == perEvent {
				require.Equal(t, http.StatusOK, r.Status, "%s without %s: %s", c.route, c.perm, r.Body)
				require.Contains(t, string(r.Body), `"success":false,"failure_reason":"not authorized`, c.route)
			} else {
				require.Equal(t, http.StatusForbidden, r.Status, "%s without %s: %s", c.route, c.perm, r.Body)
				require.Contains(t, challengeOf(r), `error="insufficient_scope"`, c.route)
			}
			require.Equal(t, "no-store", r.Header.Get("Cache-Control"), "%s: a refusal", c.route)
		}
		r = h.head(t, method, c.path, iss.Token(t, "svc", c.perm), body)
		require.Equal(t, c.ok, r.Status, "%s with %q: %s", c.route, c.perm, r.Body)
		if c.route == perEvent {
			require.Contains(t, string(r.Body), `"success":true`, c.route)
		}
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"), "%s: its answer", c.route)
	}
}

// head sends body (nil for none) with token ("" for none) and returns the
// answer's status and headers, and its body unless it is an event stream,
// which it leaves open no longer than it takes to read the headers.
func (c *client) head(t *testing.T, method, path, token string, body []byte) *response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Transport: c.hc.Transport}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out := &response{Status: res.StatusCode, Header: res.Header}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		out.Body, err = io.ReadAll(res.Body)
		require.NoError(t, err)
	}
	return out
}

// TestJWTPrincipalIdentity: a published event names the token's sub.
func TestJWTPrincipalIdentity(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	consumer := h.as(iss.Token(t, "consumer-svc", "receive:orders.*"))
	s := consumer.mustStream(t, streamPath(), nil)
	defer s.close()
	s.connected(t)
	h.as(iss.Token(t, "billing-svc", "publish:orders.*")).publish(t, ev("orders.paid", "o-2", map[string]any{"n": 2}))
	e := s.event(t)
	require.Equal(t, "orders.paid", e.EventType)
	require.Equal(t, "billing-svc", e.PrincipalIdentity)
}

// TestJWTStreams: the SSE stream takes a JWT in the header or the
// access_token parameter; a receive-less or expired one is refused.
func TestJWTStreams(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	token := iss.Token(t, "alice", "receive:*")
	s := h.as(token).mustStream(t, streamPath(), nil)
	s.connected(t)
	s.close()
	q := h.as("").mustStream(t, streamPath("access_token", token), nil)
	q.connected(t)
	q.close()

	_, r := h.as(iss.Token(t, "alice", "read:events")).openStream(t, streamPath(), nil)
	require.Equal(t, http.StatusForbidden, r.Status)
	require.Contains(t, challengeOf(r), "insufficient_scope")
	c := iss.Claims("alice", "receive:*")
	c["exp"] = time.Now().Add(-time.Hour).Unix()
	_, r = h.as(iss.Sign(t, c)).openStream(t, streamPath(), nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Contains(t, challengeOf(r), "token expired")
}

// TestJWTWebSocket: the WebSocket takes a JWT; a bad one is refused before
// the upgrade; a browser Origin must be the server's own or in
// HERALD_CORS_ORIGINS.
func TestJWTWebSocket(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss, "https://app.example.com"))
	endpoint := "ws" + strings.TrimPrefix(h.base, "http") + wsbridge.Path
	harness := &wstest.Harness{Dial: wstest.Dialer(endpoint), Push: true}
	c := wstest.Dial(t, harness, iss.Token(t, "alice", "receive:*"))
	c.Open(map[string]any{"stream": "non_durable"})
	c.Quiet()

	c2 := iss.Claims("alice", "receive:*")
	c2["aud"] = "https://elsewhere.example"
	_, res, err := harness.Dial(t, iss.Sign(t, c2), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, res.Header.Get("WWW-Authenticate"), "wrong audience")

	dial := func(origin string) *http.Response {
		hdr := http.Header{"Authorization": {"Bearer " + iss.Token(t, "alice", "receive:*")}, "Origin": {origin}}
		d := websocket.Dialer{HandshakeTimeout: wstest.FrameWait, Subprotocols: []string{wsframe.Subprotocol}}
		ws, res, err := d.Dial(endpoint, hdr)
		if err == nil {
			_ = ws.Close()
		}
		return res
	}
	require.Equal(t, http.StatusSwitchingProtocols, dial("https://app.example.com").StatusCode, "a listed origin")
	require.Equal(t, http.StatusSwitchingProtocols, dial(h.base).StatusCode, "the server's own origin")
	require.Equal(t, http.StatusForbidden, dial("https://evil.example").StatusCode, "another origin")
}

// TestCORS: preflights of listed origins are answered with the methods and
// headers a browser app needs; other origins get no CORS headers; no
// list, no CORS.
func TestCORS(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss, "https://app.example.com"))
	preflight := func(c *client, origin, method, headers string) *http.Response {
		req, err := http.NewRequest("OPTIONS", c.base+"/api/v1beta/events/stream", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", headers)
		res, err := c.hc.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res
	}
	res := preflight(h, "https://app.example.com", "GET", "authorization,last-event-id")
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	require.Equal(t, "https://app.example.com", res.Header.Get("Access-Control-Allow-Origin"))
	require.Empty(t, res.Header.Get("Access-Control-Allow-Credentials"))
	require.Contains(t, strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")), "authorization")
	require.Contains(t, strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")), "last-event-id")
	res = preflight(h, "https://app.example.com", "POST", "authorization,content-type")
	require.Contains(t, res.Header.Get("Access-Control-Allow-Methods"), "POST")

	res = preflight(h, "https://evil.example", "GET", "authorization")
	require.Empty(t, res.Header.Get("Access-Control-Allow-Origin"))

	// An actual request from a listed origin may read the answer, a 401 too.
	req, _ := http.NewRequest("GET", h.base+"/v1/event-destinations", nil)
	req.Header.Set("Origin", "https://app.example.com")
	r, err := h.hc.Do(req)
	require.NoError(t, err)
	_ = r.Body.Close()
	require.Equal(t, http.StatusUnauthorized, r.StatusCode)
	require.Equal(t, "https://app.example.com", r.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, r.Header.Get("Access-Control-Expose-Headers"), "Www-Authenticate")

	plain := start(t)
	res = preflight(plain, "https://app.example.com", "GET", "authorization")
	require.Empty(t, res.Header.Get("Access-Control-Allow-Origin"), "no HERALD_CORS_ORIGINS, no CORS")
}

// TestJWTGRPC: the gRPC services map the same cases to UNAUTHENTICATED,
// PERMISSION_DENIED and success.
func TestJWTGRPC(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	h := start(t, withIssuer(iss))
	pub := publisher(t, h)
	req := func(token string) *connect.Request[publisherpb.PublishEventRequest] {
		return rpc(&publisherpb.PublishEventRequest{Event: &publisherpb.Event{EventType: "orders.created"}}, token)
	}
	_, err := pub.PublishEvent(t.Context(), req(iss.Token(t, "alice", "publish:orders.*")))
	require.NoError(t, err)
	_, err = pub.PublishEvent(t.Context(), req(iss.Token(t, "alice", "publish:billing.*")))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	c := iss.Claims("alice", "publish:orders.*")
	c["exp"] = time.Now().Add(-time.Hour).Unix()
	_, err = pub.PublishEvent(t.Context(), req(iss.Sign(t, c)))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
	require.Contains(t, err.Error(), "token expired")
	_, err = pub.PublishEvent(t.Context(), req(""))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))

	cons := consumerv1betaconnect.NewEventConsumerServiceClient(h2cClient(t), h.base, connect.WithGRPC())
	_, err = cons.CreateDurableQueue(t.Context(), rpc(&consumerpb.CreateDurableQueueRequest{QueueId: "jwt-grpc-q"}, iss.Token(t, "alice", "receive:*")))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	_, err = cons.CreateDurableQueue(t.Context(), rpc(&consumerpb.CreateDurableQueueRequest{QueueId: "jwt-grpc-q"}, iss.Token(t, "alice", "event-consumer-service:create-durable-queues")))
	require.NoError(t, err)
}

// h2cClient speaks cleartext HTTP/2, as native gRPC clients do.
func h2cClient(t *testing.T) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// publisher is a gRPC client of h's EventPublishingService.
func publisher(t *testing.T, h *client) publisherv1betaconnect.EventPublishingServiceClient {
	return publisherv1betaconnect.NewEventPublishingServiceClient(h2cClient(t), h.base, connect.WithGRPC())
}

// rpc wraps msg with `authorization: Bearer token` metadata ("" for none).
func rpc[T any](msg *T, token string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if token != "" {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	return r
}
