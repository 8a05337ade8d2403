package nats

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Payloads of the JetStream ack protocol.
var (
	ackPayload = []byte("+ACK")
	nakPayload = []byte("-NAK")
)

// handle is a received message's receipt: its reply subject, which is all
// JetStream needs to settle it, parsed.
type handle struct {
	reply    string
	stream   string
	consumer string
	seq      uint64 // stream sequence
}

// parseAck reads a $JS.ACK subject: $JS.ACK.STREAM.CONSUMER.DELIVERED.SEQ…
// (9 tokens), or the form with domain and account hash (12 or more). It
// runs for every received message, so it finds the tokens it needs in
// place instead of splitting the subject.
func parseAck(reply string) (*handle, error) {
	rest, ok := strings.CutPrefix(reply, "$JS.ACK.")
	if !ok {
		return nil, herr.New(herr.InvalidArgument, "message was not received from NATS JetStream")
	}
	// toks are the 7 tokens after $JS.ACK in the short form, 10 or more
	// in the long one; only the first 6 are looked at.
	var toks [6]string
	n := strings.Count(rest, ".") + 1
	for i := range toks {
		if i == n-1 {
			toks[i], rest = rest, ""
			break
		}
		toks[i], rest, _ = strings.Cut(rest, ".")
	}
	var stream, consumer, seq string
	switch {
	case n < 7:
		return nil, herr.New(herr.InvalidArgument, "message was not received from NATS JetStream")
	case n == 7:
		stream, consumer, seq = toks[0], toks[1], toks[3]
	case n >= 10:
		stream, consumer, seq = toks[2], toks[3], toks[5]
	default:
		return nil, herr.New(herr.InvalidArgument, "message has an unknown JetStream reply subject")
	}
	v, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return nil, herr.New(herr.InvalidArgument, "message has an unknown JetStream reply subject")
	}
	return &handle{reply: reply, stream: stream, consumer: consumer, seq: v}, nil
}

// Receive pulls up to max messages; see the package doc.
func (b *broker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	max, wait := p.Max, p.Wait
	if max < 1 {
		return nil, herr.New(herr.InvalidArgument, "receive: max must be at least 1")
	}
	js, err := b.begin(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	cname := consumerName(name)
	if err := b.verify(ctx, js, name, cname); err != nil {
		return nil, err
	}
	msgs, err := b.pull(ctx, name, cname, max, 0)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 && wait > 0 {
		msgs, err = b.pull(ctx, name, cname, 1, wait)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 1 && max > 1 {
			// What else is ready now. A failure here leaves the one
			// message to return; the next Receive reports the error.
			if more, err := b.pull(ctx, name, cname, max-1, 0); err == nil {
				msgs = append(msgs, more...)
			}
		}
	}
	out := make([]*pubsubx.Message, 0, len(msgs))
	for _, m := range msgs {
		h, err := parseAck(m.Reply)
		if err != nil {
			return nil, err
		}
		out = append(out, &pubsubx.Message{Body: m.Data, Metadata: metadataOf(m.Header), Handle: h})
	}
	return out, nil
}

// pull sends one pull request for up to batch messages, no-wait when
// expires is 0, and collects what the server sends until it fills the
// batch or ends the request with a status. If the caller's context ends
// or the server does not answer first, a background drain keeps listening
// until the request must be over and nacks what still arrives, so no
// message waits out its ack deadline unseen.
func (b *broker) pull(ctx context.Context, name, cname string, batch int, expires time.Duration) ([]*natsgo.Msg, error) {
	nc, js, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	inbox := nc.NewInbox()
	ch := make(chan *natsgo.Msg, batch+8)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, wrap(err, "cannot receive from NATS")
	}
	api := "$JS.API.CONSUMER.MSG.NEXT." + b.opts.Stream + "." + cname
	if err := nc.PublishRequest(api, inbox, marshalPull(batch, expires)); err != nil {
		_ = sub.Unsubscribe()
		return nil, wrap(err, "cannot receive from NATS")
	}
	over := time.Now().Add(expires + responseGrace) // the request must be over by then
	t := time.NewTimer(time.Until(over))
	defer t.Stop()
	var out []*natsgo.Msg
	for len(out) < batch {
		select {
		case m := <-ch:
			if strings.HasPrefix(m.Reply, "$JS.ACK.") {
				out = append(out, m)
				continue
			}
			switch m.Header.Get("Status") {
			case "100": // idle heartbeat
				continue
			case "404", "408": // no messages; request expired
			case "409":
				if strings.Contains(strings.ToLower(m.Header.Get("Description")), "deleted") {
					_ = sub.Unsubscribe()
					b.nakAll(nc, out)
					b.forget(cname)
					return nil, notFound(name)
				}
				// Other 409s (max waiting, leadership change) end the
				// request: return what came, or a retryable error.
				if len(out) == 0 {
					_ = sub.Unsubscribe()
					return nil, herr.New(herr.Unavailable, "NATS refused the pull request: %s", m.Header.Get("Description"))
				}
			case "503":
				_ = sub.Unsubscribe()
				b.nakAll(nc, out)
				return nil, herr.New(herr.Unavailable, "NATS JetStream did not answer (no responders)")
			default:
				continue // not part of the pull protocol
			}
			_ = sub.Unsubscribe()
			return out, nil
		case <-t.C:
			go b.drainLate(nc, sub, ch, nil, time.Now().Add(responseGrace))
			if len(out) > 0 {
				return out, nil // the closing status went missing
			}
			// No answer at all: on a consumer that does not exist, the
			// request is dropped silently.
			if err := b.lookup(ctx, js, name, cname); err != nil {
				return nil, err
			}
			return nil, herr.New(herr.Unavailable, "NATS did not answer the pull request in time")
		case <-ctx.Done():
			go b.drainLate(nc, sub, ch, out, over)
			return nil, ctx.Err()
		}
	}
	_ = sub.Unsubscribe()
	return out, nil
}

