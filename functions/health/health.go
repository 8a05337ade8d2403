// Package health serves Herald's health checks:
//
//   - GET /health, the liveness check of the notifications API (compatible
//     with NVIDIA Omniverse's, "Service Health"): 200 with
//     {"status":"ok","version":"v0.4.0"} while the process serves
//     requests. It touches no dependency, so a broker outage never makes a
//     platform restart healthy instances. GET /api/v1beta/health, the
//     path of the notifications API's published OpenAPI documents, answers
//     the same.
//   - GET /health/ready, the readiness check: 200 when every dependency the
//     process's function uses (the broker, the lease store) answered within
//     a bounded time, else 503 naming the dependencies that did not
//     ({"status":"unavailable","failed":["broker"],…}). Names only: never a
//     URL, a credential or a backend's error text, which go to the log.
//
// Neither needs a token. A Checker runs the readiness checks at most once
// per CacheFor (default 1 s), however many probes and gRPC health clients
// ask, so they cannot overload the broker or the store; the gRPC health
// service (package functions/grpcapi) answers NOT_SERVING from the same
// Checker.
package health

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/version"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// Paths of the two checks.
const (
	LivePath  = "/health"
	ReadyPath = "/health/ready"
)

// Handler serves both health paths.
type Handler struct{}

// liveBody is GET /health's answer.
type liveBody struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// ServeHTTP implements http.Handler.
func (Handler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, liveBody{Status: "ok", Version: version.Get().Version})
}

// Dependency is one thing readiness depends on.
type Dependency struct {
	// Name is what a failed check reports: "broker" or "store". It must
	// not carry a URL or a credential.
	Name string
	// Check returns nil when the dependency is reachable. It must honour
	// ctx's deadline.
	Check func(ctx context.Context) error
}

// Broker returns the dependency on b, named "broker": its Ping.
func Broker(b *pubsubx.Broker) Dependency {
	return Dependency{Name: "broker", Check: b.Ping}
}

// probeConsumer is the consumer id the store check reads. No consumer has
// it (ids of destinations are generated, and a queue of that name would
// only make the read succeed), so the read is a miss: one cheap,
// bounded point read that crosses the network to the store.
const probeConsumer = "herald-readiness-probe"

// Store returns the dependency on s, named "store": a read of a consumer
// that does not exist, which must answer "not found".
func Store(s *leasestore.Store) Dependency {
	return Dependency{Name: "store", Check: func(ctx context.Context) error {
		_, err := s.GetConsumer(ctx, probeConsumer)
		if err == nil || herr.CodeOf(err) == herr.NotFound {
			return nil
		}
		return err
	}}
}

// Defaults of a Checker.
const (
	// DefaultTimeout bounds one run of the checks. Platform probes time out
	// after their own timeout (Cloud Run's is set to 3 s in infra/), so a
	// check must answer inside it.
	DefaultTimeout = 2 * time.Second
	// DefaultCacheFor is how long a run's result is reused.
	DefaultCacheFor = time.Second
)

// Options tune a Checker; zero fields take the defaults.
type Options struct {
	Timeout  time.Duration
	CacheFor time.Duration
	// Logger receives a warning per failed check, with the error
	// (default slog.Default()).
	Logger *slog.Logger
	// Now replaces the clock (tests).
	Now func() time.Time
}

// Report is the result of one run of the checks.
type Report struct {
	// Failed names the dependencies that failed, in the order given to
	// NewChecker; empty when ready.
	Failed []string
	// Checked names every dependency checked.
	Checked []string
}

// Ready reports whether every dependency passed.
func (r Report) Ready() bool { return len(r.Failed) == 0 }

// Checker runs the readiness checks, at most one run at a time and at most
// one per CacheFor. It is safe for concurrent use. A nil *Checker has no
// dependencies and is always ready.
type Checker struct {
	deps []Dependency
	opts Options

	mu      sync.Mutex
	last    Report
	lastAt  time.Time
	hasLast bool
	running chan struct{} // closed when the run in progress ends; nil when none
}

// NewChecker returns a Checker of deps.
func NewChecker(deps []Dependency, opts Options) *Checker {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.CacheFor <= 0 {
		opts.CacheFor = DefaultCacheFor
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Checker{deps: slices.Clone(deps), opts: opts}
}

// Check returns the latest report, running the checks when the cached one
// is older than CacheFor. Callers that arrive during a run wait for it. A
// run is bounded by Timeout and is not cut short by one caller's ctx
// (others wait for it); a caller whose ctx ends first gets ctx's error.
func (c *Checker) Check(ctx context.Context) (Report, error) {
	if c == nil {
		return Report{}, nil
	}
	for {
		c.mu.Lock()
		if c.hasLast && c.opts.Now().Sub(c.lastAt) < c.opts.CacheFor {
			r := c.last
			c.mu.Unlock()
			return r, nil
		}
		if c.running == nil {
			done := make(chan struct{})
			c.running = done
			c.mu.Unlock()
			r := c.run(context.WithoutCancel(ctx))
			c.mu.Lock()
			c.last, c.lastAt, c.hasLast, c.running = r, c.opts.Now(), true, nil
			c.mu.Unlock()
			close(done)
			return r, nil
		}
		wait := c.running
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Report{}, ctx.Err()
		}
	}
}

// run checks every dependency at once, each within the timeout.
func (c *Checker) run(ctx context.Context) Report {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	errs := make([]error, len(c.deps))
	var wg sync.WaitGroup
	for i, d := range c.deps {
		wg.Go(func() { errs[i] = d.Check(ctx) })
	}
	wg.Wait()
	var r Report
	for i, d := range c.deps {
		r.Checked = append(r.Checked, d.Name)
		if errs[i] != nil {
			r.Failed = append(r.Failed, d.Name)
			c.opts.Logger.WarnContext(ctx, "readiness check failed", "dependency", d.Name, "err", errs[i])
		}
	}
	return r
}

// readyBody is GET /health/ready's answer. Checks maps each dependency to
// "ok" or "unavailable".
type readyBody struct {
	Status string            `json:"status"`
	Failed []string          `json:"failed,omitempty"`
	Checks map[string]string `json:"checks"`
}

// ReadyHandler serves GET /health/ready from Checker (nil: always ready).
type ReadyHandler struct {
	Checker *Checker
}

// ServeHTTP implements http.Handler.
func (h ReadyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep, err := h.Checker.Check(r.Context())
	if err != nil {
		httpx.WriteError(w, r, herr.Wrap(herr.Canceled, err, "the readiness check was cancelled"))
		return
	}
	body := readyBody{Status: "ok", Failed: rep.Failed, Checks: map[string]string{}}
	for _, name := range rep.Checked {
		body.Checks[name] = "ok"
	}
	for _, name := range rep.Failed {
		body.Checks[name] = "unavailable"
	}
	status := http.StatusOK
	if !rep.Ready() {
		body.Status, status = "unavailable", http.StatusServiceUnavailable
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", "1")
	}
	httpx.WriteJSON(w, status, body)
}
