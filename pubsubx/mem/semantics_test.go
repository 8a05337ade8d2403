package mem_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// Tests of what this driver documents beyond the conformance suite.

func open(t *testing.T, url string) *pubsubx.Broker {
	t.Helper()
	b, err := pubsubx.Open(t.Context(), url)
	require.NoError(t, err, "Open %s", url)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func msg(id string) *pubsubx.Message {
	return &pubsubx.Message{Body: []byte(`{"id":"` + id + `"}`), Metadata: map[string]string{
		pubsubx.AttrEventType: "herald.test", pubsubx.AttrEventID: id,
	}}
}

func receive(t *testing.T, b *pubsubx.Broker, sub string, wait time.Duration) []*pubsubx.Message {
	t.Helper()
	got, err := b.Receive(t.Context(), sub, pubsubx.ReceiveParams{Max: 10, Wait: wait})
	require.NoError(t, err, "Receive")
	return got
}

// uniqueURL names a topic no other test uses.
func uniqueURL(t *testing.T, query string) string {
	return "mem://semantics-" + t.Name() + query
}

func TestCloseLeavesOtherClients(t *testing.T) {
	ctx := t.Context()
	url := uniqueURL(t, "")
	a, b := open(t, url), open(t, url)
	require.NoError(t, a.CreateSubscription(ctx, "s", nil))
	require.NoError(t, a.Close())

	err := a.Send(ctx, msg("1"))
	require.Equal(t, herr.Unavailable, herr.CodeOf(err), "Send on the closed client: %v", err)
	require.NoError(t, b.Send(ctx, msg("2")), "Send on the open client")
	require.Len(t, receive(t, b, "s", time.Second), 1)

	// The last close drops the topic: the next Open starts empty.
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "closing twice is harmless")
	c := open(t, url)
	_, err = c.Receive(ctx, "s", pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "subscription of a dropped topic: %v", err)
}

func TestStaleHandles(t *testing.T) {
	ctx := t.Context()
	short := open(t, uniqueURL(t, "?ackdeadline=10ms"))
	long := open(t, uniqueURL(t, "")) // same topic, 60 s deadline
	require.NoError(t, short.CreateSubscription(ctx, "s", nil))
	require.NoError(t, short.Send(ctx, msg("1")))

	first := receive(t, short, "s", time.Second)
	require.Len(t, first, 1)
	// Returns as soon as the 10 ms deadline has passed.
	second := receive(t, long, "s", 30*time.Second)
	require.Len(t, second, 1, "redelivery after the short client's deadline")

	// A stale Nack must not put back what the long client holds.
	require.NoError(t, short.Nack(ctx, "s", first))
	require.Empty(t, receive(t, long, "s", 0), "a stale Nack requeued a message held elsewhere")

	// A stale Ack still removes it: its receiver took custody.
	require.NoError(t, short.Ack(ctx, "s", first))
	require.NoError(t, long.Nack(ctx, "s", second), "Nack after another receiver acked is harmless")
	require.Empty(t, receive(t, long, "s", 0), "acked message came back")
	require.NoError(t, long.Ack(ctx, "s", second), "acking twice is harmless")
}

func TestHandleFromElsewhere(t *testing.T) {
	ctx := t.Context()
	b := mem.New(0)
	t.Cleanup(func() { _ = b.Close() })
	for _, s := range []string{"s1", "s2"} {
		require.NoError(t, b.CreateSubscription(ctx, s, nil))
	}
	require.NoError(t, b.Send(ctx, msg("1")))
	got := receive(t, b, "s1", time.Second)
	require.Len(t, got, 1)

	err := b.Ack(ctx, "s2", got)
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "Ack with another subscription's handle: %v", err)
	err = b.Nack(ctx, "s1", []*pubsubx.Message{msg("never-received")})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "Nack of a message that was never received: %v", err)
	_, err = b.Receive(ctx, "s1", pubsubx.ReceiveParams{Max: 0, Wait: 0})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "Receive with max 0: %v", err)

	// A handle from a deleted subscription of the same name is harmless
	// and touches nothing of the new one.
	require.NoError(t, b.DeleteSubscription(ctx, "s1"))
	require.NoError(t, b.CreateSubscription(ctx, "s1", nil))
	require.NoError(t, b.Send(ctx, msg("2")))
	require.NoError(t, b.Ack(ctx, "s1", got), "Ack with a handle of the deleted subscription")
	again := receive(t, b, "s1", time.Second)
	require.Len(t, again, 1)
	require.Equal(t, "2", again[0].Metadata[pubsubx.AttrEventID])
}

