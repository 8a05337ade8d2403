package router_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/grpchealth"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
)

// TestReadinessOverRESTAndGRPC: while the broker check fails, GET
// /health/ready answers 503 naming it and gRPC health answers NOT_SERVING
// for the server and its services; GET /health stays 200; once the broker
// is back both answer ready.
func TestReadinessOverRESTAndGRPC(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	broker := health.Dependency{Name: "broker", Check: func(context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}
	// CacheFor of a nanosecond: every check runs (the cache has its own test).
	ready := health.NewChecker([]health.Dependency{broker}, health.Options{
		CacheFor: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
	})
	srv := httptest.NewServer(router.ForFunction(newService(t), auth.DevToken("tok"), config.Publish, router.Options{Ready: ready}))
	t.Cleanup(srv.Close)
	hc := grpchealth.NewClient(srv.Client(), srv.URL)

	status := func(path string) int {
		res, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res.StatusCode
	}
	grpcStatus := func(service string) grpchealth.Status {
		res, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: service})
		require.NoError(t, err)
		return res.Status
	}

	require.Equal(t, http.StatusOK, status("/health/ready"))
	require.Equal(t, grpchealth.StatusServing, grpcStatus(""))

	down.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, status("/health/ready"))
	require.Equal(t, http.StatusOK, status("/health"), "liveness does not depend on the broker")
	require.Equal(t, grpchealth.StatusNotServing, grpcStatus(""))
	require.Equal(t, grpchealth.StatusNotServing, grpcStatus(publisherv1betaconnect.EventPublishingServiceName))
	_, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: "no.such.Service"})
	require.Error(t, err, "an unknown service is NOT_FOUND whatever the dependencies")

	down.Store(false)
	require.Equal(t, http.StatusOK, status("/health/ready"))
	require.Equal(t, grpchealth.StatusServing, grpcStatus(""))
}
