package delivery_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit/faultbroker"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// TestPublishItemsOutcomes: every item gets its own outcome, index for
// index: a decoding failure and an invalid event fail with their reason, a
// broker failure is success false, and the others are published.
func TestPublishItemsOutcomes(t *testing.T) {
	t.Parallel()
	broker := mem.New(time.Minute)
	t.Cleanup(func() { require.NoError(t, broker.Close()) })
	svc := delivery.New(delivery.Config{Broker: pubsubx.NewBroker(&faultbroker.Broker{Broker: broker.Driver(),
		// Refuse every message of "refused.type" as an unreachable broker
		// would, and send the others.
		Fault: func(_ context.Context, m *pubsubx.Message) error {
			if m.EventType() == "refused.type" {
				return herr.New(herr.Unavailable, "broker-7 is down")
			}
			return nil
		}})})
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}

	out := svc.PublishItems(t.Context(), admin, []delivery.BatchItem{
		{Event: delivery.Event{EventType: "a.b", Message: json.RawMessage(`{"n":1}`)}},
		{Err: herr.New(herr.InvalidArgument, "event is not a JSON object")},
		{Event: delivery.Event{EventType: "not valid!"}},
		{Event: delivery.Event{EventType: "refused.type"}},
		{Event: delivery.Event{EventType: "a.c"}},
	})
	require.Len(t, out, 5)
	require.True(t, out[0].Success())
	require.NotEmpty(t, out[0].Published.ID)
	require.Equal(t, delivery.Outcome{FailureReason: "event is not a JSON object"}, out[1])
	require.False(t, out[2].Success())
	require.Contains(t, out[2].FailureReason, "event_type")
	require.False(t, out[3].Success())
	require.NotEmpty(t, out[3].FailureReason)
	require.True(t, out[4].Success(), "the event after a broker failure is published")

	// One event: a broker failure is an outcome, a rule broken an error.
	o, err := svc.PublishOutcome(t.Context(), admin, delivery.Event{EventType: "refused.type"})
	require.NoError(t, err)
	require.False(t, o.Success())
	require.NotEmpty(t, o.FailureReason)
	_, err = svc.PublishOutcome(t.Context(), admin, delivery.Event{EventType: "not valid!"})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	o, err = svc.PublishOutcome(t.Context(), admin, delivery.Event{EventType: "a.b"})
	require.NoError(t, err)
	require.True(t, o.Success())
}

func TestCheckBatchSize(t *testing.T) {
	t.Parallel()
	require.NoError(t, delivery.CheckBatchSize(1))
	require.NoError(t, delivery.CheckBatchSize(delivery.MaxBatchEvents))
	for _, n := range []int{0, delivery.MaxBatchEvents + 1} {
		err := delivery.CheckBatchSize(n)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "n=%d", n)
		require.Equal(t, []any{"events"}, herr.FieldOf(err))
	}
}

// TestPublishToAFullConsumerSaysSo: with the in-memory broker's default
// reject-publish bound, an event that a durable consumer nobody reads has
// no room for fails with a reason that says so (success false), the
// events before it are published, and the consumer keeps every event it
// held: nothing is dropped.
func TestPublishToAFullConsumerSaysSo(t *testing.T) {
	t.Parallel()
	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = coll.Close() })
	broker := mem.NewWithLimits(time.Minute, mem.Limits{MaxPending: 2})
	t.Cleanup(func() { require.NoError(t, broker.Close()) })
	svc := delivery.New(delivery.Config{Broker: broker, Store: leasestore.New(coll, leasestore.Options{})})
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}
	dest, err := svc.CreateDestination(t.Context(), admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(t, err)

	items := make([]delivery.BatchItem, 3)
	for i := range items {
		items[i].Event = delivery.Event{EventType: "full.test", Message: json.RawMessage(`{"n":` + string(rune('1'+i)) + `}`)}
	}
	out := svc.PublishItems(t.Context(), admin, items)
	require.True(t, out[0].Success())
	require.True(t, out[1].Success())
	require.False(t, out[2].Success())
	require.Contains(t, out[2].FailureReason, "not keeping up")
	require.Contains(t, out[2].FailureReason, "max_pending=2")

	l, err := svc.Pull(t.Context(), admin, delivery.PullRequest{Destination: dest.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
	require.NoError(t, err)
	require.Len(t, l.Events, 2, "the consumer holds both events it had room for")
}

// TestFailureReasonBounded: a failure_reason is at most 1,024 bytes (the
// published schema's maxLength, and what keeps a gRPC batch's answer
// bounded), cut at a character boundary; a short one is kept as it is.
func TestFailureReasonBounded(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", delivery.FailureReason(herr.New(herr.Unavailable, "short")))
	for _, long := range []string{strings.Repeat("x", 5000), strings.Repeat("é", 700), "a" + strings.Repeat("😀", 400)} {
		r := delivery.FailureReason(herr.New(herr.Unavailable, "%s", long))
		require.LessOrEqual(t, len(r), delivery.MaxFailureReasonBytes)
		require.Greater(t, len(r), delivery.MaxFailureReasonBytes-8)
		require.True(t, utf8.ValidString(r))
		require.True(t, strings.HasSuffix(r, "…"))
	}
}
