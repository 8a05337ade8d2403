package rabbit_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/drivertest"
	"github.com/heraldevents/herald/pubsubx/rabbit"
)

// harness opens rabbit:// brokers on exchanges of their own, deleted when
// the test ends, on the machine's RabbitMQ.
type harness struct {
	server string
	drivertest.URLBrokers
}

func newHarness(_ context.Context, t testing.TB) (drivertest.Harness, error) {
	return &harness{server: emulators.RabbitMQ(t)}, nil
}

// open opens a broker on a fresh exchange and deletes the exchange at the
// end of t (the suite deletes the queues).
func (h *harness) open(ctx context.Context, t testing.TB, query string) (*pubsubx.Broker, error) {
	b, _, err := h.openExchange(ctx, t, query)
	return b, err
}

func (h *harness) openExchange(ctx context.Context, t testing.TB, query string) (*pubsubx.Broker, string, error) {
	exchange := "herald-dt-" + drivertest.RandomHex(6)
	b, err := h.Open(ctx, t, "rabbit://"+exchange+"?url="+url.QueryEscape(h.server)+query, func() { deleteExchange(t, h.server, exchange) })
	if err != nil {
		return nil, "", err
	}
	return b, exchange, nil
}

func deleteExchange(t testing.TB, server, exchange string) {
	c, err := amqp.Dial(server)
	if err != nil {
		t.Logf("deleting exchange %s: %v", exchange, err)
		return
	}
	defer c.Close()
	ch, err := c.Channel()
	if err == nil {
		err = ch.ExchangeDelete(exchange, false, false)
	}
	if err != nil {
		t.Logf("deleting exchange %s: %v", exchange, err)
	}
}

func (h *harness) MakeBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	return h.open(ctx, t, "")
}

func (h *harness) MakeBrokerWithAckDeadline(ctx context.Context, t testing.TB, d time.Duration) (*pubsubx.Broker, error) {
	return h.open(ctx, t, "&ackdeadline="+d.String())
}

func (h *harness) MakeBrokerWithMaxPending(ctx context.Context, t testing.TB, n int) (*pubsubx.Broker, error) {
	return h.open(ctx, t, "&max_pending="+strconv.Itoa(n))
}

// MakeUnreachableBroker points at a port nothing listens on.
func (h *harness) MakeUnreachableBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	server := fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", emulators.FreePort(t))
	return pubsubx.Open(ctx, "rabbit://herald-unreachable?url="+url.QueryEscape(server))
}

func (h *harness) Features() drivertest.Features {
	return drivertest.Features{PublishOrder: true, AckDeadline: rabbit.DefaultAckDeadline, ReceiveHold: rabbit.DefaultHold}
}

var _ drivertest.BoundedBacklog = (*harness)(nil)

func TestConformance(t *testing.T) { drivertest.RunConformanceTests(t, newHarness) }

func BenchmarkConformance(b *testing.B) { drivertest.RunBenchmarks(b, newHarness) }

// fixture is a broker on a fresh exchange and a subscription on it.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	server   string
	exchange string
	b        *pubsubx.Broker
	sub      string
}

func setup(t *testing.T, query string) *fixture {
	t.Helper()
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err)
	b, exchange, err := h.(*harness).openExchange(t.Context(), t, query)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	sub := "own-" + drivertest.RandomHex(6)
	require.NoError(t, b.CreateSubscription(t.Context(), sub, nil))
	t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), sub) })
	return &fixture{t: t, ctx: t.Context(), server: h.(*harness).server, exchange: exchange, b: b, sub: sub}
}

func (f *fixture) send(ids ...string) { f.sendType("t", ids...) }

func (f *fixture) sendType(eventType string, ids ...string) {
	for _, id := range ids {
		require.NoError(f.t, f.b.Send(f.ctx, &pubsubx.Message{Body: []byte(id), Metadata: map[string]string{pubsubx.AttrEventType: eventType, pubsubx.AttrEventID: id}}))
	}
}

func (f *fixture) receive(max int) []*pubsubx.Message {
	msgs, err := f.b.Receive(f.ctx, f.sub, pubsubx.ReceiveParams{Max: max, Wait: 2 * time.Second})
	require.NoError(f.t, err)
	return msgs
}

func bodies(msgs []*pubsubx.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// TestNackKeepsPosition: nacked messages go back to their original place,
// whatever order they are nacked in, ahead of messages never received.
func TestNackKeepsPosition(t *testing.T) {
	f := setup(t, "")
	f.send("1", "2", "3", "4", "5")
	got := f.receive(4)
	require.Equal(t, []string{"1", "2", "3", "4"}, bodies(got))
	require.NoError(t, f.b.Nack(f.ctx, f.sub, []*pubsubx.Message{got[3]}))
	require.NoError(t, f.b.Nack(f.ctx, f.sub, []*pubsubx.Message{got[1]}))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, []*pubsubx.Message{got[0], got[2]}))
	again := f.receive(10)
	require.Equal(t, []string{"2", "4", "5"}, bodies(again))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, again))
}

