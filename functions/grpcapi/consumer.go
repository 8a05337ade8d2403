package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/functions/httpx"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/structjson"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Consumer implements EventConsumerService over a delivery.Service, with
// the rules of the REST faces (packages functions/queues and
// functions/stream): durable-queue management needs create-durable-queues
// (create, update) or delete-durable-queues (delete), consuming a durable
// queue needs consume-durable-queues; a bad queue_id is INVALID_ARGUMENT
// before any backend call, an unknown queue NOT_FOUND.
//
// Every RPC of the service is served; ManageDeadLetteredEvents needs
// inspect-and-replay-all-dlq.
//
// The caller's principal comes from the context (see Authenticate).
type Consumer struct {
	consumerv1betaconnect.UnimplementedEventConsumerServiceHandler
	Service *delivery.Service
}

var _ consumerv1betaconnect.EventConsumerServiceHandler = (*Consumer)(nil)

// CreateDurableQueue ensures a durable queue exists (delivery.CreateQueue):
// created is true when this call created it, or when Herald generated the
// id because none was given.
func (h *Consumer) CreateDurableQueue(ctx context.Context, req *connect.Request[pb.CreateDurableQueueRequest]) (*connect.Response[pb.CreateDurableQueueResponse], error) {
	procedure := req.Spec().Procedure
	p, err := auth.FromContext(ctx)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	q, err := h.Service.CreateQueue(ctx, p, delivery.CreateQueueParams{ID: req.Msg.GetQueueId(), FilterGroups: toGroups(req.Msg.GetFilterGroups())})
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	return connect.NewResponse(&pb.CreateDurableQueueResponse{QueueId: q.Queue.ID, Created: q.Created}), nil
}

// UpdateDurableQueue replaces a durable queue's filters, compare-and-set
// on current_filter_groups (delivery.UpdateQueueFilters).
func (h *Consumer) UpdateDurableQueue(ctx context.Context, req *connect.Request[pb.UpdateDurableQueueRequest]) (*connect.Response[pb.UpdateDurableQueueResponse], error) {
	procedure := req.Spec().Procedure
	p, err := auth.FromContext(ctx)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	m := req.Msg
	if err := h.Service.UpdateQueueFilters(ctx, p, m.GetQueueId(), toGroups(m.GetCurrentFilterGroups()), toGroups(m.GetNewFilterGroups())); err != nil {
		return nil, Error(ctx, procedure, err)
	}
	return connect.NewResponse(&pb.UpdateDurableQueueResponse{}), nil
}

// DeleteDurableQueue deletes a durable queue and what it holds
// (delivery.DeleteQueue).
func (h *Consumer) DeleteDurableQueue(ctx context.Context, req *connect.Request[pb.DeleteDurableQueueRequest]) (*connect.Response[pb.DeleteDurableQueueResponse], error) {
	procedure := req.Spec().Procedure
	p, err := auth.FromContext(ctx)
	if err != nil {
		return nil, Error(ctx, procedure, err)
	}
	if err := h.Service.DeleteQueue(ctx, p, req.Msg.GetQueueId()); err != nil {
		return nil, Error(ctx, procedure, err)
	}
	return connect.NewResponse(&pb.DeleteDurableQueueResponse{}), nil
}

