package delivery_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/internal/testkit/faultbroker"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// TestPublishTimeout: a broker that never answers costs a publish
// Config.PublishTimeout, then herr.Unavailable (success:false), even when
// the caller's context has no deadline; a batch shares one bound; the
// caller's own cancellation stays Canceled; and the failures write one
// warning, not one each.
func TestPublishTimeout(t *testing.T) {
	t.Parallel()
	broker := mem.New(0)
	t.Cleanup(func() { _ = broker.Close() })
	var logs testkit.SyncBuffer
	svc := delivery.New(delivery.Config{
		Broker: pubsubx.NewBroker(faultbroker.Wrap(faultbroker.Hang("no answer"))(broker.Driver())), PublishTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	p := &auth.Principal{ID: "app", Permissions: []string{auth.PermAll}}

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.Publish(context.Background(), p, delivery.Event{EventType: "a.b"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.Equal(t, herr.Unavailable, herr.CodeOf(err), "%v", err)
		require.Equal(t, "Unable to publish to the message broker", herr.MessageOf(err), "the cause stays out of the answer")
	}

	events := make([]delivery.Event, 40)
	for i := range events {
		events[i] = delivery.Event{EventType: "a.b"}
	}
	for _, r := range svc.PublishBatch(context.Background(), p, events) {
		require.Equal(t, herr.Unavailable, herr.CodeOf(r.Err), "%v", r.Err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := svc.Publish(ctx, p, delivery.Event{EventType: "a.b"})
	require.Equal(t, herr.Canceled, herr.CodeOf(err), "%v", err)

	require.Equal(t, 1, strings.Count(logs.String(), `did not accept the event within 50ms`),
		"90 identical broker failures write one warning (then one summary per interval):\n%s", logs.String())
	require.Equal(t, 2, strings.Count(logs.String(), `msg="publish failed"`), "a different failure has a line of its own:\n%s", logs.String())
}

// TestPublishTimeoutWarnsOnceHoweverNoticed: the publish timeout is one
// failure whichever layer notices it. Under load a publish can wait for
// a CPU past its timeout before it reaches the broker, and then the
// portable layer (pubsubx.Broker) refuses it with the context's own
// error, while a publish that got to the driver in time fails with the
// driver's text. The two used to be rate-limited as two different
// failures (TestPublishTimeout saw 2 lines for 1 on a loaded machine);
// here the two wordings are made on purpose, one publish each.
func TestPublishTimeoutWarnsOnceHoweverNoticed(t *testing.T) {
	t.Parallel()
	broker := mem.New(0)
	t.Cleanup(func() { _ = broker.Close() })
	var logs testkit.SyncBuffer
	var n atomic.Int64
	fault := func(ctx context.Context, _ *pubsubx.Message) error {
		<-ctx.Done()
		if n.Add(1) == 1 {
			return herr.Wrap(herr.DeadlineExceeded, ctx.Err(), "no answer") // the driver's wording
		}
		return ctx.Err() // the portable layer's: the deadline passed before the send
	}
	svc := delivery.New(delivery.Config{
		Broker: pubsubx.NewBroker(faultbroker.Wrap(fault)(broker.Driver())), PublishTimeout: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	p := &auth.Principal{ID: "app", Permissions: []string{auth.PermAll}}
	for range 2 {
		_, err := svc.Publish(context.Background(), p, delivery.Event{EventType: "a.b"})
		require.Equal(t, herr.Unavailable, herr.CodeOf(err), "%v", err)
	}
	require.Equal(t, 1, strings.Count(logs.String(), `msg="publish failed"`),
		"two publishes that timed out are one failure, one warning:\n%s", logs.String())
}
