package grpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/heraldevents/herald/functions/grpcapi"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/internal/testkit/faultbroker"
	"github.com/heraldevents/herald/pubsubx"
)

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

// TestPublishEventEveryProtocol publishes over gRPC, gRPC-Web and Connect
// (binary and JSON) on one handler and checks the CloudEvent each sends
// to the broker: type, subject, time, data and principal.
func TestPublishEventEveryProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	type client = publisherv1betaconnect.EventPublishingServiceClient
	protocols := map[string]func() client{
		"grpc":               func() client { return b.client(connect.WithGRPC()) },
		"grpc-web":           func() client { return b.client(connect.WithGRPCWeb()) },
		"connect":            func() client { return newClient(b.h2c, b.url) },
		"connect-json":       func() client { return newClient(b.h2c, b.url, connect.WithProtoJSON()) },
		"connect-json-http1": func() client { return newClient(b.h1, b.url, connect.WithProtoJSON()) },
		"grpc-web-http1":     func() client { return newClient(b.h1, b.url, connect.WithGRPCWeb()) },
	}
	occurred := time.Date(2024, 10, 16, 14, 30, 0, 123_000_000, time.UTC)
	for name, newClient := range protocols {
		t.Run(name, func(t *testing.T) {
			c := newClient()
			ev := &pb.Event{
				EventType:  "myapp.user.created",
				Message:    mustStruct(t, map[string]any{"user_id": "123", "n": 7, "tags": []any{"a", true, nil}}),
				OccurredAt: timestamppb.New(occurred),
				Resource:   &pb.EventResource{ResourceId: "/users/" + name},
			}
			res, err := c.PublishEvent(context.Background(), request(&pb.PublishEventRequest{Event: ev}, allToken))
			require.NoError(t, err)
			r := res.Msg.GetResult()
			require.True(t, r.GetSuccess(), r.GetFailureReason())
			require.Empty(t, r.GetFailureReason())
			require.Equal(t, "myapp.user.created", r.GetEvent().GetEventType())
			require.Equal(t, "/users/"+name, r.GetEvent().GetResource().GetResourceId())
			require.True(t, occurred.Equal(r.GetEvent().GetOccurredAt().AsTime()))
			require.Equal(t, "123", r.GetEvent().GetMessage().GetFields()["user_id"].GetStringValue())
		})
	}
	got := map[string]cloudEvent{}
	for _, ce := range b.received(t, len(protocols)) {
		got[ce.Subject] = ce
	}
	for name := range protocols {
		ce, ok := got["/users/"+name]
		require.True(t, ok, "no event from %s", name)
		require.Equal(t, "1.0", ce.SpecVersion)
		require.Equal(t, "myapp.user.created", ce.Type)
		require.Equal(t, "/test", ce.Source)
		require.Equal(t, "dev", ce.PrincipalIdentity)
		require.Equal(t, "application/json", ce.DataContentType)
		require.JSONEq(t, `{"user_id":"123","n":7,"tags":["a",true,null]}`, string(ce.Data))
		tm, err := time.Parse(time.RFC3339Nano, ce.Time)
		require.NoError(t, err)
		require.True(t, occurred.Equal(tm), "time %s", ce.Time)
	}
}

// TestPublishEventDefaults: an event without message or occurred_at is
// published with {} and the publish time, and the echo says so.
func TestPublishEventDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{
		Event: &pb.Event{EventType: "shop.order.placed"},
	}, shopToken))
	require.NoError(t, err)
	r := res.Msg.GetResult()
	require.True(t, r.GetSuccess())
	require.NotNil(t, r.GetEvent().GetMessage(), "the echo has an empty message")
	require.Empty(t, r.GetEvent().GetMessage().GetFields())
	require.NotNil(t, r.GetEvent().GetOccurredAt(), "the echo has the publish time")
	echoed := r.GetEvent().GetOccurredAt().AsTime()
	require.True(t, publishTime.Equal(echoed), "occurred_at %s", echoed)

	ce := b.received(t, 1)[0]
	require.Equal(t, "shop-app", ce.PrincipalIdentity)
	require.Empty(t, ce.Subject)
	require.JSONEq(t, `{}`, string(ce.Data))
	tm, err := time.Parse(time.RFC3339Nano, ce.Time)
	require.NoError(t, err)
	require.True(t, echoed.Equal(tm), "echo %s, event time %s", echoed, ce.Time)
}

