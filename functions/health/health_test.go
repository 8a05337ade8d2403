package health_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	_ "github.com/heraldevents/herald/pubsubx/mem"
)

// counted is a dependency whose answer the test sets, counting its calls.
type counted struct {
	calls atomic.Int64
	err   atomic.Pointer[error]
}

func (d *counted) dep(name string) health.Dependency {
	return health.Dependency{Name: name, Check: func(context.Context) error {
		d.calls.Add(1)
		if e := d.err.Load(); e != nil {
			return *e
		}
		return nil
	}}
}

func (d *counted) fail(err error) { d.err.Store(&err) }
func (d *counted) heal()          { d.err.Store(nil) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

type readyBody struct {
	Status string            `json:"status"`
	Failed []string          `json:"failed"`
	Checks map[string]string `json:"checks"`
}

func get(t *testing.T, h http.Handler, path string) (*httptest.ResponseRecorder, readyBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var b readyBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b), rec.Body.String())
	return rec, b
}

func TestReadyNamesTheFailedDependencyOnly(t *testing.T) {
	t.Parallel()
	var broker, store counted
	clk := testkit.NewClock(time.Unix(1_700_000_000, 0))
	var logs bytes.Buffer
	c := health.NewChecker([]health.Dependency{broker.dep("broker"), store.dep("store")},
		health.Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h := health.ReadyHandler{Checker: c}

	rec, b := get(t, h, "/health/ready")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "ok", b.Status)
	require.Equal(t, map[string]string{"broker": "ok", "store": "ok"}, b.Checks)
	require.Empty(t, b.Failed)

	secret := errors.New("dial amqp://guest:s3cret@10.0.0.7:5672/: connection refused")
	broker.fail(secret)
	clk.Advance(health.DefaultCacheFor)
	rec, b = get(t, h, "/health/ready")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "unavailable", b.Status)
	require.Equal(t, []string{"broker"}, b.Failed)
	require.Equal(t, map[string]string{"broker": "unavailable", "store": "ok"}, b.Checks)
	require.NotContains(t, rec.Body.String(), "s3cret")
	require.NotContains(t, rec.Body.String(), "amqp")
	require.NotContains(t, rec.Body.String(), "10.0.0.7")
	require.Contains(t, logs.String(), "connection refused", "the cause is logged for operators")

	broker.heal()
	clk.Advance(health.DefaultCacheFor)
	rec, _ = get(t, h, "/health/ready")
	require.Equal(t, http.StatusOK, rec.Code, "ready again once the broker is back")
}

func TestReadyIsCachedForASecond(t *testing.T) {
	t.Parallel()
	var broker counted
	clk := testkit.NewClock(time.Unix(1_700_000_000, 0))
	c := health.NewChecker([]health.Dependency{broker.dep("broker")}, health.Options{Now: clk.Now, Logger: quiet()})

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r, err := c.Check(t.Context())
			require.NoError(t, err)
			require.True(t, r.Ready())
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), broker.calls.Load(), "50 probes inside the cache period check once")

	clk.Advance(health.DefaultCacheFor - time.Millisecond)
	_, _ = c.Check(t.Context())
	require.Equal(t, int64(1), broker.calls.Load())
	clk.Advance(time.Millisecond)
	_, _ = c.Check(t.Context())
	require.Equal(t, int64(2), broker.calls.Load(), "a stale result is checked again")
}

func TestReadyBoundsAHangingDependency(t *testing.T) {
	t.Parallel()
	hang := health.Dependency{Name: "store", Check: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	c := health.NewChecker([]health.Dependency{hang}, health.Options{Timeout: 20 * time.Millisecond, Logger: quiet()})
	r, err := c.Check(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"store"}, r.Failed, "a dependency that does not answer within the timeout failed")
}

func TestReadyWaiterHonoursItsContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	slow := health.Dependency{Name: "broker", Check: func(ctx context.Context) error {
		close(started)
		<-release
		return nil
	}}
	c := health.NewChecker([]health.Dependency{slow}, health.Options{Timeout: time.Minute, Logger: quiet()})
	first := make(chan health.Report, 1)
	go func() { r, _ := c.Check(context.Background()); first <- r }()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Check(ctx)
	require.ErrorIs(t, err, context.Canceled, "a caller waiting for a run in progress leaves when its context ends")
	close(release)
	require.True(t, (<-first).Ready())
}

func TestNilCheckerIsReady(t *testing.T) {
	t.Parallel()
	rec, b := get(t, health.ReadyHandler{}, "/health/ready")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "ok", b.Status)
}

func TestLiveReportsTheVersion(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	health.Handler{}.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var b struct{ Status, Version string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b))
	require.Equal(t, "ok", b.Status)
	require.NotEmpty(t, b.Version, `"devel" when not stamped`)
}

func TestBrokerAndStoreDependencies(t *testing.T) {
	t.Parallel()
	b, err := pubsubx.Open(t.Context(), "mem://health-test-broker")
	require.NoError(t, err)
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	store := leasestore.New(coll, leasestore.Options{})
	c := health.NewChecker([]health.Dependency{health.Broker(b), health.Store(store)}, health.Options{Logger: quiet()})
	r, err := c.Check(t.Context())
	require.NoError(t, err)
	require.True(t, r.Ready(), "failed: %v", r.Failed)
	require.Equal(t, []string{"broker", "store"}, r.Checked)

	require.NoError(t, b.Close())
	require.NoError(t, coll.Close())
	c = health.NewChecker([]health.Dependency{health.Broker(b), health.Store(store)}, health.Options{Logger: quiet()})
	r, err = c.Check(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"broker", "store"}, r.Failed, "a closed broker and store are not reachable")
}
