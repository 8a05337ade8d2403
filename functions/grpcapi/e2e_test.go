package grpcapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/local"
)

// The tests in this file are a client nobody on the team wrote: plain
// grpc-go (grpc.NewClient, insecure credentials, HTTP/2 cleartext) with the
// generated messages and the method names spelled out from the notifications API,
// against a real local.Start server on its one port. What they publish is
// pulled back over the REST pull API (the durable-consumer API).

const (
	publishMethod = "/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/PublishEvent"
	batchMethod   = "/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/BatchPublishEvents"
	consumerName  = "nvidia.omniverse.notifications.consumer.v1beta.EventConsumerService"
)

// grpcHerald is a local Herald with a grpc-go connection to it.
type grpcHerald struct {
	*local.Instance
	conn *grpc.ClientConn
}

func startGRPC(t *testing.T) *grpcHerald {
	t.Helper()
	h := local.Start(t)
	conn, err := grpc.NewClient(strings.TrimPrefix(h.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close()) })
	return &grpcHerald{Instance: h, conn: conn}
}

// ctx returns a bounded context carrying `authorization: Bearer token`
// metadata ("" for none).
func (h *grpcHerald) ctx(t *testing.T, token string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

// rest sends a REST request with h's token and decodes a JSON answer of
// status want into out (if non-nil).
func (h *grpcHerald) rest(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	res, err := (&http.Client{Timeout: timeout}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, want, res.StatusCode, "%s %s: %s", method, path, got)
	if out != nil {
		require.NoError(t, json.Unmarshal(got, out))
	}
}

// TestGRPCPublishThenPull publishes one event and a batch with grpc-go,
// then pulls them over REST and checks the CloudEvents.
func TestGRPCPublishThenPull(t *testing.T) {
	t.Parallel()
	h := startGRPC(t)
	var dest struct{ ID string }
	h.rest(t, "POST", "/v1/event-destinations", map[string]any{
		"type": "DURABLE_CONSUMER", "filter_groups": []any{map[string]any{"event_type": "myapp.user.created"}},
	}, http.StatusCreated, &dest)
	require.NotEmpty(t, dest.ID)

	occurred := time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC)
	single := &pb.PublishEventResponse{}
	err := h.conn.Invoke(h.ctx(t, h.Token), publishMethod, &pb.PublishEventRequest{Event: &pb.Event{
		EventType:  "myapp.user.created",
		Message:    mustStruct(t, map[string]any{"user_id": "123", "username": "john_doe"}),
		OccurredAt: timestamppb.New(occurred),
		Resource:   &pb.EventResource{ResourceId: "/users/123"},
	}}, single)
	require.NoError(t, err)
	require.True(t, single.GetResult().GetSuccess(), single.GetResult().GetFailureReason())
	require.Equal(t, "/users/123", single.GetResult().GetEvent().GetResource().GetResourceId())

	batch := &pb.BatchPublishEventsResponse{}
	err = h.conn.Invoke(h.ctx(t, h.Token), batchMethod, &pb.BatchPublishEventsRequest{Events: []*pb.Event{
		{EventType: "myapp.user.created", Message: mustStruct(t, map[string]any{"user_id": "124"}), OccurredAt: timestamppb.New(occurred.Add(time.Second))},
		{EventType: "myapp.file.uploaded", Message: mustStruct(t, map[string]any{"file": "doc1.pdf"})}, // filtered out
		{EventType: "myapp.user.created", Message: mustStruct(t, map[string]any{"user_id": "125"}), Resource: &pb.EventResource{ResourceId: "/users/125"}},
	}}, batch)
	require.NoError(t, err)
	require.Len(t, batch.GetResults(), 3)
	for i, r := range batch.GetResults() {
		require.True(t, r.GetSuccess(), "event %d: %s", i, r.GetFailureReason())
	}

	var lease struct {
		Events []struct {
			cloudEvent
			Sequence string `json:"sequence"`
		} `json:"events"`
	}
	h.rest(t, "POST", "/v1/event-destinations/"+dest.ID+"/pull?limit=10", nil, http.StatusOK, &lease)
	require.Len(t, lease.Events, 3, "the destination gets the three myapp.user.created events")
	byData := map[string]cloudEvent{}
	for _, e := range lease.Events {
		require.Equal(t, "1.0", e.SpecVersion)
		require.Equal(t, "myapp.user.created", e.Type)
		require.Equal(t, "/herald", e.Source)
		require.Equal(t, "herald:dev", e.PrincipalIdentity)
		require.Equal(t, "application/json", e.DataContentType)
		require.NotEmpty(t, e.ID)
		require.NotEmpty(t, e.Sequence)
		var data map[string]string
		require.NoError(t, json.Unmarshal(e.Data, &data))
		byData[data["user_id"]] = e.cloudEvent
	}
	require.JSONEq(t, `{"user_id":"123","username":"john_doe"}`, string(byData["123"].Data))
	require.Equal(t, "/users/123", byData["123"].Subject)
	require.Equal(t, "2024-10-16T14:30:00Z", byData["123"].Time)
	require.Empty(t, byData["124"].Subject)
	require.Equal(t, "2024-10-16T14:30:01Z", byData["124"].Time)
	require.Equal(t, "/users/125", byData["125"].Subject)
	require.NotEmpty(t, byData["125"].Time, "a missing occurred_at is the publish time")
}