// TestPublishEventInvalid: each broken rule is INVALID_ARGUMENT naming
// the field, and nothing reaches the broker.
func TestPublishEventInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	noKind := &structpb.Struct{Fields: map[string]*structpb.Value{"x": {}}}
	cases := map[string]struct {
		event *pb.Event
		msg   string
	}{
		"no event":        {nil, "event is required"},
		"no type":         {&pb.Event{}, "event_type is required"},
		"bad type":        {&pb.Event{EventType: "a:b"}, "event_type must be"},
		"long type":       {&pb.Event{EventType: strings.Repeat("a", 257)}, "event_type must be"},
		"NaN":             {&pb.Event{EventType: "a", Message: &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.NaN())}}}, "numbers must be finite"},
		"value no kind":   {&pb.Event{EventType: "a", Message: noKind}, "message must be a JSON object"},
		"bad nanos":       {&pb.Event{EventType: "a", OccurredAt: &timestamppb.Timestamp{Seconds: 1, Nanos: 2_000_000_000}}, "occurred_at must be a valid timestamp"},
		"year 10000":      {&pb.Event{EventType: "a", OccurredAt: &timestamppb.Timestamp{Seconds: 253402300800}}, "occurred_at must be a valid timestamp"},
		"control char":    {&pb.Event{EventType: "a", Resource: &pb.EventResource{ResourceId: "/x\n"}}, "resource.resource_id must not contain control characters"},
		"long resource":   {&pb.Event{EventType: "a", Resource: &pb.EventResource{ResourceId: strings.Repeat("r", 1025)}}, "resource.resource_id is longer than 1024 bytes"},
		"message 256 KiB": {&pb.Event{EventType: "a", Message: mustStruct(t, map[string]any{"s": strings.Repeat("x", 256<<10)})}, "the limit is 262144 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{Event: tc.event}, allToken))
			requireCode(t, err, connect.CodeInvalidArgument, tc.msg)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	msgs, err := b.broker.Receive(ctx, watchSub, pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.NoError(t, err)
	require.Empty(t, msgs, "no invalid event was published")
}

// TestPublishEventLargestMessage: a message just under 256 KiB as JSON is
// accepted, although its protobuf form is larger.
func TestPublishEventLargestMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// [0,0,…] is 2 bytes a number as JSON and 11 in protobuf.
	n := (256<<10 - len(`{"a":[]}`)) / 2
	list := make([]any, n)
	for i := range list {
		list[i] = 0
	}
	res, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{
		Event: &pb.Event{EventType: "a", Message: mustStruct(t, map[string]any{"a": list})},
	}, allToken))
	require.NoError(t, err)
	require.True(t, res.Msg.GetResult().GetSuccess())
	require.Len(t, b.received(t, 1)[0].Data, 256<<10-1)
}

// TestPublishEventTooLargeOnTheWire: a request over the 3 MiB bound is
// INVALID_ARGUMENT in every protocol, compressed or not, never
// RESOURCE_EXHAUSTED (which the notifications API reserves for "overloaded,
// retry"), and nothing of it is published.
func TestPublishEventTooLargeOnTheWire(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	type client = publisherv1betaconnect.EventPublishingServiceClient
	protocols := map[string]client{
		"grpc":         b.client(),
		"grpc-gzip":    b.client(connect.WithGRPC(), connect.WithSendGzip()),
		"grpc-web":     b.client(connect.WithGRPCWeb()),
		"connect":      newClient(b.h2c, b.url),
		"connect-gzip": newClient(b.h1, b.url, connect.WithSendGzip()),
		"connect-json": newClient(b.h1, b.url, connect.WithProtoJSON()),
	}
	big := mustStruct(t, map[string]any{"s": strings.Repeat("x", grpcapi.MaxPublishRequestBytes)})
	for name, c := range protocols {
		_, err := c.PublishEvent(context.Background(), request(&pb.PublishEventRequest{Event: &pb.Event{EventType: "a", Message: big}}, allToken))
		requireCode(t, err, connect.CodeInvalidArgument, "the limit of a publish request")
		_, err = c.BatchPublishEvents(context.Background(), request(&pb.BatchPublishEventsRequest{Events: []*pb.Event{{EventType: "a"}, {EventType: "a", Message: big}}}, allToken))
		requireCode(t, err, connect.CodeInvalidArgument, "the limit of a publish request")
		t.Log(name, "refused")
	}
	res, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{Event: &pb.Event{EventType: "after"}}, allToken))
	require.NoError(t, err)
	require.True(t, res.Msg.GetResult().GetSuccess())
	require.Equal(t, "after", b.received(t, 1)[0].Type, "nothing of a refused request was published")
}

