package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
)

// ConsumerEvent is an event as the notifications API delivers it on
// streams and in dead letters: no source, the publisher's principal
// instead.
type ConsumerEvent struct {
	Type              string          `json:"event_type"`
	PrincipalIdentity string          `json:"principal_identity"`
	OccurredAt        time.Time       `json:"occurred_at"`
	PublishedAt       time.Time       `json:"published_at"`
	Message           json.RawMessage `json:"message"`
	// ID is the event's id, the same on every delivery of it: delivery
	// is at least once, so a handler that must not act twice remembers
	// the ids it has handled. "" from a server that sends none.
	ID string `json:"id,omitempty"`
	// ResourceID is a streamed event's resource id ("" for none); a dead
	// letter carries it as DeadLetter.ResourceID.
	ResourceID string `json:"-"`
}

// Delivery is one event handed to a StreamHandler.
type Delivery struct {
	Event ConsumerEvent
	// DeliveryTag names this delivery on its durable stream (0 on a
	// non-durable one); it changes when the event is delivered again.
	DeliveryTag int64
	// ReconnectToken is the non-durable queue's token ("" on a durable
	// stream).
	ReconnectToken string
}

// StreamHandler processes one streamed event. On a durable queue, nil
// acknowledges it and an error nacks it (it is delivered again at once,
// and counts towards the queue's delivery limit, past which it is
// dead-lettered). On a non-durable stream an error stops the stream and is
// returned. The context is not cancelled when the stream is asked to stop,
// so the event in hand can be finished.
type StreamHandler func(ctx context.Context, d *Delivery) error

// StreamOption configures Stream and StreamNonDurable.
type StreamOption func(*streamOptions)

type streamOptions struct {
	noAck      bool
	token      string
	onToken    func(string)
	backoff    time.Duration
	maxBackoff time.Duration
	drain      time.Duration
	logger     *slog.Logger
}

// WithoutAck makes a durable stream settle nothing: a look at the queue
// that leaves it as it was. The events it was sent return to the queue
// when the stream ends.
func WithoutAck() StreamOption { return func(o *streamOptions) { o.noAck = true } }

// WithReconnectToken resumes the non-durable queue named by token (within
// its reconnect grace window, 20 s by default) instead of starting a new
// one; the filters given to StreamNonDurable are then ignored: the queue
// keeps its own.
func WithReconnectToken(token string) StreamOption { return func(o *streamOptions) { o.token = token } }

// OnReconnectToken calls f with a non-durable queue's reconnect token each
// time a stream to it opens.
func OnReconnectToken(f func(token string)) StreamOption {
	return func(o *streamOptions) { o.onToken = f }
}

// WithReconnectBackoff sets the jittered wait before a reconnect: at most
// initial the first time, doubling up to most (defaults 250 ms, 10 s). It
// starts again at initial once a stream has delivered an event.
func WithReconnectBackoff(initial, most time.Duration) StreamOption {
	return func(o *streamOptions) { o.backoff, o.maxBackoff = initial, most }
}

// WithStreamLogger receives reconnects and nacks (default: discarded).
func WithStreamLogger(l *slog.Logger) StreamOption { return func(o *streamOptions) { o.logger = l } }

