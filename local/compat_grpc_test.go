package local_test

// This file runs the notifications API's gRPC examples with a client built
// from the published protos (ovstorage, commit 766a1c55:
// .../publisher/v1beta/event_publisher.proto and
// .../consumer/v1beta/event_consumer.proto), and checks that Herald's own
// protos (proto/) are a wire superset of them.
//
// The published protos are proprietary, so no copy and no code generated
// from them is kept. publishedProtos restates their messages, fields,
// enum and RPCs as a table (names, numbers, types: the wire contract, no
// prose); the test builds descriptors from it with protodesc and talks to
// Herald with dynamicpb messages over grpc-go, as a generated stub would.
// When the published protos change, edit the table to match them.

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	// Herald's generated protos, registered for the superset check.
	_ "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	_ "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
)

// protoField is one field of a published message. typ is "string",
// "bool", or a message or enum type name: relative names are in the
// file's package, ".google.protobuf.X" are well-known types.
type protoField struct {
	name     string
	number   int32
	typ      string
	repeated bool
	optional bool // proto3 optional
}

type protoMessage struct {
	name   string
	fields []protoField
	enums  []protoEnum
}

type protoEnum struct {
	name   string
	values []string // in number order from 0
}

type protoRPC struct {
	name, in, out                string
	clientStreams, serverStreams bool
}

type protoFile struct {
	path, pkg string
	messages  []protoMessage
	service   string
	rpcs      []protoRPC
}

const (
	pbStruct    = ".google.protobuf.Struct"
	pbTimestamp = ".google.protobuf.Timestamp"
)

var publishedProtos = []protoFile{{
	path: "published/event_publisher.proto",
	pkg:  "nvidia.omniverse.notifications.publisher.v1beta",
	messages: []protoMessage{
		{name: "PublishEventRequest", fields: []protoField{{"event", 1, "Event", false, false}}},
		{name: "BatchPublishEventsRequest", fields: []protoField{{"events", 1, "Event", true, false}}},
		{name: "Event", fields: []protoField{
			{"event_type", 1, "string", false, false},
			{"message", 2, pbStruct, false, false},
			{"occurred_at", 3, pbTimestamp, false, false},
			{"resource", 4, "EventResource", false, false},
		}},
		{name: "EventResource", fields: []protoField{{"resource_id", 1, "string", false, false}}},
		{name: "PublishingResult", fields: []protoField{
			{"event", 1, "Event", false, false},
			{"success", 2, "bool", false, false},
			{"failure_reason", 3, "string", false, false},
		}},
		{name: "PublishEventResponse", fields: []protoField{{"result", 1, "PublishingResult", false, false}}},
		{name: "BatchPublishEventsResponse", fields: []protoField{{"results", 1, "PublishingResult", true, false}}},
	},
	service: "EventPublishingService",
	rpcs: []protoRPC{
		{"PublishEvent", "PublishEventRequest", "PublishEventResponse", false, false},
		{"BatchPublishEvents", "BatchPublishEventsRequest", "BatchPublishEventsResponse", false, false},
	},
}, {
	path: "published/event_consumer.proto",
	pkg:  "nvidia.omniverse.notifications.consumer.v1beta",
	messages: []protoMessage{
		{name: "ConsumeDurableEventsResponse", fields: []protoField{{"events", 1, "Event", true, false}}},
		{name: "ConsumeNonDurableEventsResponse", fields: []protoField{
			{"events", 1, "Event", true, false},
			{"reconnect_token", 2, "string", false, false},
		}},
		{name: "ConsumeDurableEventsRequest", fields: []protoField{{"queue_id", 1, "string", false, false}}},
		{name: "ConsumeNonDurableEventsRequest", fields: []protoField{
			{"filter_groups", 1, "FilterGroup", true, false},
			{"reconnect_token", 2, "string", false, true},
			{"previous_filter_groups", 3, "FilterGroup", true, false},
		}},
		{name: "CreateDurableQueueRequest", fields: []protoField{{"filter_groups", 1, "FilterGroup", true, false}}},
		{name: "CreateDurableQueueResponse", fields: []protoField{{"queue_id", 1, "string", false, false}}},
		{name: "DeleteDurableQueueRequest", fields: []protoField{{"queue_id", 1, "string", false, false}}},
		{name: "UpdateDurableQueueRequest", fields: []protoField{
			{"queue_id", 1, "string", false, false},
			{"current_filter_groups", 2, "FilterGroup", true, false},
			{"new_filter_groups", 3, "FilterGroup", true, false},
		}},
		{name: "DeleteDurableQueueResponse"},
		{name: "UpdateDurableQueueResponse"},
		{name: "Event", fields: []protoField{
			{"event_type", 1, "string", false, false},
			{"principal_identity", 2, "string", false, false},
			{"occurred_at", 3, pbTimestamp, false, false},
			{"published_at", 4, pbTimestamp, false, false},
			{"message", 5, pbStruct, false, false},
		}},
		{name: "FilterGroup", fields: []protoField{
			{"event_type", 1, "string", false, false},
			{"filters", 2, "ResourceFilter", true, false},
		}},
		{name: "ResourceFilter", fields: []protoField{
			{"filter_type", 1, "ResourceFilter.FilterType", false, false},
			{"resource_id", 2, "string", false, false},
		}, enums: []protoEnum{{"FilterType", []string{
			"FILTER_TYPE_UNSPECIFIED", "FILTER_TYPE_EQ", "FILTER_TYPE_STARTS_WITH_LAZY", "FILTER_TYPE_STARTS_WITH_GREEDY",
		}}}},
	},
	service: "EventConsumerService",
	rpcs: []protoRPC{
		{"ConsumeDurableEvents", "ConsumeDurableEventsRequest", "ConsumeDurableEventsResponse", false, true},
		{"ConsumeNonDurableEvents", "ConsumeNonDurableEventsRequest", "ConsumeNonDurableEventsResponse", true, true},
		{"CreateDurableQueue", "CreateDurableQueueRequest", "CreateDurableQueueResponse", false, false},
		{"DeleteDurableQueue", "DeleteDurableQueueRequest", "DeleteDurableQueueResponse", false, false},
		{"UpdateDurableQueue", "UpdateDurableQueueRequest", "UpdateDurableQueueResponse", false, false},
	},
}}

