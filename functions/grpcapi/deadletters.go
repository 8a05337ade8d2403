package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/heraldevents/herald/delivery"
	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// actions maps the wire actions to package delivery's; ACTION_UNSPECIFIED
// maps to "", which delivery.Triage reports LEFT.
var actions = map[pb.ManageDeadLetteredEventsRequest_Action]delivery.DeadLetterAction{
	pb.ManageDeadLetteredEventsRequest_ACTION_REPLAY:  delivery.ActionReplay,
	pb.ManageDeadLetteredEventsRequest_ACTION_DISCARD: delivery.ActionDiscard,
	pb.ManageDeadLetteredEventsRequest_ACTION_LEAVE:   delivery.ActionLeave,
}

type (
	dlResponse = pb.ManageDeadLetteredEventsResponse
	dlEvent    = pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent
	dlOutcome  = pb.ManageDeadLetteredEventsResponse_ActionOutcome
)

// ManageDeadLetteredEvents is the operator's triage stream over the
// deployment-wide dead-letter queue; it needs inspect-and-replay-all-dlq
// (PERMISSION_DENIED without). The opening message carries no actions
// (INVALID_ARGUMENT if it does). The server streams every dead letter as a
// dead_lettered_event with a session-scoped delivery tag (1, 2, 3, …),
// then looks again every delivery.DeadLetterPoll for new ones. Each later
// message carries actions; every action gets exactly one action_outcome
// with its tag, in order: REPLAYED, DISCARDED, LEFT, ORIGIN_QUEUE_DELETED
// or REPLAY_FAILED (see delivery.Triage.Act). An action with a tag this
// session did not issue, or whose dead letter it already replayed or
// discarded, or with no action, changes nothing and is reported LEFT with
// a detail saying why. Dead letters stay in the store until acted on, so
// after a reconnect every remaining one is shown again, with new tags.
func (h *Consumer) ManageDeadLetteredEvents(ctx context.Context, stream *connect.BidiStream[pb.ManageDeadLetteredEventsRequest, pb.ManageDeadLetteredEventsResponse]) (err error) {
	procedure := stream.Spec().Procedure
	ctx, p, end, err := streamStart(ctx, procedure)
	if err != nil {
		return err
	}
	defer end(&err)
	tr, err := h.Service.NewTriage(p)
	if err != nil {
		return Error(ctx, procedure, err)
	}
	first, err := stream.Receive()
	if errors.Is(err, io.EOF) {
		return Error(ctx, procedure, herr.New(herr.InvalidArgument, "the first message opens the stream and must be sent"))
	}
	if err != nil {
		return err
	}
	if len(first.GetActions()) > 0 {
		return Error(ctx, procedure, herr.New(herr.InvalidArgument, "actions must be empty on the first (opening) message"))
	}
	s := &triage{tr: tr, stream: stream, procedure: procedure, flushes: holdFrom(ctx), writeTimeout: h.Service.Streams().WriteTimeout}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// connect finishes the stream once the handler returns: the reader
	// must not send after that.
	defer s.finish()
	readerDone := make(chan error, 1)
	go func() {
		defer cancel()
		for {
			msg, err := stream.Receive()
			if errors.Is(err, io.EOF) {
				readerDone <- nil // the operator is done
				return
			}
			if err == nil {
				err = s.act(ctx, msg.GetActions())
			}
			if err != nil {
				readerDone <- err
				return
			}
		}
	}()
	browseErr := s.browse(ctx)
	select {
	case err := <-readerDone:
		return err
	default:
		return browseErr
	}
}

// triage is one ManageDeadLetteredEvents session: delivery.Triage's
// bookkeeping and this stream's sending.
type triage struct {
	tr        *delivery.Triage
	stream    *connect.BidiStream[pb.ManageDeadLetteredEventsRequest, pb.ManageDeadLetteredEventsResponse]
	procedure string

	sendMu   sync.Mutex // the browser and the reader both send
	finished bool       // the handler returned; guarded by sendMu
	// flushes arms the write deadline: an operator's client must take
	// each message within writeTimeout (StreamConfig.WriteTimeout).
	flushes      *heldFlushes
	writeTimeout time.Duration
}

func (s *triage) send(r *dlResponse) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.finished {
		return herr.New(herr.Canceled, "the stream has ended")
	}
	return s.flushes.Bounded(s.writeTimeout, func() error { return s.stream.Send(r) })
}