func newStreamOptions(opts []StreamOption) *streamOptions {
	o := &streamOptions{backoff: 250 * time.Millisecond, maxBackoff: 10 * time.Second, drain: 10 * time.Second}
	for _, f := range opts {
		f(o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// brokerCancelled is the start of the notifications API's INTERNAL message
// for a stream whose session was taken away while its queue is intact.
const brokerCancelled = "Internal Server Error: The broker cancelled this stream's consumer."

// reconnectable says whether a stream that ended with err should be opened
// again: the server is unavailable or shutting down, the broker cancelled
// the stream's consumer, or the queue has too many streams for now.
func reconnectable(err error) bool {
	if transportFailure(err) {
		return true
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeResourceExhausted:
		return true
	case connect.CodeInternal:
		// connect reports a connection that died in the middle of a
		// message as INTERNAL "protocol error: incomplete envelope", with
		// the transport's own error (often HTTP/2's unexported "client
		// conn is closed") inside: a transport failure too.
		return strings.HasPrefix(ce.Message(), brokerCancelled) || strings.HasPrefix(ce.Message(), incompleteEnvelope)
	}
	return false
}

// incompleteEnvelope starts connect's message for a stream cut in the
// middle of a message.
const incompleteEnvelope = "protocol error: incomplete envelope"

// transportFailure says whether err is the connection failing under a
// stream (reset, cut in the middle of a message), which connect reports
// with codes such as CANCELED or INTERNAL rather than UNAVAILABLE.
func transportFailure(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (c *Client) consumerService() consumerv1betaconnect.EventConsumerServiceClient {
	return consumerv1betaconnect.NewEventConsumerServiceClient(c.grpc, c.base.String(), connect.WithGRPC())
}

// Stream consumes the durable queue queueID over the gRPC stream
// ConsumeDurableEventsWithAcks, one event at a time: h's nil acknowledges
// the event, an error nacks it. A stream that ends UNAVAILABLE (a
// restart, a cut connection), RESOURCE_EXHAUSTED (too many streams on the
// queue) or INTERNAL because the broker cancelled its consumer is opened
// again after a jittered backoff; the events it had not settled come
// again. Any other end (the queue is gone: NOT_FOUND; a refused token) is
// returned.
//
// When ctx is cancelled Stream stops gracefully: the event in hand is
// finished and settled, the request side is closed so that Herald settles
// what was sent and ends the stream, and Stream returns nil. Events the
// server had already sent and h had not been given go back to the queue.
func (c *Client) Stream(ctx context.Context, queueID string, h StreamHandler, opts ...StreamOption) error {
	if h == nil {
		return errors.New("herald client: Stream needs a handler")
	}
	o := newStreamOptions(opts)
	svc := c.consumerService()
	return c.reconnect(ctx, o, func() (int, error) { return c.durableOnce(ctx, svc, queueID, h, o) })
}

// reconnect runs once until it ends for good: nil when ctx is cancelled,
// else the first error that is not reconnectable.
func (c *Client) reconnect(ctx context.Context, o *streamOptions, once func() (int, error)) error {
	failures := 0
	for {
		got, err := once()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !reconnectable(err) {
			return err
		}
		if got > 0 {
			failures = 0
		}
		failures++
		o.logger.Info("herald stream: reconnecting", "err", err)
		if sleep(ctx, jitter(backoffCeiling(o.backoff, o.maxBackoff, failures))) != nil {
			return nil
		}
	}
}

// durableOnce runs one ConsumeDurableEventsWithAcks stream and returns how
// many events it handled and how it ended (nil: ended OK).
func (c *Client) durableOnce(ctx context.Context, svc consumerv1betaconnect.EventConsumerServiceClient, queueID string, h StreamHandler, o *streamOptions) (int, error) {
	// The stream outlives ctx's cancellation long enough to settle.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	s := svc.ConsumeDurableEventsWithAcks(sctx)
	defer func() { _ = s.CloseResponse() }()
	if err := c.authorize(s.RequestHeader()); err != nil {
		return 0, err
	}
	if err := s.Send(&pb.ConsumeDurableEventsWithAcksRequest{QueueId: queueID}); err != nil {
		return 0, receiveErr(s.Receive, err)
	}
	var mu sync.Mutex // held while an event is handled and settled
	closing := false
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		mu.Lock()
		closing = true
		_ = s.CloseRequest() // Herald settles what it got, then ends the stream OK
		mu.Unlock()
		t := time.NewTimer(o.drain)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			cancel()
			_ = s.CloseResponse() // see nonDurableOnce
		}
	}()
	handled := 0
	hctx := context.WithoutCancel(ctx)
	for {
		res, err := s.Receive()
		if errors.Is(err, io.EOF) {
			return handled, nil
		}
		if err != nil {
			return handled, err
		}
		mu.Lock()
		if closing {
			mu.Unlock()
			continue // take nothing new
		}
		d := &Delivery{Event: fromPB(res.GetEvents()), DeliveryTag: res.GetDeliveryTag()}
		herr := h(hctx, d)
		handled++
		var settle *pb.ConsumeDurableEventsWithAcksRequest
		switch {
		case o.noAck:
		case herr == nil:
			settle = &pb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: []int64{d.DeliveryTag}}
		default:
			o.logger.Warn("herald stream: handler failed; the event will be redelivered", "tag", d.DeliveryTag, "err", herr)
			settle = &pb.ConsumeDurableEventsWithAcksRequest{NackDeliveryTags: []int64{d.DeliveryTag}}
		}
		var serr error
		if settle != nil {
			serr = s.Send(settle)
		}
		mu.Unlock()
		if serr != nil {
			return handled, receiveErr(s.Receive, serr)
		}
	}
}

// receiveErr is the stream's own error after a failed Send, which reports
// only io.EOF when the server has ended the stream.
func receiveErr[T any](receive func() (*T, error), sendErr error) error {
	if !errors.Is(sendErr, io.EOF) {
		return sendErr
	}
	for {
		_, err := receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// fromPB converts a delivered event (the API sends one per response).
func fromPB(evs []*pb.Event) ConsumerEvent {
	if len(evs) == 0 {
		return ConsumerEvent{}
	}
	e := evs[0]
	out := ConsumerEvent{Type: e.GetEventType(), PrincipalIdentity: e.GetPrincipalIdentity(), Message: json.RawMessage("{}"),
		ID: e.GetId(), ResourceID: e.GetResource().GetResourceId()}
	if e.OccurredAt != nil {
		out.OccurredAt = e.GetOccurredAt().AsTime()
	}
	if e.PublishedAt != nil {
		out.PublishedAt = e.GetPublishedAt().AsTime()
	}
	if e.Message != nil {
		// protojson varies its spacing on purpose; compact it so the bytes
		// are stable.
		if b, err := protojson.Marshal(e.GetMessage()); err == nil {
			var buf bytes.Buffer
			if json.Compact(&buf, b) == nil {
				out.Message = buf.Bytes()
			}
		}
	}
	return out
}

func toPBGroups(gs []FilterGroup) []*pb.FilterGroup {
	out := make([]*pb.FilterGroup, len(gs))
	for i, g := range gs {
		pg := &pb.FilterGroup{EventType: g.EventType}
		for _, f := range g.Filters {
			t := pb.ResourceFilter_FILTER_TYPE_UNSPECIFIED
			switch f.FilterType {
			case FilterEq:
				t = pb.ResourceFilter_FILTER_TYPE_EQ
			case FilterStartsWithLazy:
				t = pb.ResourceFilter_FILTER_TYPE_STARTS_WITH_LAZY
			case FilterStartsWithGreedy:
				t = pb.ResourceFilter_FILTER_TYPE_STARTS_WITH_GREEDY
			}
			pg.Filters = append(pg.Filters, &pb.ResourceFilter{FilterType: t, ResourceId: f.ResourceID})
		}
		out[i] = pg
	}
	return out
}

// StreamNonDurable follows a new non-durable queue over filters (nil:
// every event the token may receive) with the gRPC stream
// ConsumeNonDurableEvents, or resumes an earlier one
// (WithReconnectToken). Herald acknowledges each event as it sends it.
// When the stream ends UNAVAILABLE, RESOURCE_EXHAUSTED or with the
// broker-cancelled INTERNAL it is resumed with the queue's reconnect
// token after a jittered backoff, so nothing published in between is
// missed as long as the reconnect comes within the queue's grace window
// (20 s by default); a token that has outlived it is NOT_FOUND, returned.
// An error from h stops the stream and is returned. When ctx is cancelled
// the event in hand is finished and StreamNonDurable returns nil; events
// Herald had sent that h was not given are gone (non-durable queues
// acknowledge on send).
func (c *Client) StreamNonDurable(ctx context.Context, filters []FilterGroup, h StreamHandler, opts ...StreamOption) error {
	if h == nil {
		return errors.New("herald client: StreamNonDurable needs a handler")
	}
	o := newStreamOptions(opts)
	svc := c.consumerService()
	err := c.reconnect(ctx, o, func() (int, error) {
		n, err, hErr := c.nonDurableOnce(ctx, svc, filters, h, o)
		if hErr != nil {
			return n, handlerError{hErr} // never reconnectable: ends the loop
		}
		return n, err
	})
	if he, ok := err.(handlerError); ok {
		return he.err
	}
	return err
}

// handlerError carries a handler's error out of reconnect. It has no
// Unwrap on purpose: a handler's own connect error must not look like the
// stream's.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// nonDurableOnce runs one ConsumeNonDurableEvents stream: the events it
// handled, how the stream ended, and the handler's error if that ended it.
func (c *Client) nonDurableOnce(ctx context.Context, svc consumerv1betaconnect.EventConsumerServiceClient, filters []FilterGroup, h StreamHandler, o *streamOptions) (int, error, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	s := svc.ConsumeNonDurableEvents(sctx)
	defer func() { _ = s.CloseResponse() }()
	if err := c.authorize(s.RequestHeader()); err != nil {
		return 0, err, nil
	}
	first := &pb.ConsumeNonDurableEventsRequest{}
	if o.token != "" {
		tok := o.token
		first.ReconnectToken = &tok
	} else {
		first.FilterGroups = toPBGroups(filters)
	}
	if err := s.Send(first); err != nil {
		return 0, receiveErr(s.Receive, err), nil
	}
	var mu sync.Mutex // held while an event is handled
	closing := false
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
			mu.Lock()
			closing = true
			cancel()
			// Cancelling the request does not always unblock a Receive
			// waiting on an h2c stream; closing the response does.
			_ = s.CloseResponse()
			mu.Unlock()
		}
	}()
	handled := 0
	hctx := context.WithoutCancel(ctx)
	announced := false
	for {
		res, err := s.Receive()
		if errors.Is(err, io.EOF) {
			return handled, nil, nil
		}
		if err != nil {
			return handled, err, nil
		}
		if tok := res.GetReconnectToken(); tok != "" && !announced {
			o.token, announced = tok, true
			if o.onToken != nil {
				o.onToken(tok)
			}
		}
		if len(res.GetEvents()) == 0 {
			continue // the opening answer, or a filter update's confirmation
		}
		mu.Lock()
		if closing {
			mu.Unlock()
			return handled, nil, nil
		}
		herr := h(hctx, &Delivery{Event: fromPB(res.GetEvents()), ReconnectToken: o.token})
		handled++
		mu.Unlock()
		if herr != nil {
			return handled, nil, herr
		}
	}
}