// descriptor builds the file descriptor of f.
func (f protoFile) descriptor(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	fp := &descriptorpb.FileDescriptorProto{
		Name: proto.String(f.path), Package: proto.String(f.pkg), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto", "google/protobuf/timestamp.proto"},
	}
	enumNames := map[string]bool{}
	for _, m := range f.messages {
		for _, e := range m.enums {
			enumNames[m.name+"."+e.name] = true
		}
	}
	for _, m := range f.messages {
		mp := &descriptorpb.DescriptorProto{Name: proto.String(m.name)}
		for _, e := range m.enums {
			ep := &descriptorpb.EnumDescriptorProto{Name: proto.String(e.name)}
			for i, v := range e.values {
				ep.Value = append(ep.Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(v), Number: proto.Int32(int32(i))})
			}
			mp.EnumType = append(mp.EnumType, ep)
		}
		for _, fl := range m.fields {
			fd := &descriptorpb.FieldDescriptorProto{
				Name: proto.String(fl.name), Number: proto.Int32(fl.number), JsonName: proto.String(jsonName(fl.name)),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			}
			if fl.repeated {
				fd.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
			}
			switch {
			case fl.typ == "string":
				fd.Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
			case fl.typ == "bool":
				fd.Type = descriptorpb.FieldDescriptorProto_TYPE_BOOL.Enum()
			case enumNames[fl.typ]:
				fd.Type = descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum()
				fd.TypeName = proto.String("." + f.pkg + "." + fl.typ)
			case strings.HasPrefix(fl.typ, "."):
				fd.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
				fd.TypeName = proto.String(fl.typ)
			default:
				fd.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
				fd.TypeName = proto.String("." + f.pkg + "." + fl.typ)
			}
			if fl.optional {
				fd.Proto3Optional = proto.Bool(true)
				fd.OneofIndex = proto.Int32(int32(len(mp.OneofDecl)))
				mp.OneofDecl = append(mp.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_" + fl.name)})
			}
			mp.Field = append(mp.Field, fd)
		}
		fp.MessageType = append(fp.MessageType, mp)
	}
	sp := &descriptorpb.ServiceDescriptorProto{Name: proto.String(f.service)}
	for _, r := range f.rpcs {
		sp.Method = append(sp.Method, &descriptorpb.MethodDescriptorProto{
			Name: proto.String(r.name), InputType: proto.String("." + f.pkg + "." + r.in), OutputType: proto.String("." + f.pkg + "." + r.out),
			ClientStreaming: proto.Bool(r.clientStreams), ServerStreaming: proto.Bool(r.serverStreams),
		})
	}
	fp.Service = []*descriptorpb.ServiceDescriptorProto{sp}
	fd, err := protodesc.NewFile(fp, protoregistry.GlobalFiles)
	require.NoError(t, err)
	return fd
}

