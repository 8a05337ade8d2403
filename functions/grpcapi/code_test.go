package grpcapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/functions/grpcapi"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/logcheck"
	"github.com/heraldevents/herald/internal/testkit"
)

// TestCode holds the one herr → gRPC map to the table below, and fails
// when herr gains a code the table lacks.
func TestCode(t *testing.T) {
	t.Parallel()
	want := map[herr.Code]connect.Code{
		herr.Unknown:            connect.CodeInternal,
		herr.Malformed:          connect.CodeInvalidArgument,
		herr.InvalidArgument:    connect.CodeInvalidArgument,
		herr.OutOfRange:         connect.CodeInvalidArgument,
		herr.Unauthenticated:    connect.CodeUnauthenticated,
		herr.PermissionDenied:   connect.CodePermissionDenied,
		herr.NotFound:           connect.CodeNotFound,
		herr.AlreadyExists:      connect.CodeAlreadyExists,
		herr.FailedPrecondition: connect.CodeFailedPrecondition,
		herr.Aborted:            connect.CodeAborted,
		herr.ResourceExhausted:  connect.CodeResourceExhausted,
		herr.Unavailable:        connect.CodeUnavailable,
		herr.DeadlineExceeded:   connect.CodeDeadlineExceeded,
		herr.Canceled:           connect.CodeCanceled,
		herr.Internal:           connect.CodeInternal,
		herr.Unimplemented:      connect.CodeUnimplemented,
	}
	n := 0
	for c := herr.Code(0); !strings.HasPrefix(c.String(), "code("); c++ {
		n++
		w, ok := want[c]
		require.True(t, ok, "herr code %s has no row in this table: add it here and to grpcapi.Code", c)
		require.Equal(t, w, grpcapi.Code(c), "herr code %s", c)
	}
	require.Equal(t, len(want), n, "every row is a herr code")
}

// TestErrorIsSafe: the status carries the caller-safe message, never the
// cause; an uncoded error is INTERNAL with a generic message.
func TestErrorIsSafe(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 10.0.0.7:5672: password=hunter2")
	err := grpcapi.Error(context.Background(), "/p.S/M", herr.Wrap(herr.Unavailable, cause, "Unable to publish to the message broker"))
	require.Equal(t, connect.CodeUnavailable, err.Code())
	require.Equal(t, "Unable to publish to the message broker", err.Message())
	require.NotContains(t, err.Error(), "hunter2")

	err = grpcapi.Error(context.Background(), "/p.S/M", cause)
	require.Equal(t, connect.CodeInternal, err.Code())
	require.Equal(t, "internal error", err.Message())

	err = grpcapi.Error(context.Background(), "/p.S/M", herr.New(herr.PermissionDenied, "permission %q is required", "x"))
	require.Equal(t, connect.CodePermissionDenied, err.Code())
	require.Equal(t, `permission "x" is required`, err.Message())
}

// TestErrorLogsThroughTheRequestLogger: a server-side failure is logged
// once, through the logger of the request's access-log middleware (not
// slog.Default), naming the procedure, with the reconnect token its cause
// quotes cut out.
func TestErrorLogsThroughTheRequestLogger(t *testing.T) {
	t.Parallel()
	token := "nd-" + uuid.NewString()
	logs := &testkit.SyncBuffer{}
	leaks := logcheck.New()
	logger := slog.New(leaks.Handler(slog.NewJSONHandler(logs, nil)))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /p.S/", func(w http.ResponseWriter, r *http.Request) {
		err := grpcapi.Error(r.Context(), accesslog.Route(r), herr.Wrap(herr.Unavailable, fmt.Errorf("lease store: consumer %q: connection refused", token), "lease store: unavailable"))
		require.Equal(t, connect.CodeUnavailable, err.Code())
	})
	srv := httptest.NewServer(accesslog.Middleware(logger, mux))
	t.Cleanup(srv.Close)
	res, err := http.Post(srv.URL+"/p.S/M", "application/grpc", nil)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())

	require.Empty(t, leaks.Leaks())
	require.NotContains(t, logs.String(), token)
	var failed []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["msg"] == "rpc failed" {
			failed = append(failed, rec)
		}
	}
	require.Len(t, failed, 1, "%s", logs.String())
	require.Equal(t, "/p.S/M", failed[0]["procedure"])
	require.Contains(t, failed[0]["err"], token[:7]+"…")
}