// TestExpiredKeepsPosition: messages abandoned past the ack deadline come
// back in publish order, and settling them late is a harmless no-op.
func TestExpiredKeepsPosition(t *testing.T) {
	f := setup(t, "&ackdeadline=300ms")
	f.send("1", "2", "3")
	first := f.receive(10)
	require.Equal(t, []string{"1", "2", "3"}, bodies(first))
	var again []*pubsubx.Message
	for len(again) < 3 {
		again = append(again, f.receive(10)...)
	}
	require.Equal(t, []string{"1", "2", "3"}, bodies(again))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, first[:2]), "acking after the deadline")
	require.NoError(t, f.b.Nack(f.ctx, f.sub, first[2:]), "nacking after the deadline")
	require.NoError(t, f.b.Ack(f.ctx, f.sub, again))
	empty, err := f.b.Receive(f.ctx, f.sub, pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.NoError(t, err)
	require.Empty(t, empty)
}

// TestHoldBounds: a Broker holds at most prefetch messages it has not
// returned, and only for hold after its last Receive: another client gets
// the rest at once and the held ones once the hold has passed.
func TestHoldBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, "&prefetch=3&hold=300ms")
	ids := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}
	f.send(ids...)
	first := f.receive(1)
	require.Equal(t, []string{"1"}, bodies(first))

	c2, err := pubsubx.Open(f.ctx, "rabbit://"+f.exchange+"?url="+url.QueryEscape(f.server)+"&prefetch=3&hold=300ms")
	require.NoError(t, err)
	defer c2.Close()
	var now []*pubsubx.Message
	for {
		batch, err := c2.Receive(f.ctx, f.sub, pubsubx.ReceiveParams{Max: 10, Wait: 100 * time.Millisecond})
		require.NoError(t, err)
		if len(batch) == 0 {
			break
		}
		require.NoError(t, c2.Ack(f.ctx, f.sub, batch)) // its own prefetch is 3 too
		now = append(now, batch...)
	}
	// The first client's consumer holds at most prefetch-1 = 2 more.
	require.GreaterOrEqual(t, len(now), 7, "the second client should get all but what prefetch lets the first hold: %v", bodies(now))
	time.Sleep(300 * time.Millisecond)
	var later []*pubsubx.Message
	for len(now)+len(later) < 9 {
		batch, err := c2.Receive(f.ctx, f.sub, pubsubx.ReceiveParams{Max: 10, Wait: 2 * time.Second})
		require.NoError(t, err)
		require.NotEmpty(t, batch, "the held messages should come back once the hold passed; have %v and %v", bodies(now), bodies(later))
		require.NoError(t, c2.Ack(f.ctx, f.sub, batch))
		later = append(later, batch...)
	}
	require.ElementsMatch(t, ids[1:], append(bodies(now), bodies(later)...))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, first))
}

// TestAcksOutOfOrder: two Receives' messages settled in the other order:
// acking the later ones must not ack the earlier (a merged ack covers only
// a run with nothing unsettled below it), which a nack then requeues.
func TestAcksOutOfOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, "")
	f.send("1", "2", "3", "4", "5", "6")
	a := f.receive(3)
	b := f.receive(3)
	require.Equal(t, []string{"1", "2", "3"}, bodies(a))
	require.Equal(t, []string{"4", "5", "6"}, bodies(b))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, b[1:]))
	require.NoError(t, f.b.Nack(f.ctx, f.sub, a))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, b[:1]))
	again := f.receive(10)
	require.Equal(t, []string{"1", "2", "3"}, bodies(again))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, again))
	empty, err := f.b.Receive(f.ctx, f.sub, pubsubx.ReceiveParams{Max: 10, Wait: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, empty)
}

// TestUpdateSwapsFilterExchange: each update leaves exactly one filter
// exchange, bound for the new groups only, and delete removes it.
func TestUpdateSwapsFilterExchange(t *testing.T) {
	f := setup(t, "")
	c, err := amqp.Dial(f.server)
	require.NoError(t, err)
	defer c.Close()
	exists := func(name string) bool {
		ch, err := c.Channel()
		require.NoError(t, err)
		defer ch.Close()
		return ch.ExchangeDeclarePassive(name, amqp.ExchangeTopic, true, true, false, false, nil) == nil
	}
	queue := f.exchange + ":" + f.sub
	a, b := queue+"|a", queue+"|b"
	require.True(t, exists(a), "filter exchange after create")
	require.False(t, exists(b))

	require.NoError(t, f.b.UpdateSubscription(f.ctx, f.sub, filter.Groups{{EventType: "x.y"}}))
	require.False(t, exists(a), "old filter exchange after update")
	require.True(t, exists(b), "new filter exchange after update")
	f.sendType("t", "t1")
	f.sendType("x.y", "x1")
	f.sendType("x", "x2") // '.' is not a wildcard: "x" is another type
	got := f.receive(10)
	require.Equal(t, []string{"x1"}, bodies(got))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, got))

	require.NoError(t, f.b.UpdateSubscription(f.ctx, f.sub, filter.Groups{{EventType: "t"}}))
	require.True(t, exists(a))
	require.False(t, exists(b))
	f.sendType("x.y", "x3")
	f.sendType("t", "t2")
	got = f.receive(10)
	require.Equal(t, []string{"t2"}, bodies(got))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, got))

	require.NoError(t, f.b.DeleteSubscription(f.ctx, f.sub))
	require.False(t, exists(a), "filter exchange after delete")
	require.False(t, exists(b), "filter exchange after delete")
}

