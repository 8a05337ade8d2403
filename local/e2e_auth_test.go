package local_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/internal/version"
)

// TestAuthE2E checks that every route but GET /health demands a valid
// bearer token, and that a refusal never echoes the presented token. The
// routes come from the router's own table, so a route added later is
// covered without touching this test.
func TestAuthE2E(t *testing.T) {
	t.Parallel()
	c := start(t)
	id := c.create(t, nil)
	const wrong = "wrong-token-s3cr3t-value"
	headers := map[string]string{
		"missing header":         "",
		"wrong token":            "Bearer " + wrong,
		"wrong scheme":           "Basic " + wrong,
		"token without scheme":   wrong,
		"empty bearer":           "Bearer ",
		"right token, no scheme": c.token,
	}
	bodies := map[string]string{
		"/api/v1beta/events":                      `{"event":{"event_type":"a.b"}}`,
		"/api/v1beta/events/batch":                `{"events":[{"event_type":"a.b"}]}`,
		"/v1/event-destinations":                  `{"type":"DURABLE_CONSUMER"}`,
		"/v1/event-destinations/{id}/acknowledge": `{"leaseId":"x","generation":0,"status":"ok"}`,
		"/v1/event-destinations/{id}/extend":      `{"leaseId":"x","generation":0,"visibility":60}`,
	}

	protected := 0
	for _, rt := range router.Routes() {
		path := strings.NewReplacer("{id}", id, "{job}", "expire-leases").Replace(rt.Path)
		var body []byte
		if b, ok := bodies[rt.Path]; ok {
			body = []byte(b)
		}
		if rt.Public {
			t.Run(rt.Method+" "+rt.Path+" needs no token", func(t *testing.T) {
				for _, h := range headers {
					r, err := c.rawWithHeader(rt.Method, path, h, body)
					require.NoError(t, err)
					require.Equal(t, http.StatusOK, r.Status, "Authorization %q", h)
				}
			})
			continue
		}
		protected++
		for name, h := range headers {
			t.Run(rt.Method+" "+rt.Path+": "+name, func(t *testing.T) {
				r, err := c.rawWithHeader(rt.Method, path, h, body)
				require.NoError(t, err)
				checkUnauthorized(t, r, wrong, c.token)
				if h == "" {
					// The message names the access_token parameter
					// exactly where it is accepted.
					require.Equal(t, rt.QueryToken, strings.Contains(string(r.Body), "access_token"), "%s", r.Body)
				}
			})
		}
	}
	require.GreaterOrEqual(t, protected, 10, "every documented endpoint is in the router's table")

	t.Run("refused calls change nothing", func(t *testing.T) {
		d := c.getDest(t, id)
		require.False(t, d.Paused)
	})

	t.Run("health answers ok without a token", func(t *testing.T) {
		r, err := c.raw("GET", "/health", "", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, `{"status":"ok","version":"`+version.Get().Version+`"}`, string(r.Body))
		r, err = c.raw("GET", "/health/ready", "", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, `{"status":"ok","checks":{"broker":"ok","store":"ok"}}`, string(r.Body))
	})

	t.Run("the right token is accepted with a case-insensitive scheme", func(t *testing.T) {
		r, err := c.rawWithHeader("GET", "/v1/event-destinations", "bearer "+c.token, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
	})
}

// TestPermissionsE2E serves router.New over httptest with principals that
// hold only some permissions: an authenticated caller without the needed
// one gets 403, and one with it gets through.
func TestPermissionsE2E(t *testing.T) {
	t.Parallel()
	svc := inmem.New(t, inmem.Options{}).Service
	tokens := auth.StaticTokens{
		"admin":     {ID: "admin", Permissions: []string{auth.PermManageDestinations}},
		"reader":    {ID: "reader", Permissions: []string{auth.PermReadEvents, "receive:orders.*"}},
		"publisher": {ID: "publisher", Permissions: []string{"publish:orders.*"}},
	}
	srv := httptest.NewServer(router.New(svc, tokens))
	t.Cleanup(srv.Close)
	as := func(token string) *client {
		return &client{base: srv.URL, token: token, hc: srv.Client()}
	}
	admin, reader, publisher := as("admin"), as("reader"), as("publisher")

	id := admin.create(t, nil)
	for _, who := range []*client{reader, publisher} {
		e := who.expectError(t, http.StatusForbidden, "POST", "/v1/event-destinations", `{"type":"DURABLE_CONSUMER"}`)
		require.Equal(t, "permission_denied", e.Code)
		who.expectError(t, http.StatusForbidden, "GET", "/v1/event-destinations/"+id, nil)
		who.expectError(t, http.StatusForbidden, "DELETE", "/v1/event-destinations/"+id, nil)
	}
	for _, who := range []*client{admin, publisher} {
		who.expectError(t, http.StatusForbidden, "POST", pullPath(id, nil), nil)
		who.expectError(t, http.StatusForbidden, "POST", "/v1/event-destinations/"+id+"/acknowledge",
			`{"leaseId":"x","generation":0,"status":"ok"}`)
	}
	for _, who := range []*client{admin, reader} {
		who.expectError(t, http.StatusForbidden, "POST", "/api/v1beta/events", map[string]any{"event": ev("orders.created", "", nil)})
	}

	// The publisher may publish orders.* only: in a batch the other type
	// fails alone.
	publisher.expectError(t, http.StatusForbidden, "POST", "/api/v1beta/events", map[string]any{"event": ev("users.created", "", nil)})
	r := publisher.expect(t, http.StatusOK, "POST", "/api/v1beta/events/batch",
		map[string]any{"events": []map[string]any{ev("orders.created", "/o/1", nil), ev("users.created", "", nil)}})
	var out struct {
		Results []publishResult `json:"results"`
	}
	r.decode(t, &out)
	require.True(t, out.Results[0].Success)
	require.False(t, out.Results[1].Success)
	require.NotEmpty(t, out.Results[1].FailureReason)

	// The reader pulls what the publisher published, stamped with the
	// publisher's identity, never its token.
	l := reader.pullLease(t, id)
	require.Len(t, l.Events, 1)
	require.Contains(t, string(l.Events[0]), `"principalidentity":"publisher"`)
	require.Equal(t, "committed", reader.ack(t, id, l.LeaseID, l.Generation, "ok").Status)
}

// checkUnauthorized asserts a 401 with a JSON error body and a
// WWW-Authenticate challenge that contain none of the secrets.
func checkUnauthorized(t *testing.T, r *response, secrets ...string) {
	t.Helper()
	require.Equal(t, http.StatusUnauthorized, r.Status, "body %s", r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var e errorBody
	r.decode(t, &e)
	require.Equal(t, "unauthenticated", e.Code)
	require.NotEmpty(t, e.Message)
	require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer")
	containsNone(t, r.Body, secrets...)
	containsNone(t, []byte(r.Header.Get("WWW-Authenticate")), secrets...)
}