// ConsumeDurableEventsWithAcks streams a durable queue with explicit
// settlement. The first message names the queue (queue_id) and may
// already carry tags; every response carries one event and its delivery
// tag. Each later message settles tags: acks first, so a tag in both lists
// is acknowledged; a nacked event is delivered again at once (with a new
// tag); an unknown tag is skipped and does not end the stream. When the
// stream ends, for whatever reason, the events it did not settle return to
// the queue and are delivered again on reconnect.
//
// The stream ends OK when the client half-closes (after the tags it sent
// are settled), NOT_FOUND when the queue is gone, and INTERNAL with
// delivery.ConsumerCancelledMessage when its session was taken away while
// the queue is intact.
func (h *Consumer) ConsumeDurableEventsWithAcks(ctx context.Context, stream *connect.BidiStream[pb.ConsumeDurableEventsWithAcksRequest, pb.ConsumeDurableEventsWithAcksResponse]) (err error) {
	procedure := stream.Spec().Procedure
	ctx, p, end, err := streamStart(ctx, procedure)
	if err != nil {
		return err
	}
	defer end(&err)
	first, err := stream.Receive()
	if errors.Is(err, io.EOF) {
		return Error(ctx, procedure, herr.New(herr.InvalidArgument, "the first message must carry queue_id"))
	}
	if err != nil {
		return err
	}
	st, err := h.Service.OpenStream(ctx, p, delivery.StreamRequest{Kind: delivery.Durable, QueueID: first.GetQueueId()})
	if err != nil {
		return Error(ctx, procedure, err)
	}
	defer func() { _ = st.Close(ctx) }()
	// proc measures each event from its send to its settlement.
	proc := telemetry.NewProcessing(ctx)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The reader settles what the client sends, in order, without waiting
	// for the store: what arrives while a write is in flight goes in the
	// next one (Stream.SettleAsync), so a client that acknowledges event by
	// event costs a write per group, not per event. A failed write ends
	// the session, and the stream with it. The reader records how it
	// ended before it stops the sender.
	readerDone := make(chan error, 1)
	go func() {
		defer cancel()
		msg := first
		for {
			st.SettleAsync(ctx, msg.GetAckDeliveryTags(), msg.GetNackDeliveryTags())
			proc.Settled(ctx, msg.GetAckDeliveryTags(), msg.GetNackDeliveryTags())
			var err error
			msg, err = stream.Receive()
			if errors.Is(err, io.EOF) {
				readerDone <- nil // the client is done: end the stream OK
				return
			}
			if err != nil {
				readerDone <- err
				return
			}
		}
	}()
	sendErr := deliver(ctx, procedure, st, h.Service.Streams().WriteTimeout, func(d delivery.Delivery, ev *pb.Event) error {
		// Noted before the send: the client may settle it before Send
		// returns.
		proc.Delivered(d.Tag)
		return stream.Send(&pb.ConsumeDurableEventsWithAcksResponse{Events: []*pb.Event{ev}, DeliveryTag: d.Tag})
	}, nil)
	select {
	case err := <-readerDone:
		return err
	default:
		return sendErr
	}
}