// drainLate nacks held and whatever a pending pull request still delivers
// until its status arrives or until over, then unsubscribes.
func (b *broker) drainLate(nc *natsgo.Conn, sub *natsgo.Subscription, ch chan *natsgo.Msg, held []*natsgo.Msg, over time.Time) {
	defer func() { _ = sub.Unsubscribe() }()
	b.nakAll(nc, held)
	t := time.NewTimer(time.Until(over))
	defer t.Stop()
	for {
		select {
		case m := <-ch:
			if strings.HasPrefix(m.Reply, "$JS.ACK.") {
				b.nakAll(nc, []*natsgo.Msg{m})
				continue
			}
			if m.Header.Get("Status") != "100" {
				return
			}
		case <-t.C:
			return
		case <-b.done:
			return
		}
	}
}

// nakAll nacks msgs without waiting: best effort for messages no caller
// will see, which otherwise return after their ack deadline anyway.
func (b *broker) nakAll(nc *natsgo.Conn, msgs []*natsgo.Msg) {
	for _, m := range msgs {
		_ = nc.Publish(m.Reply, nakPayload)
	}
}

// Ack acks msgs ("+ACK"), waiting for the server to confirm each.
func (b *broker) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, ackPayload)
}

// Nack nacks msgs ("-NAK") in stream order, waiting for the server to
// confirm each, so they are delivered again at once and in order.
func (b *broker) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, nakPayload)
}

func (b *broker) settle(ctx context.Context, name string, msgs []*pubsubx.Message, payload []byte) error {
	js, err := b.begin(ctx, name, nil)
	if err != nil {
		return err
	}
	cname := consumerName(name)
	hs := make([]*handle, len(msgs))
	foreign := false
	for i, m := range msgs {
		h, ok := m.Handle.(*handle)
		if !ok {
			return herr.New(herr.InvalidArgument, "message was not received from a NATS broker")
		}
		hs[i] = h
		foreign = foreign || h.stream != b.opts.Stream || h.consumer != cname
	}
	if foreign || len(hs) == 0 {
		if err := b.lookup(ctx, js, name, cname); err != nil {
			return err
		}
		if foreign {
			return herr.New(herr.InvalidArgument, "message was not received from subscription %q", name)
		}
		return nil
	}
	return b.settleHandles(ctx, name, hs, payload)
}

// settleHandles settles hs in stream order with one round trip: every
// message but the last gets payload without a reply subject (nothing comes
// back for it), and the last one as a request, whose reply confirms the
// whole call. The server applies one consumer's acks and nacks in the order
// it reads them from a connection (the consumer's ack queue, or inline in
// servers before 2.10), so the reply to the last means every earlier one
// has been applied. A "no responders" answer means the consumer is gone.
//
// A confirmation per message, as before, cost the server an extra message
// written per ack and the driver one read: about a third of what the
// server spent per event beyond a raw JetStream client's
// (docs/benchmarks.md, "NATS JetStream under Herald's pull traffic").
func (b *broker) settleHandles(ctx context.Context, name string, hs []*handle, payload []byte) error {
	nc, _, err := b.client(ctx)
	if err != nil {
		return err
	}
	hs = sortedBySeq(hs)
	last := len(hs) - 1
	for _, h := range hs[:last] {
		if err := nc.Publish(h.reply, payload); err != nil {
			return wrap(err, "cannot settle messages")
		}
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := nc.RequestWithContext(ctx, hs[last].reply, payload); err != nil {
		switch {
		case errors.Is(err, natsgo.ErrNoResponders):
			b.forget(consumerName(name))
			return notFound(name)
		case errors.Is(err, context.DeadlineExceeded):
			return herr.Wrap(herr.Unavailable, err, "NATS did not confirm the settlement in time")
		case errors.Is(err, context.Canceled):
			return ctx.Err()
		}
		return wrap(err, "cannot settle messages")
	}
	return nil
}

// sortedBySeq returns a copy of hs in stream order (stable for equal
// sequences).
func sortedBySeq(hs []*handle) []*handle {
	hs = slices.Clone(hs)
	slices.SortStableFunc(hs, func(x, y *handle) int { return cmp.Compare(x.seq, y.seq) })
	return hs
}
