package grpcapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/leasestore"
)

// TestReasonMapping: every dead-letter reason the store writes has a wire
// value; a rejection, which the notifications API's enum lacks, is sent as
// REASON_DELIVERY_LIMIT (documented in docs/grpc.md).
func TestReasonMapping(t *testing.T) {
	t.Parallel()
	type R = pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_Reason
	for in, want := range map[string]R{
		leasestore.ReasonDeliveryLimit: pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_DELIVERY_LIMIT,
		leasestore.ReasonExpired:       pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_EXPIRED,
		leasestore.ReasonMaxLen:        pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_MAXLEN,
		leasestore.ReasonRejected:      pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_DELIVERY_LIMIT,
		"SOMETHING_ELSE":               pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_UNSPECIFIED,
	} {
		require.Equal(t, want, reason(in), in)
	}
}