// TestGRPCErrors: no token is UNAUTHENTICATED, a bad event
// INVALID_ARGUMENT; the status messages repeat no token.
func TestGRPCErrors(t *testing.T) {
	t.Parallel()
	h := startGRPC(t)
	req := &pb.PublishEventRequest{Event: &pb.Event{EventType: "myapp.user.created"}}

	err := h.conn.Invoke(h.ctx(t, ""), publishMethod, req, &pb.PublishEventResponse{})
	require.Equal(t, codes.Unauthenticated, status.Code(err), "error: %v", err)

	err = h.conn.Invoke(h.ctx(t, "not-the-token-42"), publishMethod, req, &pb.PublishEventResponse{})
	require.Equal(t, codes.Unauthenticated, status.Code(err), "error: %v", err)
	require.NotContains(t, status.Convert(err).Message(), "not-the-token-42")

	err = h.conn.Invoke(h.ctx(t, h.Token), publishMethod, &pb.PublishEventRequest{Event: &pb.Event{EventType: "bad type!"}}, &pb.PublishEventResponse{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "error: %v", err)
	require.Contains(t, status.Convert(err).Message(), "event_type must be")

	err = h.conn.Invoke(h.ctx(t, h.Token), batchMethod, &pb.BatchPublishEventsRequest{}, &pb.BatchPublishEventsResponse{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "error: %v", err)
}

// TestGRPCHealth: the server and both services are SERVING, without a
// token; an unknown service is NOT_FOUND.
func TestGRPCHealth(t *testing.T) {
	t.Parallel()
	h := startGRPC(t)
	health := healthpb.NewHealthClient(h.conn)
	for _, service := range []string{"", publisher, consumerName} {
		res, err := health.Check(h.ctx(t, ""), &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err, "service %q", service)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, res.GetStatus(), "service %q", service)
	}
	_, err := health.Check(h.ctx(t, ""), &healthpb.HealthCheckRequest{Service: "nvidia.omniverse.notifications.consumer.v1beta.NoSuchService"})
	require.Equal(t, codes.NotFound, status.Code(err), "an unserved service is unknown: %v", err)
}

// TestGRPCReflection: v1 and v1alpha list the served services (no token
// needed) and describe the publisher's file, as grpcurl asks.
func TestGRPCReflection(t *testing.T) {
	t.Parallel()
	h := startGRPC(t)
	want := []string{"grpc.health.v1.Health", publisher, consumerName}
	slices.Sort(want)

	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(h.ctx(t, ""))
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}))
	res, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	require.Equal(t, want, names)

	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: publisher},
	}))
	res, err = stream.Recv()
	require.NoError(t, err)
	files := res.GetFileDescriptorResponse().GetFileDescriptorProto()
	require.NotEmpty(t, files)
	require.Contains(t, string(files[0]), "nvidia/omniverse/notifications/publisher/v1beta/event_publisher.proto")
	require.NoError(t, stream.CloseSend())

	// v1alpha is v1 on another path (the messages are the same on the
	// wire); older tools ask it.
	alpha, err := h.conn.NewStream(h.ctx(t, ""), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
	require.NoError(t, err)
	require.NoError(t, alpha.SendMsg(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}))
	ares := &reflectionpb.ServerReflectionResponse{}
	require.NoError(t, alpha.RecvMsg(ares))
	names = names[:0]
	for _, s := range ares.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	require.Equal(t, want, names)
	require.NoError(t, alpha.CloseSend())
}
