package local_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/local"
)

// TestConcurrentStreamsOnFreshPubSubE2E: 50 non-durable SSE streams opened
// at once against a fresh deployment on Google Pub/Sub (the emulator),
// whose topic does not exist yet, all open. Each makes its queue's
// subscription; the first ones find the topic missing and must wait for
// one creation of it, not answer 404 ("creating subscription … failed").
func TestConcurrentStreamsOnFreshPubSubE2E(t *testing.T) {
	// Not parallel: it sets PUBSUB_EMULATOR_HOST, which the broker reads.
	t.Setenv("PUBSUB_EMULATOR_HOST", emulators.PubSub(t))
	topic := "herald-burst-" + uuid.NewString()[:8]
	c := start(t, streamOpts(func(c *local.Config) {
		c.TopicURL = "gcppubsub://projects/herald-test/topics/" + topic
		c.ReapInterval = config.MaxReapInterval
	}))
	const streams = 50
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hc := &http.Client{Transport: c.hc.Transport}
	statuses := make([]int, streams)
	bodies := make([]string, streams)
	errs := make([]error, streams)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			<-begin
			req, err := http.NewRequestWithContext(ctx, "GET", c.base+streamPath(), nil)
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+c.token)
			res, err := hc.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			statuses[i] = res.StatusCode
			if res.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
				bodies[i] = string(b)
			}
		})
	}
	close(begin)
	wg.Wait()
	for i := range streams {
		require.NoError(t, errs[i], "stream %d", i+1)
		require.Equal(t, http.StatusOK, statuses[i], "stream %d of %d opened at once: %s", i+1, streams, bodies[i])
	}
}
