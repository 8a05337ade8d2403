package grpcapi

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/internal/structjson"
)

// requireCodecSame decodes data with publishCodec and with proto.Unmarshal
// and requires the same answer: both refuse, or the two requests marshal
// to messages proto.Equal calls equal and every message encodes to the
// same JSON. lazy says whether the codec must have kept the messages
// encoded.
func requireCodecSame(t *testing.T, data []byte, lazy bool) {
	t.Helper()
	got := &pb.BatchPublishEventsRequest{}
	err := publishCodec{}.Unmarshal(data, got)
	want := &pb.BatchPublishEventsRequest{}
	if werr := proto.Unmarshal(data, want); werr != nil {
		require.Error(t, err, "proto.Unmarshal refuses it: %v", werr)
		return
	}
	require.NoError(t, err)
	clear(data) // the codec must not keep connect's buffer
	b, err := proto.Marshal(got)
	require.NoError(t, err)
	again := &pb.BatchPublishEventsRequest{}
	require.NoError(t, proto.Unmarshal(b, again))
	require.True(t, proto.Equal(want, again), "want %v\ngot  %v", want, again)
	require.Len(t, got.GetEvents(), len(want.GetEvents()))
	for i, ev := range got.GetEvents() {
		wantJSON, wantErr := structjson.Encode(want.GetEvents()[i].GetMessage())
		gotJSON, gotErr := structjson.Encode(ev.GetMessage())
		require.Equal(t, wantErr == nil, gotErr == nil, "event %d: %v / %v", i, wantErr, gotErr)
		require.Equal(t, string(wantJSON), string(gotJSON), "event %d", i)
		if lazy && ev.GetMessage() != nil {
			require.Empty(t, ev.GetMessage().GetFields(), "event %d: the message was decoded", i)
			require.NotEmpty(t, ev.GetMessage().ProtoReflect().GetUnknown(), "event %d", i)
		}
	}
}

func randomEvent(r *rand.Rand, i int) *pb.Event {
	ev := &pb.Event{EventType: fmt.Sprintf("shop.order.%d", r.IntN(5))}
	if r.IntN(4) > 0 {
		m := map[string]any{"id": i, "name": "Ada Lovelace", "vip": r.IntN(2) == 0, "none": nil, "price": r.Float64() * 1000,
			"items": []any{map[string]any{"sku": "SKU-1", "qty": r.IntN(9)}, "é日本\n\"<&>"}}
		if r.IntN(3) == 0 {
			m["nested"] = map[string]any{"deeper": map[string]any{"list": []any{1, 2.5, "three", []any{}}}}
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			panic(err)
		}
		ev.Message = s
	}
	if r.IntN(2) == 0 {
		ev.OccurredAt = timestamppb.New(time.Unix(r.Int64N(1<<32), r.Int64N(1e9)))
	}
	if r.IntN(2) == 0 {
		ev.Resource = &pb.EventResource{ResourceId: fmt.Sprintf("/orders/%d", i)}
	}
	return ev
}

// TestPublishCodecMatchesProtoUnmarshal: for random publish requests the
// codec keeps every message encoded and gives what proto.Unmarshal gives;
// for requests no encoder writes (a field twice, an unknown field, an
// event_type or message string that is not UTF-8, a repeated key), and
// for random damage, it gives proto.Unmarshal's answer.
func TestPublishCodecMatchesProtoUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 14))
	for range 300 {
		req := &pb.BatchPublishEventsRequest{}
		for i := range 1 + r.IntN(8) {
			req.Events = append(req.Events, randomEvent(r, i))
		}
		data, err := proto.Marshal(req)
		require.NoError(t, err)
		requireCodecSame(t, append([]byte(nil), data...), true)
		for range 4 {
			damaged := append([]byte(nil), data...)
			damaged[r.IntN(len(damaged))] = byte(r.IntN(256))
			requireCodecSame(t, damaged, false)
		}
	}

	ev, err := proto.Marshal(randomEvent(r, 1))
	require.NoError(t, err)
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	dupKey := append(field(1, append(field(1, []byte("k")), field(2, []byte{0x20, 1})...)),
		field(1, append(field(1, []byte("k")), field(2, []byte{0x20, 0})...))...)
	for name, event := range map[string][]byte{
		"event_type twice":        append(append([]byte(nil), ev...), field(1, []byte("other.type"))...),
		"an unknown field":        append(append([]byte(nil), ev...), field(9, []byte("x"))...),
		"event_type not UTF-8":    field(1, []byte("a\xffb")),
		"a string not UTF-8":      field(2, field(1, append(field(1, []byte("k")), field(2, field(3, []byte("\xff")))...))),
		"a repeated message key":  field(2, dupKey),
		"a message value of none": field(2, field(1, field(1, []byte("k")))),
	} {
		t.Run(name, func(t *testing.T) {
			requireCodecSame(t, field(1, event), false)
		})
	}
}

// TestPublishCodecSingle: a PublishEventRequest takes the same path, and
// a request with its event field twice (which protobuf merges) is left
// to proto.Unmarshal.
func TestPublishCodecSingle(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 71))
	ev := randomEvent(r, 7)
	ev.Message = &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStringValue("b")}}
	data, err := proto.Marshal(&pb.PublishEventRequest{Event: ev})
	require.NoError(t, err)
	got := &pb.PublishEventRequest{}
	require.NoError(t, publishCodec{}.Unmarshal(data, got))
	require.Empty(t, got.GetEvent().GetMessage().GetFields(), "kept encoded")
	js, err := structjson.Encode(got.GetEvent().GetMessage())
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"b"}`, string(js))
	require.Equal(t, ev.GetEventType(), got.GetEvent().GetEventType())

	twice := append(append([]byte(nil), data...), data...)
	got = &pb.PublishEventRequest{}
	require.NoError(t, publishCodec{}.Unmarshal(twice, got))
	want := &pb.PublishEventRequest{}
	require.NoError(t, proto.Unmarshal(twice, want))
	require.True(t, proto.Equal(want, got))
}