// ConsumeNonDurableEvents streams a non-durable queue. The first message
// opens it: filter_groups alone start a fresh queue; reconnect_token
// reattaches to the queue it names (1 to 200 printable ASCII characters,
// else INVALID_ARGUMENT naming the field and quoting none of the token;
// a token that names no live queue, e.g. after the reconnect-grace
// window, is NOT_FOUND); with previous_filter_groups as well, the
// reattached queue's filters move from previous_filter_groups to
// filter_groups (compare-and-set, a mismatch is INVALID_ARGUMENT).
//
// The first response carries just the reconnect token; every later one
// carries one event and the token again. Events are acknowledged once
// sent. A client may half-close after its first message.
//
// A later message updates the open stream's filters (the notifications API:
// previous_filter_groups is "Required when updating filters"): the queue's
// filters move from its previous_filter_groups (absent = no groups, every
// event) to its filter_groups, compare-and-set as on a reconnect
// (delivery.Stream.UpdateFilters). A mismatch, or invalid groups, ends the
// stream INVALID_ARGUMENT naming the field, with the filters unchanged.
// When the update is applied the server answers with a response carrying
// no event and the token, like the first one; events it sends after that
// response that the new filters reject were leased before the update
// (unsettled or requeued), and are delivered anyway. A later message with
// neither list changes nothing (the token alone resumes on the filters the
// queue has), and gets no answer. A reconnect_token in a later message
// must be the stream's own, else INVALID_ARGUMENT.
//
// Errors on an open stream are those of ConsumeDurableEventsWithAcks.
func (h *Consumer) ConsumeNonDurableEvents(ctx context.Context, stream *connect.BidiStream[pb.ConsumeNonDurableEventsRequest, pb.ConsumeNonDurableEventsResponse]) (err error) {
	procedure := stream.Spec().Procedure
	ctx, p, end, err := streamStart(ctx, procedure)
	if err != nil {
		return err
	}
	defer end(&err)
	first, err := stream.Receive()
	if errors.Is(err, io.EOF) {
		return Error(ctx, procedure, herr.New(herr.InvalidArgument, "the first message must carry filter_groups or reconnect_token"))
	}
	if err != nil {
		return err
	}
	req := delivery.StreamRequest{Kind: delivery.NonDurable, FilterGroups: toGroups(first.GetFilterGroups())}
	if first.ReconnectToken != nil {
		req.ReconnectToken, req.TokenField = first.GetReconnectToken(), "reconnect_token"
		// An empty token that is present breaks the rule too.
		if err := delivery.ValidateReconnectToken(req.TokenField, req.ReconnectToken); err != nil {
			return Error(ctx, procedure, err)
		}
		if prev := first.GetPreviousFilterGroups(); len(prev) > 0 {
			req.FilterUpdate, req.PreviousFilterGroups = true, toGroups(prev)
		}
	}
	st, err := h.Service.OpenStream(ctx, p, req)
	if err != nil {
		return Error(ctx, procedure, err)
	}
	defer func() { _ = st.Close(ctx) }()
	token := st.QueueID()
	// The reader answers filter updates while deliver sends events: one
	// Send at a time, and none once the handler returns (connect then
	// writes the trailers).
	var sendMu sync.Mutex
	returned := false
	flushes, writeTimeout := holdFrom(ctx), h.Service.Streams().WriteTimeout
	send := func(res *pb.ConsumeNonDurableEventsResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if returned {
			return context.Canceled
		}
		if len(res.GetEvents()) > 0 {
			// In a batch of deliver, which arms and clears the deadline.
			return stream.Send(res)
		}
		// The token or a filter update's answer, sent on its own.
		return flushes.Bounded(writeTimeout, func() error { return stream.Send(res) })
	}
	defer func() {
		sendMu.Lock()
		returned = true
		sendMu.Unlock()
	}()
	if err := send(&pb.ConsumeNonDurableEventsResponse{ReconnectToken: token}); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readerDone := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Receive()
			if errors.Is(err, io.EOF) {
				return // half-closed: keep streaming
			}
			if err == nil {
				err = updateFilters(ctx, procedure, st, msg, send)
			}
			if err != nil {
				readerDone <- err
				cancel()
				return
			}
		}
	}()
	sendErr := deliver(ctx, procedure, st, writeTimeout, func(d delivery.Delivery, ev *pb.Event) error {
		return send(&pb.ConsumeNonDurableEventsResponse{Events: []*pb.Event{ev}, ReconnectToken: token})
	}, func(sent []int64) error {
		// Flushed is acknowledged, even when the client leaves right
		// after: otherwise a client that cancels as soon as it has an
		// event would be sent it again on reconnect. Sent but not flushed
		// (the client stopped reading) is not: it goes back to the queue.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer acancel()
		if _, err := st.Ack(actx, sent...); err != nil && ctx.Err() == nil {
			return Error(ctx, procedure, err)
		}
		return nil
	})
	select {
	case err := <-readerDone:
		return err
	default:
		return sendErr
	}
}

// ackTimeout bounds the acknowledgement of an event ConsumeNonDurableEvents
// has sent, which outlives the client's cancellation.
const ackTimeout = 10 * time.Second

// updateFilters applies a later ConsumeNonDurableEvents message to the
// open stream st (see ConsumeNonDurableEvents) and, when it moved the
// filters, confirms with an event-less response.
func updateFilters(ctx context.Context, procedure string, st *delivery.Stream, msg *pb.ConsumeNonDurableEventsRequest, send func(*pb.ConsumeNonDurableEventsResponse) error) error {
	if msg.ReconnectToken != nil && msg.GetReconnectToken() != st.QueueID() {
		return Error(ctx, procedure, herr.New(herr.InvalidArgument,
			"a later message's reconnect_token must be absent or this stream's own token: a stream reads one queue"))
	}
	prev, next := msg.GetPreviousFilterGroups(), msg.GetFilterGroups()
	if len(prev) == 0 && len(next) == 0 {
		return nil // the token alone: resume on the queue's filters
	}
	if err := st.UpdateFilters(ctx, toGroups(prev), toGroups(next)); err != nil {
		return Error(ctx, procedure, err)
	}
	return send(&pb.ConsumeNonDurableEventsResponse{ReconnectToken: st.QueueID()})
}