func TestReceiveCanceled(t *testing.T) {
	b := mem.New(0)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, b.CreateSubscription(t.Context(), "s", nil))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.Receive(ctx, "s", pubsubx.ReceiveParams{Max: 10, Wait: time.Minute})
	require.Equal(t, herr.Canceled, herr.CodeOf(err), "Receive on a canceled context: %v", err)
}

func TestAckDeadlineParameter(t *testing.T) {
	for _, q := range []string{"?ackdeadline=0s", "?ackdeadline=-1s", "?ackdeadline=soon"} {
		_, err := pubsubx.Open(t.Context(), uniqueURL(t, q))
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", q, err)
		require.Contains(t, herr.MessageOf(err), "ackdeadline", "the message should name the parameter")
	}
}

func TestNackKeepsSendOrder(t *testing.T) {
	ctx := t.Context()
	b := mem.New(0)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, b.CreateSubscription(ctx, "s", nil))
	for _, id := range []string{"1", "2", "3"} {
		require.NoError(t, b.Send(ctx, msg(id)))
	}
	got := receive(t, b, "s", time.Second)
	require.Len(t, got, 3)
	require.NoError(t, b.Nack(ctx, "s", []*pubsubx.Message{got[2], got[0]}))
	again := receive(t, b, "s", time.Second)
	var order []string
	for _, m := range again {
		order = append(order, m.Metadata[pubsubx.AttrEventID])
	}
	require.Equal(t, []string{"1", "3"}, order, "nacked messages go back to their place in send order")
}

// TestBoundedSubscriptionRejects: by default a subscription at
// max_pending refuses further messages, each Send result saying so
// (ResourceExhausted), while another subscription with room still gets
// them; nothing it holds is lost, and once read it takes messages again.
func TestBoundedSubscriptionRejects(t *testing.T) {
	ctx := t.Context()
	b := open(t, uniqueURL(t, "?max_pending=3"))
	require.NoError(t, b.CreateSubscription(ctx, "idle", nil))
	require.NoError(t, b.CreateSubscription(ctx, "busy", nil))
	for i := 1; i <= 3; i++ {
		require.NoError(t, b.Send(ctx, msg(strconv.Itoa(i))))
		got := receive(t, b, "busy", 0)
		require.Len(t, got, 1)
		require.NoError(t, b.Ack(ctx, "busy", got))
	}
	err := b.Send(ctx, msg("4"))
	require.Equal(t, herr.ResourceExhausted, herr.CodeOf(err), "%v", err)
	require.Contains(t, herr.MessageOf(err), "max_pending=3")
	require.NotContains(t, herr.MessageOf(err), "idle", "the refusal does not name the subscription")
	var full *pubsubx.SubscriptionsFullError
	require.ErrorAs(t, err, &full)
	require.Equal(t, []string{"idle"}, full.Subscriptions, "but tells the publisher which one it was, for its dead-letter queue")
	errs := b.SendBatch(ctx, []*pubsubx.Message{msg("5"), msg("6")})
	require.Len(t, errs, 2)
	for _, err := range errs {
		require.Equal(t, herr.ResourceExhausted, herr.CodeOf(err))
	}
	busy := receive(t, b, "busy", 0)
	require.Equal(t, []string{"4", "5", "6"}, eventIDs(busy), "a subscription with room gets what the full one refused")
	require.NoError(t, b.Ack(ctx, "busy", busy))
	n, err := mem.Dropped(b, "idle")
	require.NoError(t, err)
	require.Zero(t, n, "reject-publish drops nothing")

	got := receive(t, b, "idle", 0)
	require.Equal(t, []string{"1", "2", "3"}, eventIDs(got), "the full subscription keeps all it held")
	require.NoError(t, b.Ack(ctx, "idle", got))
	require.NoError(t, b.Send(ctx, msg("7")), "read, it has room again")
	require.Equal(t, []string{"7"}, eventIDs(receive(t, b, "idle", 0)))

	big := open(t, "mem://semantics-"+t.Name()+"-bytes?max_pending_bytes=40")
	require.NoError(t, big.CreateSubscription(ctx, "idle", nil))
	for i := 1; i <= 4; i++ {
		require.NoError(t, big.Send(ctx, msg(strconv.Itoa(i)))) // 10-byte bodies
	}
	require.Equal(t, herr.ResourceExhausted, herr.CodeOf(big.Send(ctx, msg("5"))), "40 bytes held: no room for 10 more")
}