// TestReceiveCanceled: a Receive whose context ends while it waits returns
// the context's error and leaves the queue as it was.
func TestReceiveCanceled(t *testing.T) {
	f := setup(t, "")
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := f.b.Receive(ctx, f.sub, pubsubx.ReceiveParams{Max: 10, Wait: time.Minute})
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	f.send("after")
	require.Equal(t, []string{"after"}, bodies(f.receive(10)))
}

// TestOpenURL: the URL's parameters are checked before anything dials.
func TestOpenURL(t *testing.T) {
	t.Setenv(rabbit.ServerURLEnv, "")
	for _, tc := range []struct{ url, why string }{
		{"rabbit://ex?url=amqp://127.0.0.1/&color=red", "unknown parameter"},
		{"rabbit://ex", "no server URL"},
		{"rabbit://ex?url=http://127.0.0.1/", "not an AMQP URL"},
		{"rabbit://ex?url=amqp://127.0.0.1/&ackdeadline=soon", "bad duration"},
		{"rabbit://ex?url=amqp://127.0.0.1/&ackdeadline=-1s", "negative duration"},
		{"rabbit://amq.topic?url=amqp://127.0.0.1/", "reserved exchange"},
		{"rabbit://a:b?url=amqp://127.0.0.1/", "':' in the exchange"},
		{"rabbit://ex?url=amqp://127.0.0.1/&prefetch=0", "prefetch below 1"},
		{"rabbit://ex?url=amqp://127.0.0.1/&prefetch=65536", "prefetch above a short"},
		{"rabbit://ex?url=amqp://127.0.0.1/&hold=later", "bad hold"},
	} {
		_, err := pubsubx.Open(t.Context(), tc.url)
		require.Error(t, err, tc.why)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", tc.why, err)
	}
	t.Setenv(rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:1/")
	b, err := pubsubx.Open(t.Context(), "rabbit://ex?ackdeadline=5s")
	require.NoError(t, err, "server from the environment")
	require.NoError(t, b.Close())
}

// MakeBlackHoledBroker points at a server that accepts TCP and never
// answers.
func (h *harness) MakeBlackHoledBroker(ctx context.Context, t testing.TB, addr string) (*pubsubx.Broker, error) {
	server := "amqp://guest:guest@" + addr + "/"
	return pubsubx.Open(ctx, "rabbit://herald-blackhole?url="+url.QueryEscape(server))
}

// TestDefaultBounds: a subscription's queue is declared with the default
// bounds, so that one nobody reads cannot grow RabbitMQ without limit: a
// declare with exactly those arguments is accepted (RabbitMQ refuses a
// redeclare whose arguments differ).
func TestDefaultBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, "")
	c, err := amqp.Dial(f.server)
	require.NoError(t, err)
	defer c.Close()
	ch, err := c.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(f.exchange+":"+f.sub, true, false, false, false, amqp.Table{
		"x-max-length":       int64(pubsubx.DefaultMaxPending),
		"x-max-length-bytes": int64(pubsubx.DefaultMaxPendingBytes),
		"x-overflow":         "reject-publish",
	})
	require.NoError(t, err, "the queue has the default bounds")
}

// TestDropHead: with overflow=drop-head a publish to a full queue
// succeeds and the oldest ready messages make room.
func TestDropHead(t *testing.T) {
	t.Parallel()
	f := setup(t, "&max_pending=3&overflow=drop-head")
	f.send("1", "2", "3", "4", "5")
	got := f.receive(10)
	require.Equal(t, []string{"3", "4", "5"}, bodies(got))
	require.NoError(t, f.b.Ack(f.ctx, f.sub, got))
}

// TestBoundsURL: the bounds parameters are checked when the URL is opened.
func TestBoundsURL(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"&max_pending=0", "&max_pending=x", "&max_pending_bytes=-1", "&overflow=drop-tail"} {
		_, err := pubsubx.Open(t.Context(), "rabbit://herald-bounds?url="+url.QueryEscape("amqp://guest:guest@127.0.0.1:1/")+q)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", q, err)
	}
}