// finish stops every later send; a send in progress completes first.
func (s *triage) finish() {
	s.sendMu.Lock()
	s.finished = true
	s.sendMu.Unlock()
}

// browse shows every dead letter not shown yet, then looks again every
// delivery.DeadLetterPoll, until ctx ends (nil) or a send or list fails.
func (s *triage) browse(ctx context.Context) error {
	for {
		ds, err := s.tr.Unshown(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return Error(ctx, s.procedure, err)
		}
		for _, d := range ds {
			if err := s.show(ctx, d); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delivery.DeadLetterPoll):
		}
	}
}

// show sends d with a new tag unless it was shown already.
func (s *triage) show(ctx context.Context, d *leasestore.DeadLetter) error {
	tag, ok := s.tr.Show(d)
	if !ok {
		return nil
	}
	item := &dlEvent{
		Reason:        reason(d.Reason),
		OriginQueue:   d.OriginQueue,
		DeliveryCount: d.DeliveryCount,
		ResourceId:    d.ResourceID,
		DeliveryTag:   tag,
	}
	if !d.DeadLetteredAt.IsZero() {
		item.DeadLetteredAt = timestamppb.New(d.DeadLetteredAt)
	}
	if ce, err := delivery.DecodeConsumerEvent(d.Body); err == nil {
		item.Event, err = toConsumerEvent(ce)
		if err != nil {
			// A message gRPC cannot carry (a number beyond a double's
			// range, say): it is what was dead-lettered, so it is shown
			// all the same, with its type, to be discarded or replayed.
			item.Event = &pb.Event{EventType: d.EventType}
		}
	} else {
		// Shown all the same, so that it can be discarded.
		item.Event = &pb.Event{EventType: d.EventType}
	}
	return s.send(&dlResponse{Payload: &pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_{DeadLetteredEvent: item}})
}

// act runs one message's actions and sends one outcome per action, in
// order.
func (s *triage) act(ctx context.Context, entries []*pb.ManageDeadLetteredEventsRequest_ActionEntry) error {
	in := make([]delivery.TriageAction, len(entries))
	for i, a := range entries {
		in[i] = delivery.TriageAction{DeliveryTag: a.GetDeliveryTag(), Action: actions[a.GetAction()]}
	}
	outs, err := s.tr.Act(ctx, in)
	if err != nil {
		return Error(ctx, s.procedure, err)
	}
	for _, o := range outs {
		r := &dlOutcome{DeliveryTag: o.DeliveryTag, Outcome: outcome(o.Outcome), Detail: o.Detail}
		if err := s.send(&dlResponse{Payload: &pb.ManageDeadLetteredEventsResponse_ActionOutcome_{ActionOutcome: r}}); err != nil {
			return err
		}
	}
	return nil
}

// reason maps a leasestore reason to the wire enum. The enum is the
// notifications API's and has no value for a rejection (an acknowledgement
// with status "rejected"): it is sent as REASON_DELIVERY_LIMIT, since the
// consumer gave up on the event, spending its delivery budget at once;
// delivery_count says how often it was delivered. The REST dead-letter
// list and the WebSocket triage frames say "REJECTED".
func reason(r string) pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_Reason {
	switch r {
	case leasestore.ReasonDeliveryLimit, leasestore.ReasonRejected:
		return pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_DELIVERY_LIMIT
	case leasestore.ReasonExpired:
		return pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_EXPIRED
	case leasestore.ReasonMaxLen:
		return pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_MAXLEN
	}
	return pb.ManageDeadLetteredEventsResponse_DeadLetteredEvent_REASON_UNSPECIFIED
}

// outcome maps a delivery outcome to the wire enum.
func outcome(o delivery.DeadLetterOutcome) pb.ManageDeadLetteredEventsResponse_ActionOutcome_Outcome {
	switch o {
	case delivery.OutcomeReplayed:
		return pb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_REPLAYED
	case delivery.OutcomeDiscarded:
		return pb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_DISCARDED
	case delivery.OutcomeLeft:
		return pb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_LEFT
	case delivery.OutcomeOriginQueueDeleted:
		return pb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_ORIGIN_QUEUE_DELETED
	}
	return pb.ManageDeadLetteredEventsResponse_ActionOutcome_OUTCOME_REPLAY_FAILED
}