// TestBoundedSubscription: with overflow=drop-head a subscription nobody
// reads keeps only the newest max_pending messages, in send order; Send
// keeps succeeding, the dropped ones are counted, and another
// subscription that is read is not affected. Messages in flight are never
// dropped.
func TestBoundedSubscription(t *testing.T) {
	ctx := t.Context()
	b := open(t, uniqueURL(t, "?max_pending=5&overflow=drop-head"))
	require.NoError(t, b.CreateSubscription(ctx, "idle", nil))
	require.NoError(t, b.CreateSubscription(ctx, "busy", nil))

	held := receiveAfterSend(t, b, "busy", "0")
	for i := 1; i <= 11; i++ {
		require.NoError(t, b.Send(ctx, msg(strconv.Itoa(i))), "Send %d at the bound", i)
	}
	errs := b.SendBatch(ctx, []*pubsubx.Message{msg("12"), msg("13")})
	require.Equal(t, []error{nil, nil}, errs, "SendBatch at the bound")

	got := receive(t, b, "idle", 0)
	require.Equal(t, []string{"9", "10", "11", "12", "13"}, eventIDs(got), "the idle subscription keeps the newest five")
	n, err := mem.Dropped(b, "idle")
	require.NoError(t, err)
	require.EqualValues(t, 14-5, n, "dropped from the idle subscription")

	// "busy" holds message 0 in flight: it counts towards the bound but
	// is never dropped, so four of the newest stay ready beside it.
	require.NoError(t, b.Nack(ctx, "busy", held))
	got = receive(t, b, "busy", 0)
	require.Equal(t, []string{"0", "10", "11", "12", "13"}, eventIDs(got), "the in-flight message survives the bound")
}

// TestBoundedSubscriptionBytes: max_pending_bytes bounds the bodies a
// subscription holds; a single message over it is still kept (under
// either overflow: an empty subscription takes it).
func TestBoundedSubscriptionBytes(t *testing.T) {
	ctx := t.Context()
	b := open(t, uniqueURL(t, "?max_pending_bytes=40&overflow=drop-head"))
	require.NoError(t, b.CreateSubscription(ctx, "idle", nil))
	for i := 1; i <= 5; i++ {
		require.NoError(t, b.Send(ctx, msg(strconv.Itoa(i)))) // 10-byte bodies
	}
	require.Equal(t, []string{"2", "3", "4", "5"}, eventIDs(receive(t, b, "idle", 0)))

	big := msg("big")
	big.Body = make([]byte, 100)
	require.NoError(t, b.Send(ctx, big))
	require.Equal(t, []string{"big"}, eventIDs(receive(t, b, "idle", 0)), "the newest message stays even over the bound")

	r := open(t, "mem://semantics-"+t.Name()+"-reject?max_pending_bytes=40")
	require.NoError(t, r.CreateSubscription(ctx, "idle", nil))
	require.NoError(t, r.Send(ctx, big), "an empty subscription takes a message over the bound")
	require.Equal(t, []string{"big"}, eventIDs(receive(t, r, "idle", 0)))
}

func TestBoundsURL(t *testing.T) {
	for _, q := range []string{"?max_pending=0", "?max_pending=x", "?max_pending_bytes=-1", "?overflow=drop", "?overflow=Drop-Head"} {
		_, err := pubsubx.Open(t.Context(), uniqueURL(t, q))
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", q, err)
	}
}

func receiveAfterSend(t *testing.T, b *pubsubx.Broker, sub, id string) []*pubsubx.Message {
	t.Helper()
	require.NoError(t, b.Send(t.Context(), msg(id)))
	got := receive(t, b, sub, time.Second)
	require.Len(t, got, 1)
	return got
}

func eventIDs(msgs []*pubsubx.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Metadata[pubsubx.AttrEventID]
	}
	return out
}
