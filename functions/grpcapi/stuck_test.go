package grpcapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/local"
)

// stuckEvents events of stuckPad bytes each: 1 MiB, far more than the
// 64 KiB flow-control window of the stuck client.
const (
	stuckEvents = 16
	stuckPad    = 64 << 10
)

// TestGRPCStuckClientIsDropped: a gRPC consumer that stops reading (its
// HTTP/2 flow-control window stays full) is dropped once a send has
// waited HERALD_STREAM_WRITE_TIMEOUT: its session detaches and the events
// it was not sent go back to the queue, so that, reconnected, it gets
// every event — the ones it received before it stopped reading, and the
// rest. A non-durable stream acknowledges only what it flushed: it used
// to acknowledge an event as soon as it was handed to HTTP/2, though the
// client might never get it.
func TestGRPCStuckClientIsDropped(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		name := "ConsumeNonDurableEvents"
		if durable {
			name = "ConsumeDurableEventsWithAcks"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := startConsumerGRPC(t, func(c *local.Config) { c.StreamWriteTimeout = 2 * time.Second })
			typ := "stuck.grpc"
			if durable {
				typ = "stuck.durable"
			}
			// A client whose HTTP/2 flow-control windows stay at 64 KiB
			// (Go's client grants more window only as it reads).
			h2 := new(http.Protocols)
			h2.SetUnencryptedHTTP2(true)
			tr := &http.Transport{Protocols: h2, HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10}}
			t.Cleanup(tr.CloseIdleConnections)
			stuckClient := consumerv1betaconnect.NewEventConsumerServiceClient(&http.Client{Transport: tr}, h.URL, connect.WithGRPC())
			// Unbounded: only the server may end the stuck stream.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			var recv func() (float64, error)
			var queue string
			if durable {
				queue = "stuck-queue"
				h.createQueue(t, queue, typ)
				stuck := stuckClient.ConsumeDurableEventsWithAcks(ctx)
				stuck.RequestHeader().Set("Authorization", "Bearer "+h.Token)
				require.NoError(t, stuck.Send(&cpb.ConsumeDurableEventsWithAcksRequest{QueueId: queue}))
				// Attached once the queue shows the session.
				require.Eventually(t, func() bool { return liveSessionsOf(t, h, queue) == 1 }, timeout, 5*time.Millisecond)
				recv = func() (float64, error) {
					res, err := stuck.Receive()
					if err != nil {
						return 0, err
					}
					return res.GetEvents()[0].GetMessage().GetFields()["n"].GetNumberValue(), nil
				}
			} else {
				stuck := stuckClient.ConsumeNonDurableEvents(ctx)
				stuck.RequestHeader().Set("Authorization", "Bearer "+h.Token)
				require.NoError(t, stuck.Send(&cpb.ConsumeNonDurableEventsRequest{FilterGroups: []*cpb.FilterGroup{{EventType: typ}}}))
				first, err := stuck.Receive()
				require.NoError(t, err)
				queue = first.GetReconnectToken()
				recv = func() (float64, error) {
					res, err := stuck.Receive()
					if err != nil {
						return 0, err
					}
					return res.GetEvents()[0].GetMessage().GetFields()["n"].GetNumberValue(), nil
				}
			}
			// From here the client reads nothing.

			// Random, so that the stream's gzip (connect compresses messages
			// over 8 KiB for a client that accepts it) cannot shrink it.
			raw := make([]byte, stuckPad*3/4)
			_, _ = rand.Read(raw)
			pad := base64.StdEncoding.EncodeToString(raw)
			for i := range stuckEvents {
				res := &pb.PublishEventResponse{}
				require.NoError(t, h.conn.Invoke(h.ctx(t, h.Token), publishMethod, &pb.PublishEventRequest{Event: &pb.Event{
					EventType: typ, Message: mustStruct(t, map[string]any{"n": i, "pad": pad}),
				}}, res))
				require.True(t, res.GetResult().GetSuccess(), res.GetResult().GetFailureReason())
			}
			h.waitDetached(t, queue)

			// What reached the client before it stopped reading, then the
			// end of the stream.
			seen := map[int]bool{}
			for {
				n, err := recv()
				if err != nil {
					break
				}
				seen[int(n)] = true
			}
			require.Less(t, len(seen), stuckEvents, "the client was stuck before it had everything")

			if durable {
				s := h.acksStream(t, h.ctx(t, h.Token), queue)
				for len(seen) < stuckEvents {
					_, n := recvAck(t, s)
					seen[int(n)] = true
				}
			} else {
				s, _ := h.ndStream(t, h.ctx(t, h.Token), &cpb.ConsumeNonDurableEventsRequest{ReconnectToken: &queue})
				for len(seen) < stuckEvents {
					_, n := recvND(t, s)
					seen[int(n)] = true
				}
			}
			for i := range stuckEvents {
				require.True(t, seen[i], "event %d reached the client", i)
			}
		})
	}
}

// liveSessionsOf returns the live_sessions of GET
// /v1/event-destinations/{id}.
func liveSessionsOf(t *testing.T, h *grpcHerald, id string) int {
	t.Helper()
	var d struct {
		LiveSessions int `json:"live_sessions"`
	}
	h.rest(t, "GET", "/v1/event-destinations/"+id, nil, 200, &d)
	return d.LiveSessions
}
