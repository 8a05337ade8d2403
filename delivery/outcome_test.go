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

// TestPublishDoesNotDependOnAFullConsumer: with the in-memory broker's
// default reject-publish bound, an event that a durable consumer nobody
// reads has no room for is still published (success true): it goes to
// that consumer's dead-letter queue (reason MAXLEN, never delivered),
// where a replay returns it to the consumer once it has caught up; the
// events it had room for stay with it. Nothing is dropped and no publish
// fails for a consumer's sake. A process without a lease store (a
// publish-only function) cannot keep the event for the consumer and says
// so (success false), as before.
func TestPublishDoesNotDependOnAFullConsumer(t *testing.T) {
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
	for i, o := range out {
		require.True(t, o.Success(), "event %d: %s", i, o.FailureReason)
	}
	o, err := svc.PublishOutcome(t.Context(), admin, delivery.Event{EventType: "full.test", Message: json.RawMessage(`{"n":4}`)})
	require.NoError(t, err)
	require.True(t, o.Success(), o.FailureReason)

	dls, _, err := svc.ListDeadLetters(t.Context(), admin, 10, "")
	require.NoError(t, err)
	require.Len(t, dls, 2, "the two events the full consumer had no room for")
	for _, dl := range dls {
		require.Equal(t, leasestore.ReasonMaxLen, dl.Reason)
		require.Equal(t, dest.ID, dl.OriginQueue)
		require.Zero(t, dl.DeliveryCount)
		require.Equal(t, "full.test", dl.EventType)
	}

	l, err := svc.Pull(t.Context(), admin, delivery.PullRequest{Destination: dest.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
	require.NoError(t, err)
	require.Len(t, l.Events, 2, "the consumer holds both events it had room for")
	_, err = svc.Acknowledge(t.Context(), admin, leasestore.AckParams{Consumer: dest.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	res, err := svc.ActOnDeadLetters(t.Context(), admin, []delivery.DeadLetterRequest{{ID: dls[0].ID, Action: delivery.ActionReplay}, {ID: dls[1].ID, Action: delivery.ActionReplay}})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, delivery.OutcomeReplayed, r.Outcome, r.Detail)
	}
	var replayed []string
	for len(replayed) < 2 {
		l, err = svc.Pull(t.Context(), admin, delivery.PullRequest{Destination: dest.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
		require.NoError(t, err)
		require.NotNil(t, l, "replayed, the consumer gets the events it had no room for")
		for _, e := range l.Events {
			var ce struct{ Data json.RawMessage }
			require.NoError(t, json.Unmarshal(e, &ce))
			replayed = append(replayed, string(ce.Data))
		}
		_, err = svc.Acknowledge(t.Context(), admin, leasestore.AckParams{Consumer: dest.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
		require.NoError(t, err)
	}
	require.ElementsMatch(t, []string{`{"n":3}`, `{"n":4}`}, replayed)

	// A subscription no consumer record owns has no dead-letter queue to
	// keep the event in: the publish says so.
	require.NoError(t, broker.CreateSubscription(t.Context(), "no-consumer", nil))
	for i := range 3 {
		o, err = svc.PublishOutcome(t.Context(), admin, delivery.Event{EventType: "other.test"})
		require.NoError(t, err)
		require.Equal(t, i < 2, o.Success(), "event %d: %s", i, o.FailureReason)
	}
	require.NoError(t, broker.DeleteSubscription(t.Context(), "no-consumer"))

	// Without a lease store the event cannot be kept for the consumer.
	bare := delivery.New(delivery.Config{Broker: broker})
	for range 3 { // the consumer holds at most two: the third finds it full at the latest
		o, err = bare.PublishOutcome(t.Context(), admin, delivery.Event{EventType: "full.test"})
		require.NoError(t, err)
	}
	require.False(t, o.Success())
	require.Contains(t, o.FailureReason, "not keeping up")
	require.Contains(t, o.FailureReason, "max_pending=2")
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
