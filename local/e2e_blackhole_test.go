package local_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/local"
)

// lineCounter counts log lines by message.
type lineCounter struct {
	mu    sync.Mutex
	lines map[string]int
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal(p, &m) == nil {
		c.lines[m.Msg]++
	}
	return len(p), nil
}

func (c *lineCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines[msg]
}

// TestBlackHoledBrokerPublishes: with every network driver's broker at an
// address that accepts TCP and never answers, concurrent REST publishes
// all answer 200 with success:false (the documented broker failure) once
// HERALD_PUBLISH_TIMEOUT passes, rather than queueing behind one another's
// dials (10, 20, 30, 40, 50 s before); the outage writes a handful of
// warnings, not one per publish; and closing Herald leaves no connection
// to the black hole open.
func TestBlackHoledBrokerPublishes(t *testing.T) {
	// Not parallel: the SNS/SQS and Pub/Sub URLs take credentials and the
	// emulator address from the environment.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	const (
		publishers = 20
		bound      = 300 * time.Millisecond
	)
	drivers := map[string]func(t *testing.T, addr string) string{
		"rabbit": func(_ *testing.T, addr string) string {
			return "rabbit://herald-blackhole?url=" + url.QueryEscape("amqp://guest:guest@"+addr+"/")
		},
		"nats": func(_ *testing.T, addr string) string { return "nats://" + addr + "/HERALD_BLACKHOLE" },
		"awssnssqs": func(_ *testing.T, addr string) string {
			return "awssnssqs:///herald-blackhole?endpoint=" + url.QueryEscape("http://"+addr)
		},
		"gcppubsub": func(t *testing.T, addr string) string {
			t.Setenv("PUBSUB_EMULATOR_HOST", addr)
			return "gcppubsub://projects/herald-test/topics/herald-blackhole"
		},
	}
	for _, name := range []string{"rabbit", "nats", "awssnssqs", "gcppubsub"} {
		t.Run(name, func(t *testing.T) {
			hole := blackhole.Start(t)
			logs := &lineCounter{lines: map[string]int{}}
			h := local.Start(t, func(c *local.Config) {
				c.TopicURL = drivers[name](t, hole.Addr())
				c.PublishTimeout = bound
				c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
				c.ReapInterval = config.MaxReapInterval
			})
			c := &client{base: h.URL, token: h.Token, hc: &http.Client{Timeout: time.Minute}}

			var wg sync.WaitGroup
			var mu sync.Mutex
			var slowest time.Duration
			errs := make(chan error, publishers+1)
			check := func(r *response, err error, results func(*response) ([]publishResult, error)) {
				if err != nil {
					errs <- err
					return
				}
				if r.Status != http.StatusOK {
					errs <- &statusError{r.Status, string(r.Body)}
					return
				}
				rs, err := results(r)
				if err != nil {
					errs <- err
					return
				}
				for _, res := range rs {
					if res.Success || res.FailureReason == "" {
						errs <- &statusError{r.Status, string(r.Body)}
						return
					}
				}
			}
			single := func(r *response) ([]publishResult, error) {
				var out struct {
					Result publishResult `json:"result"`
				}
				err := json.Unmarshal(r.Body, &out)
				return []publishResult{out.Result}, err
			}
			batch := func(r *response) ([]publishResult, error) {
				var out struct {
					Results []publishResult `json:"results"`
				}
				err := json.Unmarshal(r.Body, &out)
				if err == nil && len(out.Results) != 10 {
					err = &statusError{r.Status, string(r.Body)}
				}
				return out.Results, err
			}
			for i := range publishers + 1 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					began := time.Now()
					if i == publishers {
						r, err := c.call("POST", "/api/v1beta/events/batch", map[string]any{"events": eventsOf("app.blackhole", 10)})
						check(r, err, batch)
					} else {
						r, err := c.call("POST", "/api/v1beta/events", map[string]any{"event": ev("app.blackhole", "/r", map[string]int{"i": i})})
						check(r, err, single)
					}
					mu.Lock()
					slowest = max(slowest, time.Since(began))
					mu.Unlock()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err, "a publish against a black-holed broker must answer 200 with success:false")
			}
			t.Logf("%s: %d publishes and a batch of 10 against a black hole answered success:false; slowest %s (HERALD_PUBLISH_TIMEOUT %s)",
				name, publishers, slowest.Round(time.Millisecond), bound)

			warnings := logs.count("publish failed")
			require.Positive(t, warnings, "the outage is logged")
			require.Less(t, warnings, 5, "%d publishes failed alike: the warning is rate-limited, not written once each", publishers+10)

			require.NoError(t, h.Server.Close())
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			require.NoError(t, hole.WaitFor(ctx, func(_, open int) bool { return open == 0 }),
				"%d connections to the black hole still open after Herald closed", hole.Open())
		})
	}
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string {
	return "status " + http.StatusText(e.status) + ": " + strings.TrimSpace(e.body)
}