// ConsumeDurableEvents (deprecated) streams a durable queue and
// acknowledges each event StreamConfig.AutoAckDelay after it was sent.
// An event still unacknowledged when the stream ends is delivered again
// on reconnect; one acknowledged just before a disconnect is lost to the
// client, which is the loss window the notifications API documents for this RPC. Errors
// are those of ConsumeDurableEventsWithAcks.
func (h *Consumer) ConsumeDurableEvents(ctx context.Context, req *connect.Request[pb.ConsumeDurableEventsRequest], stream *connect.ServerStream[pb.ConsumeDurableEventsResponse]) (err error) {
	procedure := req.Spec().Procedure
	ctx, p, end, err := streamStart(ctx, procedure)
	if err != nil {
		return err
	}
	defer end(&err)
	st, err := h.Service.OpenStream(ctx, p, delivery.StreamRequest{Kind: delivery.Durable, QueueID: req.Msg.GetQueueId()})
	if err != nil {
		return Error(ctx, procedure, err)
	}
	defer func() { _ = st.Close(ctx) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	delay := h.Service.Streams().AutoAckDelay
	var ackErr atomic.Pointer[connect.Error]
	err = deliver(ctx, procedure, st, h.Service.Streams().WriteTimeout, func(d delivery.Delivery, ev *pb.Event) error {
		return stream.Send(&pb.ConsumeDurableEventsResponse{Events: []*pb.Event{ev}})
	}, func(sent []int64) error {
		// The delay runs from the flush: what a client that stopped
		// reading was never sent is not acknowledged. After the stream
		// ends the session knows no tags, so a late timer acknowledges
		// nothing.
		time.AfterFunc(delay, func() {
			if _, err := st.Ack(ctx, sent...); err != nil && ctx.Err() == nil {
				// The session is lost: end the stream with its error.
				ackErr.CompareAndSwap(nil, Error(ctx, procedure, err))
				cancel()
			}
		})
		return nil
	})
	if e := ackErr.Load(); e != nil {
		return e
	}
	return err
}

// streamStart begins a streaming RPC: it registers the stream with the
// server's tracker of long-lived requests (httpx.StreamContext), so the
// context it returns ends when the server shuts down, and reads the
// caller's principal. The handler defers end with its named error: end
// turns an end by shutdown into UNAVAILABLE (shutdownErr) and releases
// the registration. A stream that cannot start because the server is
// shutting down is UNAVAILABLE; one without a principal UNAUTHENTICATED.
func streamStart(ctx context.Context, procedure string) (context.Context, *auth.Principal, func(*error), error) {
	sctx, done, err := httpx.StreamContext(ctx)
	if err != nil {
		return nil, nil, nil, Error(ctx, procedure, err)
	}
	p, err := auth.FromContext(sctx)
	if err != nil {
		done()
		return nil, nil, nil, Error(sctx, procedure, err)
	}
	end := func(err *error) {
		*err = shutdownErr(sctx, *err)
		done()
	}
	return telemetry.WithTransport(sctx, "grpc"), p, end, nil
}

// shutdownErr ends a stream UNAVAILABLE when its context ended because the
// server is shutting down, whatever the handler returned: the notifications API tells
// clients to reconnect on UNAVAILABLE, and they find their queue (same
// reconnect token or queue_id) on another instance or this one restarted.
// It is not logged as a failure.
func shutdownErr(ctx context.Context, err error) error {
	if httpx.ShuttingDown(ctx) {
		return connect.NewError(connect.CodeUnavailable, errors.New(herr.MessageOf(httpx.ErrShuttingDown)))
	}
	return err
}

// ctxEnd is how a stream ends when its context did: DEADLINE_EXCEEDED
// when the client's deadline (grpc-timeout) passed, so that the client
// tells a stream cut by its own deadline from one the server finished;
// nil (OK) when the client cancelled, as it is no longer there to read
// the status.
func ctxEnd(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the stream's deadline passed"))
	}
	return nil
}

