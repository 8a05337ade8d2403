package grpcapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/heraldevents/herald/delivery"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
)

// TestReplyBound: the worst answer to a request within
// MaxPublishRequestBytes fits MaxReplyBytes: 1,000 events, every one
// echoed with the longest failure_reason, an empty message filled in and
// an occurred_at (both, though a result has one or the other), and the
// request made of events whose echo grows the most (no message, no
// time) padded to the bound.
func TestReplyBound(t *testing.T) {
	t.Parallel()
	req := &pb.BatchPublishEventsRequest{}
	for i := range delivery.MaxBatchEvents {
		req.Events = append(req.Events, &pb.Event{EventType: fmt.Sprintf("t%d", i)})
	}
	per := (MaxPublishRequestBytes - proto.Size(req)) / delivery.MaxBatchEvents
	for _, e := range req.Events {
		e.Resource = &pb.EventResource{ResourceId: strings.Repeat("r", per-8)}
	}
	require.LessOrEqual(t, proto.Size(req), MaxPublishRequestBytes)
	require.Greater(t, proto.Size(req), MaxPublishRequestBytes-8*delivery.MaxBatchEvents)
	reason := strings.Repeat("é", delivery.MaxFailureReasonBytes/2)
	res := &pb.BatchPublishEventsResponse{}
	for _, e := range req.Events {
		res.Results = append(res.Results, &pb.PublishingResult{Event: echo(e, time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)), FailureReason: reason, Success: true})
	}
	require.LessOrEqual(t, proto.Size(res), MaxReplyBytes, "request %d bytes", proto.Size(req))
}
