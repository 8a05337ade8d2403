package app_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/herr"
)

func cfg(f config.Function, topic, store string) config.Config {
	c := config.Defaults(config.Lambda)
	c.Function, c.TopicURL, c.StoreURL = f, topic, store
	c.DevToken = "a-token-of-sixteen-characters"
	return c
}

func TestOpenOpensOnlyWhatTheFunctionUses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	quiet := app.Options{Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}

	// acknowledge never opens the broker; publish opens the store (the
	// claim-check keeps events too big for the broker there).
	_, err := app.Open(ctx, cfg(config.Publish, "mem://app-test-1", "nosuch://x"), quiet)
	require.ErrorContains(t, err, config.EnvStoreURL)
	a, err := app.Open(ctx, cfg(config.Acknowledge, "nosuch://x", "mem://app-test-1/key"), quiet)
	require.NoError(t, err)
	require.NoError(t, a.Close())

	_, err = app.Open(ctx, cfg(config.Pull, "mem://app-test-2", "nosuch://x"), quiet)
	require.ErrorContains(t, err, config.EnvStoreURL)
	_, err = app.Open(ctx, cfg(config.Pull, "nosuch://x", "mem://app-test-2/key"), quiet)
	require.ErrorContains(t, err, config.EnvTopicURL)
	_, err = app.Open(ctx, cfg(config.Jobs, "mem://app-test-2", "mem://app-test-2/id"), quiet)
	require.ErrorContains(t, err, `must be "key"`, "store URLs go through leasestore/storeurl")
}

func TestCloudWarningsAndJobs(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	a, err := app.Open(t.Context(), cfg(config.Publish, "mem://app-test-3", "mem://app-test-3-publish/key"), app.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	require.Contains(t, logs.String(), "HERALD_TOPIC_URL is in memory")
	require.Contains(t, logs.String(), "HERALD_DEV_TOKEN is set")
	require.NotContains(t, logs.String(), "a-token-of-sixteen-characters")

	_, err = a.RunJob(t.Context(), "lease-expiry")
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "publish runs no jobs")

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/event-destinations", nil)
	req.Header.Set("Authorization", "Bearer a-token-of-sixteen-characters")
	a.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotFound, rec.Code, "publish does not serve destinations")

	// jobs opens the broker too: the idle-queue reaper deletes subscriptions.
	j, err := app.Open(t.Context(), cfg(config.Jobs, "mem://app-test-3", "mem://app-test-3/key"), app.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, j.Close()) })
	res, err := j.RunJob(t.Context(), "lease-expiry")
	require.NoError(t, err)
	require.Equal(t, "lease-expiry", res.Job)
}

// TestAccessLogAndLevel: the handler logs one access line per request at
// info, and HERALD_LOG_LEVEL=warn holds them back.
func TestAccessLogAndLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level slog.Level
		lines int
	}{{slog.LevelInfo, 1}, {slog.LevelWarn, 0}} {
		var logs bytes.Buffer
		name := "app-test-log-" + tc.level.String()
		c := cfg(config.Publish, "mem://"+name, "mem://"+name+"/key")
		c.LogLevel = tc.level
		a, err := app.Open(t.Context(), c, app.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, a.Close()) })
		logs.Reset()
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/health/ready", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, tc.lines, bytes.Count(logs.Bytes(), []byte(`"msg":"request"`)), "level %s", tc.level)
		require.NotEmpty(t, rec.Header().Get("X-Request-Id"))
	}
}
