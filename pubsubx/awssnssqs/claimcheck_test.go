package awssnssqs_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/awssnssqs"
)

// TestClaimCheckLargestEvent publishes Herald's largest event (a 256 KiB
// message with a 1,024-byte resource id) through SNS/SQS on moto: its
// encoding is more than SNS carries, so it travels as a claim-check
// reference, the SNS filter policy still selects it by its attributes,
// and the pull hands out the stored event byte for byte.
func TestClaimCheckLargestEvent(t *testing.T) {
	endpoint := emulators.Moto(t)
	ctx := t.Context()
	b, err := awssnssqs.Open(ctx, awssnssqs.Options{
		Topic: uniqueTopic("claim"), Region: region, Endpoint: endpoint,
		AckDeadline: time.Minute, Credentials: fakeCredentials,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.Equal(t, awssnssqs.MaxMessageBytes, b.MaxMessageBytes(), "awssnssqs is size-limited")

	coll, err := memdocstore.OpenCollection("key", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = coll.Close() })
	store := leasestore.New(coll, leasestore.Options{})
	svc := delivery.New(delivery.Config{Broker: b, Store: store, ReceiveWait: time.Second})
	admin := &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}

	resource := strings.Repeat("r", delivery.MaxResourceIDBytes)
	c, err := svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{
		Type: leasestore.TypeDurableConsumer,
		FilterGroups: filter.Groups{{
			EventType: "orders.created",
			Filters:   []filter.ResourceFilter{{FilterType: filter.Eq, ResourceID: resource}},
		}},
	})
	require.NoError(t, err)

	pad := delivery.MaxMessageBytes - len(`{"pad":"","n":1}`)
	msg := json.RawMessage(`{"pad":"` + strings.Repeat("x", pad) + `","n":1}`)
	require.Len(t, msg, delivery.MaxMessageBytes)
	other, err := svc.Publish(ctx, admin, delivery.Event{EventType: "orders.created", ResourceID: "other", Message: msg})
	require.NoError(t, err)
	big, err := svc.Publish(ctx, admin, delivery.Event{EventType: "orders.created", ResourceID: resource, Message: msg})
	require.NoError(t, err)

	stored, err := store.GetClaim(ctx, big.ID)
	require.NoError(t, err)
	require.Greater(t, len(stored), awssnssqs.MaxMessageBytes, "the event would not fit SNS")
	require.Less(t, len(stored), leasestore.MaxClaimBytes)
	_, err = store.GetClaim(ctx, other.ID)
	require.NoError(t, err, "a claim is stored whether or not a consumer wants the event")
	// The same body sent as is is refused: the claim-check is what carries it.
	err = b.Send(ctx, &pubsubx.Message{Body: stored, Metadata: map[string]string{pubsubx.AttrEventType: "x"}})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))

	var l *leasestore.Lease
	require.Eventually(t, func() bool {
		l, err = svc.Pull(ctx, admin, delivery.PullRequest{Destination: c.ID, Worker: "w", Limit: 10, Visibility: time.Minute})
		require.NoError(t, err)
		return l != nil
	}, 30*time.Second, 10*time.Millisecond)
	require.Len(t, l.Events, 1, "the filters (SNS policy, then Herald's re-check) dropped the other resource")
	require.Equal(t, stored, []byte(l.Events[0]))
	ev, err := cloudevent.Decode(l.Events[0])
	require.NoError(t, err)
	require.Equal(t, big.ID, ev.ID())
	require.Equal(t, resource, ev.Subject())
	require.Equal(t, []byte(msg), ev.Data())
	_, err = svc.Acknowledge(ctx, admin, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Zero(t, svc.MissingClaims())
}