func TestPublishEventPermissionDenied(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for token, typ := range map[string]string{shopToken: "myapp.user.created", noneToken: "shop.order.placed"} {
		_, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{
			Event: &pb.Event{EventType: typ},
		}, token))
		requireCode(t, err, connect.CodePermissionDenied, `not authorized to publish events of type "`+typ+`"`)
	}
}

// TestPublishEventBrokerFailure: a broker failure is an OK answer with
// success false and a failure_reason that does not leak the cause.
func TestPublishEventBrokerFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, faultbroker.Wrap(faultbroker.Fail(errors.New("connection refused by broker-7.internal"))))
	res, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{
		Event: &pb.Event{EventType: "a", Resource: &pb.EventResource{ResourceId: "/r"}},
	}, allToken))
	require.NoError(t, err)
	r := res.Msg.GetResult()
	require.False(t, r.GetSuccess())
	require.Equal(t, "Unable to publish to the message broker", r.GetFailureReason())
	require.NotContains(t, r.GetFailureReason(), "broker-7.internal")
	require.Equal(t, "/r", r.GetEvent().GetResource().GetResourceId())
	require.Nil(t, r.GetEvent().GetOccurredAt(), "an unpublished event has no publish time")

	batch, err := b.client().BatchPublishEvents(context.Background(), request(&pb.BatchPublishEventsRequest{
		Events: []*pb.Event{{EventType: "a"}, {EventType: "b"}},
	}, allToken))
	require.NoError(t, err)
	require.Len(t, batch.Msg.GetResults(), 2)
	for _, r := range batch.Msg.GetResults() {
		require.False(t, r.GetSuccess())
		require.Equal(t, "Unable to publish to the message broker", r.GetFailureReason())
	}
}

// TestBatchPublishEvents: every event has its own result, in order; an
// invalid or forbidden event fails alone and the rest are published.
func TestBatchPublishEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	occurred := time.Date(2024, 10, 16, 14, 30, 1, 0, time.UTC)
	res, err := b.client().BatchPublishEvents(context.Background(), request(&pb.BatchPublishEventsRequest{
		Events: []*pb.Event{
			{EventType: "shop.file.uploaded", Message: mustStruct(t, map[string]any{"file": "doc1.pdf"}), OccurredAt: timestamppb.New(occurred)},
			{EventType: ""},
			{EventType: "myapp.user.created"}, // shopToken may not publish this type
			{EventType: "shop.file.uploaded", Message: mustStruct(t, map[string]any{"file": "doc2.pdf"}), Resource: &pb.EventResource{ResourceId: "/f/2"}},
		},
	}, shopToken))
	require.NoError(t, err)
	rs := res.Msg.GetResults()
	require.Len(t, rs, 4)
	require.True(t, rs[0].GetSuccess())
	require.True(t, occurred.Equal(rs[0].GetEvent().GetOccurredAt().AsTime()))
	require.False(t, rs[1].GetSuccess())
	require.Equal(t, "event_type is required", rs[1].GetFailureReason())
	require.False(t, rs[2].GetSuccess())
	require.Equal(t, `not authorized to publish events of type "myapp.user.created"`, rs[2].GetFailureReason())
	require.Equal(t, "myapp.user.created", rs[2].GetEvent().GetEventType())
	require.True(t, rs[3].GetSuccess())
	require.NotNil(t, rs[3].GetEvent().GetOccurredAt())

	files := map[string]string{}
	for _, ce := range b.received(t, 2) {
		require.Equal(t, "shop.file.uploaded", ce.Type)
		files[string(ce.Data)] = ce.Subject
	}
	require.Equal(t, map[string]string{`{"file":"doc1.pdf"}`: "", `{"file":"doc2.pdf"}`: "/f/2"}, files)
}