// deliver hands st's events to send, one call per event, until ctx ends
// (see ctxEnd), send fails (its error) or the session is lost (its error, mapped
// with Error). A client must take each event within writeTimeout
// (StreamConfig.WriteTimeout), else its stream is dropped and what it was
// not sent returns to the queue when the handler closes the session. The
// events of one batch are flushed together; flushed, when set, is then
// called with the tags of the events that were sent and flushed, and its
// error ends the stream.
func deliver(ctx context.Context, procedure string, st *delivery.Stream, writeTimeout time.Duration, send func(delivery.Delivery, *pb.Event) error, flushed func(tags []int64) error) error {
	flushes := holdFrom(ctx)
	for {
		ds, err := st.Next(ctx)
		if err != nil {
			if serr := st.Err(); serr != nil {
				return Error(ctx, procedure, serr)
			}
			if ctx.Err() != nil {
				return ctxEnd(ctx)
			}
			return Error(ctx, procedure, err)
		}
		// One socket write for the batch, not one per event: the flush
		// after its last event sends what is left.
		flushes.Hold(len(ds))
		sent, err := sendBatch(ctx, procedure, st, ds, func(d delivery.Delivery, ev *pb.Event) error {
			flushes.Arm(writeTimeout)
			return send(d, ev)
		})
		flushes.Arm(writeTimeout)
		if ferr := flushes.Release(); err == nil {
			err = ferr
		}
		flushes.Disarm() // the stream now waits for events: no deadline
		if err != nil {
			return err
		}
		if flushed != nil && len(sent) > 0 {
			if err := flushed(sent); err != nil {
				return err
			}
		}
	}
}

// sendBatch sends the events of one batch in order and returns the tags
// of those it sent.
func sendBatch(ctx context.Context, procedure string, st *delivery.Stream, ds []delivery.Delivery, send func(delivery.Delivery, *pb.Event) error) ([]int64, error) {
	sent := make([]int64, 0, len(ds))
	for _, d := range ds {
		ev, err := toConsumerEvent(d.Event)
		if err != nil {
			// Defence in depth (delivery screens poison events before any
			// transport sees them): an event gRPC cannot encode now never
			// can, so it is poison on this first delivery and goes to the
			// dead-letter queue at once. A nack would bring it back to
			// every stream until the delivery limit, with an error line
			// each time; ending the stream would hold up every event
			// behind it.
			accesslog.Logger(ctx).ErrorContext(ctx, "poison event: gRPC cannot encode it; it goes to the dead-letter queue at once", "procedure", procedure, "delivery_count", d.DeliveryCount, "err", err)
			if _, err := st.Reject(context.WithoutCancel(ctx), d.Tag); err != nil && ctx.Err() == nil {
				return sent, Error(ctx, procedure, err)
			}
			continue
		}
		if err := send(d, ev); err != nil {
			return sent, err
		}
		sent = append(sent, d.Tag)
	}
	return sent, nil
}

// toGroups converts wire filter groups; delivery validates them.
func toGroups(in []*pb.FilterGroup) filter.Groups {
	if in == nil {
		return nil
	}
	out := make(filter.Groups, len(in))
	for i, g := range in {
		out[i].EventType = g.GetEventType()
		for _, f := range g.GetFilters() {
			out[i].Filters = append(out[i].Filters, filter.ResourceFilter{
				FilterType: filter.Type(f.GetFilterType()), ResourceID: f.GetResourceId(),
			})
		}
	}
	return out
}

// toConsumerEvent converts a delivered event to the notifications API's consumer Event.
// A missing or null message is an empty Struct. The message is a Struct
// for sending only (structjson.Wire: its encoding, not its fields). id
// and resource (Herald's fields 100 and 101) carry the event's id and
// resource, resource only when it has one.
func toConsumerEvent(e *delivery.ConsumerEvent) (*pb.Event, error) {
	out := &pb.Event{
		EventType:         e.EventType,
		PrincipalIdentity: e.PrincipalIdentity,
		Id:                e.ID,
	}
	if e.Resource.ResourceID != "" {
		out.Resource = &pb.EventResource{ResourceId: e.Resource.ResourceID}
	}
	if !e.OccurredAt.IsZero() {
		out.OccurredAt = timestamppb.New(e.OccurredAt)
	}
	if !e.PublishedAt.IsZero() {
		out.PublishedAt = timestamppb.New(e.PublishedAt)
	}
	if len(e.Message) == 0 || string(e.Message) == "null" {
		out.Message = &structpb.Struct{}
		return out, nil
	}
	wire := structjson.Wire
	if e.MessageChecked() {
		wire = structjson.WireChecked
	}
	m, err := wire(e.Message)
	if err != nil {
		return nil, herr.Wrap(herr.Internal, err, "a stored event's message is not a JSON object")
	}
	out.Message = m
	return out, nil
}
