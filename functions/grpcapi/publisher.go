package grpcapi

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/structjson"
)

// maxConsumerRequestBytes is connect-go's read limit on the consumer
// service's requests (queue management, stream requests): none is
// anywhere near it. The publisher service has its own bound
// (MaxPublishRequestBytes, limits.go).
const maxConsumerRequestBytes = 4 << 20

// Publisher implements EventPublishingService over a delivery.Service,
// with the REST API's rules (package functions/publish): an invalid event
// is INVALID_ARGUMENT (REST: 422), a type the caller may not publish is
// PERMISSION_DENIED (403), and a broker failure is an OK answer with
// result.success false and a failure_reason: that event was not
// published. In a batch every event has its own result and an invalid
// event fails alone.
//
// The caller's principal comes from the context (see Authenticate).
type Publisher struct {
	Service *delivery.Service
}

var _ publisherv1betaconnect.EventPublishingServiceHandler = (*Publisher)(nil)

// PublishEvent publishes one event.
func (h *Publisher) PublishEvent(ctx context.Context, req *connect.Request[pb.PublishEventRequest]) (*connect.Response[pb.PublishEventResponse], error) {
	procedure := req.Spec().Procedure
	p, err := auth.FromContext(ctx)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	ev := req.Msg.GetEvent()
	if ev == nil {
		return nil, Error(ctx, procedure, herr.New(herr.InvalidArgument, "event is required"))
	}
	e, err := toEvent(ev)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	key, err := idempotencyKey(req.Header())
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	// The event's own key keys a single publish as the metadata does;
	// never both (as in a batch).
	if k := ev.GetIdempotencyKey(); k != "" {
		if key != "" {
			return nil, Error(ctx, procedure, herr.New(herr.Malformed, "the event has an idempotency_key and the request idempotency-key metadata: send one of them"))
		}
		key = k
	}
	o, replayed, err := h.Service.PublishOutcomeKeyed(ctx, p, key, e)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	res := &pb.PublishingResult{Success: o.Success(), FailureReason: o.FailureReason, Replayed: replayed}
	if o.Success() {
		res.Event = echo(ev, o.Published.PublishedAt)
	} else {
		res.Event = echo(ev, time.Time{})
	}
	resp := connect.NewResponse(&pb.PublishEventResponse{Result: res})
	markReplayed(resp.Header(), replayed)
	return resp, nil
}

// BatchPublishEvents publishes 1–1,000 events in parallel, one result
// each, from a request of at most MaxPublishRequestBytes. The request's
// idempotency-key metadata keys the whole batch; or each event may carry
// its own Event.idempotency_key (never both, nor one key twice:
// INVALID_ARGUMENT; delivery.Service.PublishItemsKeyed).
func (h *Publisher) BatchPublishEvents(ctx context.Context, req *connect.Request[pb.BatchPublishEventsRequest]) (*connect.Response[pb.BatchPublishEventsResponse], error) {
	procedure := req.Spec().Procedure
	p, err := auth.FromContext(ctx)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	in := req.Msg.GetEvents()
	if err := delivery.CheckBatchSize(len(in)); err != nil {
		return nil, Error(ctx, procedure, err)
	}
	items := make([]delivery.BatchItem, len(in))
	for i, ev := range in {
		items[i].Event, items[i].Err = toEvent(ev)
		items[i].Key = ev.GetIdempotencyKey()
	}
	key, err := idempotencyKey(req.Header())
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	outs, replayed, err := h.Service.PublishItemsKeyed(ctx, p, key, items)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	results := make([]*pb.PublishingResult, len(in))
	for i, o := range outs {
		var publishedAt time.Time
		if o.Success() {
			publishedAt = o.Published.PublishedAt
		}
		results[i] = &pb.PublishingResult{Event: echo(in[i], publishedAt), Success: o.Success(), FailureReason: o.FailureReason, Replayed: o.Replayed}
	}
	resp := connect.NewResponse(&pb.BatchPublishEventsResponse{Results: results})
	markReplayed(resp.Header(), replayed)
	return resp, nil
}

// Idempotency metadata (docs/api.md, "Idempotency keys"): the request's
// key, and the mark of an answer replayed from the key's first publish.
const (
	metaIdempotencyKey = "idempotency-key"
	metaReplayed       = "idempotent-replayed"
)

// idempotencyKey returns the request's idempotency-key metadata ("" for
// none), or INVALID_ARGUMENT for a key sent twice or empty.
func idempotencyKey(md http.Header) (string, error) {
	vs := md.Values(metaIdempotencyKey)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", herr.New(herr.InvalidArgument, "send one idempotency-key, not %d", len(vs))
	case vs[0] == "":
		return "", herr.New(herr.InvalidArgument, "the idempotency-key is empty: an idempotency key is 1 to 200 printable ASCII characters")
	}
	return vs[0], nil
}

// markReplayed sets the replay mark on a replayed answer's metadata.
func markReplayed(md http.Header, replayed bool) {
	if replayed {
		md.Set(metaReplayed, "true")
	}
}

// toEvent converts a wire event and checks it against the publish rules.
// The message Struct becomes its JSON object (compacted, so the 256 KiB
// limit is measured the same way on every build); a Struct that has no
// JSON form (a NaN or infinite number, a value with no kind) is
// INVALID_ARGUMENT.
func toEvent(ev *pb.Event) (delivery.Event, error) {
	e := delivery.Event{EventType: ev.GetEventType(), ResourceID: ev.GetResource().GetResourceId()}
	if m := ev.GetMessage(); m != nil {
		b, err := structjson.Encode(m)
		if err != nil {
			return e, herr.Wrap(herr.InvalidArgument, err, "message must be a JSON object: every value needs a kind and numbers must be finite")
		}
		e.Message = b
	}
	if ts := ev.GetOccurredAt(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return e, herr.Wrap(herr.InvalidArgument, err, "occurred_at must be a valid timestamp: from 0001-01-01 to 9999-12-31, nanos in [0, 1e9)")
		}
		e.OccurredAt = ts.AsTime()
	}
	err := e.Validate() // before e is returned: it remembers the check
	return e, err
}

// echo is the event as a result reports it: the request's event, with an
// empty message for a missing one and, when the event was published
// without occurred_at, the publish time as occurred_at (as REST does).
// It shares the request's submessages rather than copy them.
func echo(ev *pb.Event, publishedAt time.Time) *pb.Event {
	out := &pb.Event{
		EventType:  ev.GetEventType(),
		Message:    ev.GetMessage(),
		OccurredAt: ev.GetOccurredAt(),
		Resource:   ev.GetResource(),
	}
	if out.Message == nil {
		out.Message = &structpb.Struct{}
	}
	if out.OccurredAt == nil && !publishedAt.IsZero() {
		out.OccurredAt = timestamppb.New(publishedAt)
	}
	return out
}