func TestBatchPublishEventsSize(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.client().BatchPublishEvents(context.Background(), request(&pb.BatchPublishEventsRequest{}, allToken))
	requireCode(t, err, connect.CodeInvalidArgument, "events must hold at least one event")

	events := make([]*pb.Event, 1001)
	for i := range events {
		events[i] = &pb.Event{EventType: "a"}
	}
	_, err = b.client().BatchPublishEvents(context.Background(), request(&pb.BatchPublishEventsRequest{Events: events}, allToken))
	requireCode(t, err, connect.CodeInvalidArgument, "events holds 1001 events; a batch holds at most 1000")

	res, err := b.client().BatchPublishEvents(context.Background(), request(&pb.BatchPublishEventsRequest{Events: events[:1000]}, allToken))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetResults(), 1000)
	for i, r := range res.Msg.GetResults() {
		require.True(t, r.GetSuccess(), "event %d: %s", i, r.GetFailureReason())
	}
	require.Len(t, b.received(t, 1000), 1000)
}

// TestPublishEventBrokerHangs: a broker that never answers costs a gRPC
// publish the publish timeout, then an OK answer with success false (the
// client's call has no deadline of its own, and a hung broker used to hold
// it for as long as the driver's dials took).
func TestPublishEventBrokerHangs(t *testing.T) {
	t.Parallel()
	b := setup(t, faultbroker.Wrap(faultbroker.Hang("no answer from broker-7.internal")))
	res, err := b.client().PublishEvent(context.Background(), request(&pb.PublishEventRequest{
		Event: &pb.Event{EventType: "a"},
	}, allToken))
	require.NoError(t, err)
	require.False(t, res.Msg.GetResult().GetSuccess())
	require.Equal(t, "Unable to publish to the message broker", res.Msg.GetResult().GetFailureReason())
}

// TestBatchAnswerFitsADefaultClient: a grpc-go client with its default
// 4 MiB receive limit gets the answer to every batch Herald takes: 800
// events of about 6 KB (a 4.8 MB request, whose echo would pass 4 MiB)
// are refused with INVALID_ARGUMENT before any is published, and a batch
// of 1,000 events just within the bound, whose answers grow by the
// occurred_at Herald fills in, is published and answered in full.
func TestBatchAnswerFitsADefaultClient(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	conn, err := grpc.NewClient(strings.TrimPrefix(b.url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+allToken)
	const method = "/" + publisher + "/BatchPublishEvents"
	batch := func(n, size int) *pb.BatchPublishEventsRequest {
		req := &pb.BatchPublishEventsRequest{}
		for i := range n {
			req.Events = append(req.Events, &pb.Event{EventType: "a.b", Resource: &pb.EventResource{ResourceId: fmt.Sprintf("/r/%d", i)},
				Message: mustStruct(t, map[string]any{"s": strings.Repeat("x", size)})})
		}
		return req
	}

	tooBig := batch(800, 6000)
	require.Greater(t, proto.Size(tooBig), 4<<20)
	err = conn.Invoke(ctx, method, tooBig, &pb.BatchPublishEventsResponse{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "send fewer events per batch")

	req := batch(1000, 3000)
	for proto.Size(req) < grpcapi.MaxPublishRequestBytes-100 {
		req.Events[0].Message.Fields["pad"] = structpb.NewStringValue(strings.Repeat("p", grpcapi.MaxPublishRequestBytes-100-proto.Size(req)))
	}
	require.LessOrEqual(t, proto.Size(req), grpcapi.MaxPublishRequestBytes)
	res := &pb.BatchPublishEventsResponse{}
	require.NoError(t, conn.Invoke(ctx, method, req, res))
	require.Len(t, res.GetResults(), 1000)
	for _, r := range res.GetResults() {
		require.True(t, r.GetSuccess(), r.GetFailureReason())
		require.NotNil(t, r.GetEvent().GetOccurredAt())
	}
	require.Greater(t, proto.Size(res), proto.Size(req), "the answer is larger than the request")
	require.LessOrEqual(t, proto.Size(res), grpcapi.MaxReplyBytes)
	require.Len(t, b.received(t, 1000), 1000, "only the batch within the bound was published")
}
