package jobs_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storetest"
)

type fixture struct {
	t     *testing.T
	h     http.Handler
	svc   *delivery.Service
	store *leasestore.Store
	clock *storetest.Clock
}

var tokens = auth.StaticTokens{
	"admin":     {ID: "admin", Permissions: []string{auth.PermAll}},
	"scheduler": {ID: "cloud-scheduler", Permissions: []string{auth.PermRunJobs}},
	"worker":    {ID: "worker", Permissions: []string{auth.PermReadEvents, "receive:*"}},
}

func setup(t *testing.T) *fixture {
	t.Helper()
	clock := storetest.NewClock()
	svc := inmem.New(t, inmem.Options{Config: delivery.Config{Now: clock.Now}})
	return &fixture{t: t, h: router.New(svc.Service, tokens), svc: svc.Service, store: svc.Store, clock: clock}
}

func (f *fixture) do(method, path, token, body string) (int, map[string]any) {
	f.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		require.NoError(f.t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	}
	return rec.Code, out
}

func TestLeaseExpiryJobOverHTTP(t *testing.T) {
	t.Parallel()
	f := setup(t)
	code, d := f.do("POST", "/v1/event-destinations", "admin", `{"type":"DURABLE_CONSUMER"}`)
	require.Equal(t, http.StatusCreated, code)
	id := d["id"].(string)
	for range 3 {
		code, _ = f.do("POST", "/api/v1beta/events", "admin", `{"event":{"event_type":"a.b","message":{}}}`)
		require.Equal(t, http.StatusOK, code)
	}
	code, _ = f.do("POST", "/v1/event-destinations/"+id+"/pull?limit=2&visibility=5&workerId=w1", "worker", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = f.do("POST", "/v1/event-destinations/"+id+"/pull?limit=1&visibility=60&workerId=w2", "worker", "")
	require.Equal(t, http.StatusOK, code)

	// Nothing expired yet.
	code, res := f.do("POST", "/v1/jobs/lease-expiry", "scheduler", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]any{"job": "lease-expiry", "consumers": 1.0, "requeued_leases": 0.0, "requeued_events": 0.0, "failed": 0.0}, res)

	f.clock.Advance(5 * time.Second)
	code, res = f.do("POST", "/v1/jobs/lease-expiry", "scheduler", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 1.0, res["requeued_leases"])
	require.Equal(t, 2.0, res["requeued_events"])

	code, d = f.do("GET", "/v1/event-destinations/"+id, "admin", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 3.0, d["in_flight"])
	require.Equal(t, 2.0, d["requeued"])
}

func TestJobPermissionsAndNames(t *testing.T) {
	t.Parallel()
	f := setup(t)
	code, res := f.do("POST", "/v1/jobs/lease-expiry", "worker", "")
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "permission_denied", res["code"])
	code, _ = f.do("POST", "/v1/jobs/lease-expiry", "nobody", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, res = f.do("POST", "/v1/jobs/compact-everything", "scheduler", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, res["message"], "lease-expiry")
	code, _ = f.do("GET", "/v1/jobs/lease-expiry", "scheduler", "")
	require.Equal(t, http.StatusNotFound, code, "only POST runs a job")
}

func TestRunAsScheduler(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res, err := jobs.Run(t.Context(), f.svc, jobs.SchedulerPrincipal, jobs.LeaseExpiry, jobs.Options{})
	require.NoError(t, err)
	require.Equal(t, &jobs.Result{Job: jobs.LeaseExpiry}, res)
	_, err = jobs.Run(t.Context(), f.svc, &auth.Principal{ID: "p", Permissions: []string{auth.PermReadEvents}}, jobs.LeaseExpiry, jobs.Options{})
	require.Error(t, err)
	require.Equal(t, []string{"lease-expiry", "reap-idle-queues", "push-webhooks"}, jobs.Names())
	res, err = jobs.Run(t.Context(), f.svc, jobs.SchedulerPrincipal, jobs.PushWebhooks, jobs.Options{})
	require.NoError(t, err)
	require.Equal(t, jobs.PushWebhooks, res.Job)
	require.NotNil(t, res.Delivered)
	require.Zero(t, *res.Delivered)
	res, err = jobs.Run(t.Context(), f.svc, jobs.SchedulerPrincipal, jobs.ReapIdleQueues, jobs.Options{})
	require.NoError(t, err)
	require.Equal(t, jobs.ReapIdleQueues, res.Job)
	require.NotNil(t, res.ReapedQueues)
	require.Zero(t, *res.ReapedQueues)
	require.NotNil(t, res.ReapedClaims)
	require.Zero(t, *res.ReapedClaims)
}

// TestReapClaims checks that reap-idle-queues deletes the claim-check
// claims older than the retention (default 336h) and reports them.
func TestReapClaims(t *testing.T) {
	t.Parallel()
	f := setup(t)
	require.NoError(t, f.store.PutClaim(t.Context(), "old", []byte(`{"a":1}`)))
	f.clock.Advance(time.Hour)
	require.NoError(t, f.store.PutClaim(t.Context(), "new", []byte(`{"a":2}`)))
	f.clock.Advance(delivery.DefaultClaimRetention - time.Hour + time.Millisecond)
	code, res := f.do("POST", "/v1/jobs/reap-idle-queues", "scheduler", "")
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 1, res["reaped_claims"])
	_, err := f.store.GetClaim(t.Context(), "old")
	require.Equal(t, herr.NotFound, herr.CodeOf(err))
	_, err = f.store.GetClaim(t.Context(), "new")
	require.NoError(t, err)
}

// TestReapRunsTheConnectionCloser: reap-idle-queues runs the closer it is
// given, as its caller, and reports its count and error; without one it
// reports none reaped.
func TestReapRunsTheConnectionCloser(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var got *auth.Principal
	closer := func(_ context.Context, svc *delivery.Service, p *auth.Principal) (int, error) {
		require.Same(t, f.svc, svc)
		got = p
		return 3, herr.New(herr.Unavailable, "store down")
	}
	res, err := jobs.Run(t.Context(), f.svc, jobs.SchedulerPrincipal, jobs.ReapIdleQueues, jobs.Options{CloseStaleConnections: closer})
	require.Equal(t, herr.Unavailable, herr.CodeOf(err))
	require.Same(t, jobs.SchedulerPrincipal, got)
	require.Equal(t, 3, *res.ReapedConnections)

	res, err = jobs.Run(t.Context(), f.svc, jobs.SchedulerPrincipal, jobs.ReapIdleQueues, jobs.Options{})
	require.NoError(t, err)
	require.NotNil(t, res.ReapedConnections, "the count is always reported")
	require.Zero(t, *res.ReapedConnections)
}
