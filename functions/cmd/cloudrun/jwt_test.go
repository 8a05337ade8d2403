package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth/jwtauth/jwttest"
	"github.com/heraldevents/herald/internal/emulators"
)

// TestServesJWTs: the Cloud Run server reads HERALD_JWT_*, starts without
// static tokens and accepts the issuer's JWTs.
func TestServesJWTs(t *testing.T) {
	iss := jwttest.New(t)
	port := emulators.FreePort(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, slog.New(slog.NewJSONHandler(io.Discard, nil)), env(map[string]string{
			"PORT": strconv.Itoa(port), "HERALD_FUNCTION": "publish",
			"HERALD_TOPIC_URL": "mem://cloudrun-jwt-test", "HERALD_STORE_URL": "mem://cloudrun-jwt-test/key",
			"HERALD_JWT_ISSUER": iss.URL, "HERALD_JWT_AUDIENCE": jwttest.DefaultAudience,
		}), func(addr string) { ready <- addr })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	post := func(token string) int {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:"+strconv.Itoa(port)+"/api/v1beta/events", strings.NewReader(`{"event":{"event_type":"a.b"}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, post(iss.Token(t, "svc", "publish:a.*")))
	require.Equal(t, http.StatusForbidden, post(iss.Token(t, "svc", "read:events")))
	require.Equal(t, http.StatusUnauthorized, post("not-a-known-token"))
	cancel()
	require.NoError(t, <-done)
}