func jsonName(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// TestHeraldProtosAreAWireSuperset: every published message, field, enum
// value and RPC exists in Herald's protos with the same full name, number,
// type and cardinality, so bytes written from either read alike; Herald may
// add fields and RPCs.
func TestHeraldProtosAreAWireSuperset(t *testing.T) {
	t.Parallel()
	for _, f := range publishedProtos {
		pub := f.descriptor(t)
		msgs := pub.Messages()
		for i := range msgs.Len() {
			pm := msgs.Get(i)
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(pm.FullName())
			require.NoError(t, err, "Herald lacks message %s", pm.FullName())
			hm := d.(protoreflect.MessageDescriptor)
			for j := range pm.Fields().Len() {
				pf := pm.Fields().Get(j)
				hf := hm.Fields().ByNumber(pf.Number())
				require.NotNil(t, hf, "%s lacks field %d (%s)", pm.FullName(), pf.Number(), pf.Name())
				require.Equal(t, pf.Name(), hf.Name(), "%s field %d", pm.FullName(), pf.Number())
				require.Equal(t, pf.Kind(), hf.Kind(), "%s.%s kind", pm.FullName(), pf.Name())
				require.Equal(t, pf.Cardinality(), hf.Cardinality(), "%s.%s cardinality", pm.FullName(), pf.Name())
				require.Equal(t, pf.HasPresence(), hf.HasPresence(), "%s.%s presence", pm.FullName(), pf.Name())
				switch pf.Kind() {
				case protoreflect.MessageKind:
					require.Equal(t, pf.Message().FullName(), hf.Message().FullName(), "%s.%s type", pm.FullName(), pf.Name())
				case protoreflect.EnumKind:
					require.Equal(t, pf.Enum().FullName(), hf.Enum().FullName(), "%s.%s type", pm.FullName(), pf.Name())
					for k := range pf.Enum().Values().Len() {
						pv := pf.Enum().Values().Get(k)
						hv := hf.Enum().Values().ByNumber(pv.Number())
						require.NotNil(t, hv, "%s lacks value %d", pf.Enum().FullName(), pv.Number())
						require.Equal(t, pv.Name(), hv.Name())
					}
				}
			}
		}
		ps := pub.Services().Get(0)
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(ps.FullName())
		require.NoError(t, err, "Herald lacks service %s", ps.FullName())
		hs := d.(protoreflect.ServiceDescriptor)
		for i := range ps.Methods().Len() {
			pm := ps.Methods().Get(i)
			hm := hs.Methods().ByName(pm.Name())
			require.NotNil(t, hm, "%s lacks %s", ps.FullName(), pm.Name())
			require.Equal(t, pm.Input().FullName(), hm.Input().FullName())
			require.Equal(t, pm.Output().FullName(), hm.Output().FullName())
			require.Equal(t, pm.IsStreamingClient(), hm.IsStreamingClient(), "%s client streaming", pm.Name())
			require.Equal(t, pm.IsStreamingServer(), hm.IsStreamingServer(), "%s server streaming", pm.Name())
		}
	}
}

// published holds the dynamic messages of the published protos.
type published struct {
	files map[string]protoreflect.FileDescriptor // by package suffix: "publisher", "consumer"
}

func newPublished(t *testing.T) published {
	p := published{files: map[string]protoreflect.FileDescriptor{}}
	for _, f := range publishedProtos {
		p.files[strings.Split(f.pkg, ".")[3]] = f.descriptor(t)
	}
	return p
}

// msg returns a new message "publisher.Event", say.
func (p published) msg(name string) *dynamicpb.Message {
	pkg, local, _ := strings.Cut(name, ".")
	return dynamicpb.NewMessage(p.files[pkg].Messages().ByName(protoreflect.Name(local)))
}

// set sets field name of m from a Go value (string, bool, a message, or a
// list of messages).
func set(m *dynamicpb.Message, name string, v any) *dynamicpb.Message {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	switch x := v.(type) {
	case string:
		m.Set(fd, protoreflect.ValueOfString(x))
	case protoreflect.EnumNumber:
		m.Set(fd, protoreflect.ValueOfEnum(x))
	case proto.Message:
		// A well-known type from its Go form: copy through the wire.
		dm := dynamicpb.NewMessage(fd.Message())
		b, _ := proto.Marshal(x)
		_ = proto.Unmarshal(b, dm)
		m.Set(fd, protoreflect.ValueOfMessage(dm))
	case []*dynamicpb.Message:
		l := m.Mutable(fd).List()
		for _, e := range x {
			l.Append(protoreflect.ValueOfMessage(e))
		}
	}
	return m
}

func get(m protoreflect.Message, name string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

// TestNotificationsGRPCExamples runs the notifications API's gRPC
// examples with the published messages: publish one event and a batch,
// create a durable queue with a greedy filter and consume it, consume a
// non-durable stream, re-filter and delete the queue.
func TestNotificationsGRPCExamples(t *testing.T) {
	t.Parallel()
	c := start(t)
	u, err := url.Parse(c.base)
	require.NoError(t, err)
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	p := newPublished(t)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+c.token), time.Minute)
	defer cancel()
	const publisher = "/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/"
	const consumer = "/nvidia.omniverse.notifications.consumer.v1beta.EventConsumerService/"

	event := func(id string) *dynamicpb.Message {
		msg, err := structpb.NewStruct(map[string]any{"user_id": id})
		require.NoError(t, err)
		e := p.msg("publisher.Event")
		set(e, "event_type", "myapp.file.uploaded")
		set(e, "message", msg)
		set(e, "occurred_at", timestamppb.New(time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC)))
		set(e, "resource", set(p.msg("publisher.EventResource"), "resource_id", id))
		return e
	}

	// CreateDurableQueue with a greedy filter, as published: no queue_id.
	f := set(p.msg("consumer.ResourceFilter"), "filter_type", protoreflect.EnumNumber(3))
	set(f, "resource_id", "/uploads")
	group := set(p.msg("consumer.FilterGroup"), "event_type", "myapp.file.uploaded")
	set(group, "filters", []*dynamicpb.Message{f})
	created := p.msg("consumer.CreateDurableQueueResponse")
	require.NoError(t, conn.Invoke(ctx, consumer+"CreateDurableQueue", set(p.msg("consumer.CreateDurableQueueRequest"), "filter_groups", []*dynamicpb.Message{group}), created))
	queueID := get(created, "queue_id").String()
	require.NotEmpty(t, queueID)

	// PublishEvent, then BatchPublishEvents: /uploads/1 and /uploads/2
	// match the greedy filter, /uploads10/3 does not (whole words).
	one := p.msg("publisher.PublishEventResponse")
	require.NoError(t, conn.Invoke(ctx, publisher+"PublishEvent", set(p.msg("publisher.PublishEventRequest"), "event", event("/uploads/1")), one))
	require.True(t, get(get(one, "result").Message(), "success").Bool())
	batch := p.msg("publisher.BatchPublishEventsResponse")
	require.NoError(t, conn.Invoke(ctx, publisher+"BatchPublishEvents",
		set(p.msg("publisher.BatchPublishEventsRequest"), "events", []*dynamicpb.Message{event("/uploads10/3"), event("/uploads/2")}), batch))
	results := get(batch, "results").List()
	require.Equal(t, 2, results.Len())
	for i := range results.Len() {
		require.True(t, get(results.Get(i).Message(), "success").Bool(), "result %d", i)
	}

	// ConsumeDurableEvents delivers the two matching events.
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, consumer+"ConsumeDurableEvents")
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(set(p.msg("consumer.ConsumeDurableEventsRequest"), "queue_id", queueID)))
	require.NoError(t, st.CloseSend())
	var ids []string
	for len(ids) < 2 {
		res := p.msg("consumer.ConsumeDurableEventsResponse")
		require.NoError(t, st.RecvMsg(res))
		evs := get(res, "events").List()
		for i := range evs.Len() {
			e := evs.Get(i).Message()
			require.Equal(t, "myapp.file.uploaded", get(e, "event_type").String())
			require.NotEmpty(t, get(e, "principal_identity").String())
			require.True(t, get(e, "published_at").Message().IsValid())
			require.EqualValues(t, time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC).Unix(), get(get(e, "occurred_at").Message(), "seconds").Int())
			var m structpb.Struct
			b, err := proto.Marshal(get(e, "message").Message().Interface())
			require.NoError(t, err)
			require.NoError(t, proto.Unmarshal(b, &m))
			ids = append(ids, m.Fields["user_id"].GetStringValue())
		}
	}
	require.ElementsMatch(t, []string{"/uploads/1", "/uploads/2"}, ids)

	// ConsumeNonDurableEvents: the first answer carries the reconnect
	// token, later ones the events.
	nd, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, consumer+"ConsumeNonDurableEvents")
	require.NoError(t, err)
	require.NoError(t, nd.SendMsg(set(p.msg("consumer.ConsumeNonDurableEventsRequest"), "filter_groups",
		[]*dynamicpb.Message{set(p.msg("consumer.FilterGroup"), "event_type", "myapp.user.created")})))
	first := p.msg("consumer.ConsumeNonDurableEventsResponse")
	require.NoError(t, nd.RecvMsg(first))
	token := get(first, "reconnect_token").String()
	require.NotEmpty(t, token)
	created2 := event("/users/123")
	set(created2, "event_type", "myapp.user.created")
	require.NoError(t, conn.Invoke(ctx, publisher+"PublishEvent", set(p.msg("publisher.PublishEventRequest"), "event", created2), p.msg("publisher.PublishEventResponse")))
	for {
		res := p.msg("consumer.ConsumeNonDurableEventsResponse")
		require.NoError(t, nd.RecvMsg(res))
		require.Equal(t, token, get(res, "reconnect_token").String())
		if evs := get(res, "events").List(); evs.Len() > 0 {
			require.Equal(t, "myapp.user.created", get(evs.Get(0).Message(), "event_type").String())
			break
		}
	}
	require.NoError(t, nd.CloseSend())

	// UpdateDurableQueue, DeleteDurableQueue, and a second delete: NOT_FOUND.
	update := set(p.msg("consumer.UpdateDurableQueueRequest"), "queue_id", queueID)
	set(update, "current_filter_groups", []*dynamicpb.Message{group})
	set(update, "new_filter_groups", []*dynamicpb.Message{set(p.msg("consumer.FilterGroup"), "event_type", "myapp.other")})
	require.NoError(t, conn.Invoke(ctx, consumer+"UpdateDurableQueue", update, p.msg("consumer.UpdateDurableQueueResponse")))
	del := set(p.msg("consumer.DeleteDurableQueueRequest"), "queue_id", queueID)
	require.NoError(t, conn.Invoke(ctx, consumer+"DeleteDurableQueue", del, p.msg("consumer.DeleteDurableQueueResponse")))
	err = conn.Invoke(ctx, consumer+"DeleteDurableQueue", del, p.msg("consumer.DeleteDurableQueueResponse"))
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}
