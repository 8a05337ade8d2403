package nats_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/drivertest"
	pnats "github.com/heraldevents/herald/pubsubx/nats"
)

// serverURL is the machine's NATS, or HERALD_NATS_URL when set (to run the
// suite against another server version, e.g. one with multi-filter
// consumers).
func serverURL(t testing.TB) string {
	if u := os.Getenv("HERALD_NATS_URL"); u != "" {
		return u
	}
	return emulators.NATS(t)
}

// harness opens nats:// brokers on streams of their own, deleted when the
// test ends.
type harness struct {
	server string
	drivertest.URLBrokers
}

func newHarness(_ context.Context, t testing.TB) (drivertest.Harness, error) {
	return &harness{server: serverURL(t)}, nil
}

func (h *harness) open(ctx context.Context, t testing.TB, query string) (*pubsubx.Broker, string, error) {
	stream := "HERALD_DT_" + drivertest.RandomHex(6)
	b, err := h.Open(ctx, t, strings.TrimSuffix(h.server, "/")+"/"+stream+"?"+query, func() { deleteStream(t, h.server, stream) })
	if err != nil {
		return nil, "", err
	}
	return b, stream, nil
}

func deleteStream(t testing.TB, server, stream string) {
	nc, err := natsgo.Connect(server)
	if err != nil {
		t.Logf("deleting stream %s: %v", stream, err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = js.DeleteStream(ctx, stream)
	}
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Logf("deleting stream %s: %v", stream, err)
	}
}

func (h *harness) MakeBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	b, _, err := h.open(ctx, t, "")
	return b, err
}

func (h *harness) MakeBrokerWithMaxPending(ctx context.Context, t testing.TB, n int) (*pubsubx.Broker, error) {
	b, _, err := h.open(ctx, t, "max_pending="+strconv.Itoa(n))
	return b, err
}

func (h *harness) MakeBrokerWithAckDeadline(ctx context.Context, t testing.TB, d time.Duration) (*pubsubx.Broker, error) {
	b, _, err := h.open(ctx, t, "ackdeadline="+d.String())
	return b, err
}

// MakeUnreachableBroker points at a port nothing listens on.
func (h *harness) MakeUnreachableBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	return pubsubx.Open(ctx, fmt.Sprintf("nats://127.0.0.1:%d/HERALD_UNREACHABLE", emulators.FreePort(t)))
}

// Features: a body and its headers must fit the server's max_payload
// (1 MiB by default); 8 KiB is left for headers.
func (h *harness) Features() drivertest.Features {
	return drivertest.Features{PublishOrder: true, MaxMessageBytes: 1<<20 - 8<<10, AckDeadline: pnats.DefaultAckDeadline, SharedBacklogBound: true}
}

var _ drivertest.BoundedBacklog = (*harness)(nil)

func TestConformance(t *testing.T) { drivertest.RunConformanceTests(t, newHarness) }

func BenchmarkConformance(b *testing.B) { drivertest.RunBenchmarks(b, newHarness) }

// fixture is a broker on a fresh stream.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	server string
	stream string
	b      *pubsubx.Broker
}

func setup(t *testing.T, query string) *fixture {
	t.Helper()
	h, err := newHarness(t.Context(), t)
	require.NoError(t, err)
	b, stream, err := h.(*harness).open(t.Context(), t, query)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return &fixture{t: t, ctx: t.Context(), server: h.(*harness).server, stream: stream, b: b}
}

func (f *fixture) subscribe(groups filter.Groups) string {
	sub := "own-" + drivertest.RandomHex(6)
	require.NoError(f.t, f.b.CreateSubscription(f.ctx, sub, groups))
	f.t.Cleanup(func() { _ = f.b.DeleteSubscription(context.Background(), sub) })
	return sub
}

func (f *fixture) send(eventType, resourceID string, ids ...string) {
	for _, id := range ids {
		require.NoError(f.t, f.b.Send(f.ctx, &pubsubx.Message{Body: []byte(id), Metadata: map[string]string{
			pubsubx.AttrEventType: eventType, pubsubx.AttrResourceID: resourceID, pubsubx.AttrEventID: id}}))
	}
}

// drain receives and acks until a Receive comes back empty.
func (f *fixture) drain(sub string) []string {
	var got []string
	for {
		msgs, err := f.b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: 500 * time.Millisecond})
		require.NoError(f.t, err)
		if len(msgs) == 0 {
			return got
		}
		require.NoError(f.t, f.b.Ack(f.ctx, sub, msgs))
		got = append(got, bodies(msgs)...)
	}
}

func bodies(msgs []*pubsubx.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// TestNackRestoresOrder: messages nacked in any order come back in stream
// order, ahead of new ones.
func TestNackRestoresOrder(t *testing.T) {
	f := setup(t, "")
	sub := f.subscribe(nil)
	f.send("t", "/x", "1", "2", "3", "4")
	got, err := f.b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 3, Wait: time.Second})
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2", "3"}, bodies(got))
	require.NoError(t, f.b.Nack(f.ctx, sub, []*pubsubx.Message{got[2], got[0]}))
	require.NoError(t, f.b.Ack(f.ctx, sub, got[1:2]))
	require.Equal(t, []string{"1", "3", "4"}, f.drain(sub))
}

// TestFiltersPushedDown: eq and segment-boundary greedy filters are exact
// at the server, so the handler has nothing to drop.
func TestFiltersPushedDown(t *testing.T) {
	f := setup(t, "")
	eq := f.subscribe(filter.Groups{{EventType: "order.created", Filters: []filter.ResourceFilter{{FilterType: filter.Eq, ResourceID: "/users/7"}}}})
	greedy := f.subscribe(filter.Groups{{EventType: "order.created", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithGreedy, ResourceID: "/users/"}}}})
	f.send("order.created", "/users/7", "a")
	f.send("order.created", "/users/70", "b")
	f.send("order.created", "/users/7/photos", "c")
	f.send("order.created", "/users", "d")
	f.send("order.created.v2", "/users/7", "e")
	f.send("order", "/users/7", "f")
	require.Equal(t, []string{"a"}, f.drain(eq))
	require.Equal(t, []string{"a", "b", "c"}, f.drain(greedy))
}

// TestCanceledReceiveStrandsNothing: a message that reaches a Receive whose
// caller went away is nacked at once, not held until its ack deadline.
func TestCanceledReceiveStrandsNothing(t *testing.T) {
	f := setup(t, "") // ack deadline 60 s: a stranded message would not come back here
	sub := f.subscribe(nil)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := f.b.Receive(ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: 20 * time.Second})
		done <- err
	}()
	// Let the waiting pull request reach the server before cancelling, so
	// the message below is delivered to it.
	time.Sleep(300 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	f.send("t", "/x", "late")
	var got []string
	for i := 0; i < 5 && len(got) == 0; i++ {
		got = f.drain(sub)
	}
	require.Equal(t, []string{"late"}, got)
}

// TestSettleFromAnotherClient: the receipt is the reply subject, so a
// second client (another process) can ack what the first received.
func TestSettleFromAnotherClient(t *testing.T) {
	f := setup(t, "ackdeadline=1s")
	sub := f.subscribe(nil)
	f.send("t", "/x", "1")
	got, err := f.b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: time.Second})
	require.NoError(t, err)
	require.Len(t, got, 1)
	c2, err := pnats.Open(pnats.Options{ServerURL: f.server, Stream: f.stream, AckDeadline: time.Second})
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.Ack(f.ctx, sub, got))
	// Acked for good: nothing comes back after the 1 s deadline.
	again, err := f.b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: 3 * time.Second})
	require.NoError(t, err)
	require.Empty(t, again)
}

// TestExistingStream: an existing stream is used when it captures the
// prefix, refused when it does not.
func TestExistingStream(t *testing.T) {
	server := serverURL(t)
	nc, err := natsgo.Connect(server)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream := "HERALD_DT_" + drivertest.RandomHex(6)
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".other.>"}})
	require.NoError(t, err)
	defer deleteStream(t, server, stream)

	b, err := pnats.Open(pnats.Options{ServerURL: server, Stream: stream})
	require.NoError(t, err)
	defer b.Close()
	err = b.Send(t.Context(), &pubsubx.Message{Body: []byte("x")})
	require.Equal(t, herr.FailedPrecondition, herr.CodeOf(err), "%v", err)

	b2, err := pnats.Open(pnats.Options{ServerURL: server, Stream: stream, SubjectPrefix: stream + ".other"})
	require.NoError(t, err)
	defer b2.Close()
	require.NoError(t, b2.Send(t.Context(), &pubsubx.Message{Body: []byte("x")}))
}

// TestOpenURL: the URL's parameters are checked before anything dials.
func TestOpenURL(t *testing.T) {
	for _, tc := range []struct{ url, why string }{
		{"nats://127.0.0.1:4222/S?color=red", "unknown parameter"},
		{"nats://127.0.0.1:4222/", "no stream"},
		{"nats://127.0.0.1:4222/a.b", "'.' in the stream"},
		{"nats:///S", "no host"},
		{"nats://127.0.0.1:4222/S?ackdeadline=soon", "bad duration"},
		{"nats://127.0.0.1:4222/S?subject_prefix=a.*", "wildcard prefix"},
		{"nats://127.0.0.1:4222/S?subject_prefix=$JS", "system prefix"},
		{"nats://127.0.0.1:4222/S?subject_prefix=a..b", "empty token"},
		{"nats://127.0.0.1:4222/S?max_pending=0", "a bound of zero"},
		{"nats://127.0.0.1:4222/S?max_pending_bytes=lots", "a bound that is no number"},
		{"nats://127.0.0.1:4222/S?overflow=drop-tail", "an unknown overflow"},
	} {
		_, err := pubsubx.Open(t.Context(), tc.url)
		require.Error(t, err, tc.why)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", tc.why, err)
	}
	b, err := pubsubx.Open(t.Context(), "nats://u:p@127.0.0.1:1/S?subject_prefix=herald.prod&ackdeadline=5s&max_pending=10&max_pending_bytes=1024&overflow=drop-head")
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// TestUpdateNarrowsWhenIdle: an update on an idle consumer sets the new
// filter exactly; one on a consumer holding messages keeps them by
// filtering on old ∪ new, until an update made while it is idle.
func TestUpdateNarrowsWhenIdle(t *testing.T) {
	f := setup(t, "")
	sub := f.subscribe(filter.Groups{{EventType: "a"}})
	require.NoError(t, f.b.UpdateSubscription(f.ctx, sub, filter.Groups{{EventType: "b"}}))
	f.send("a", "/x", "a1")
	f.send("b", "/x", "b1")
	require.Equal(t, []string{"b1"}, f.drain(sub), "idle update: exact")

	f.send("b", "/x", "b2") // held across the next update
	require.NoError(t, f.b.UpdateSubscription(f.ctx, sub, filter.Groups{{EventType: "c"}}))
	f.send("c", "/x", "c1")
	got := f.drain(sub)
	require.Contains(t, got, "b2", "held message survives the update")
	require.Contains(t, got, "c1")

	require.NoError(t, f.b.UpdateSubscription(f.ctx, sub, filter.Groups{{EventType: "c"}}))
	f.send("b", "/x", "b3")
	f.send("c", "/x", "c2")
	require.Equal(t, []string{"c2"}, f.drain(sub), "idle again: narrowed")
}

// MakeBlackHoledBroker points at a server that accepts TCP and never
// answers.
func (h *harness) MakeBlackHoledBroker(ctx context.Context, _ testing.TB, addr string) (*pubsubx.Broker, error) {
	return pubsubx.Open(ctx, "nats://"+addr+"/HERALD_BLACKHOLE")
}

// streamConfig reads stream's configuration from the server.
func streamConfig(t *testing.T, server, stream string) jetstream.StreamConfig {
	t.Helper()
	nc, err := natsgo.Connect(server)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(t.Context(), stream)
	require.NoError(t, err)
	return s.CachedInfo().Config
}

// TestStreamBounds: the stream Herald creates is bounded, by default and
// as the URL says, so that a subscription nobody reads cannot grow it
// without limit; overflow=drop-head discards the oldest messages instead
// of refusing new ones.
func TestStreamBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, "")
	f.send("t", "/r", "1")
	cfg := streamConfig(t, f.server, f.stream)
	require.Equal(t, int64(pubsubx.DefaultMaxPending), cfg.MaxMsgs)
	require.Equal(t, int64(pubsubx.DefaultMaxPendingBytes), cfg.MaxBytes)
	require.Equal(t, jetstream.DiscardNew, cfg.Discard, "reject-publish: a full stream refuses new messages")

	g := setup(t, "max_pending=3&max_pending_bytes=65536&overflow=drop-head")
	sub := g.subscribe(nil)
	g.send("t", "/r", "1", "2", "3", "4", "5")
	cfg = streamConfig(t, g.server, g.stream)
	require.Equal(t, int64(3), cfg.MaxMsgs)
	require.Equal(t, int64(65536), cfg.MaxBytes)
	require.Equal(t, jetstream.DiscardOld, cfg.Discard)
	require.Equal(t, []string{"3", "4", "5"}, g.drain(sub), "the oldest were discarded")
}

// TestExistingStreamBounds: a stream without bounds (made by hand, or by
// a Herald before bounds) gets the URL's bounds when a broker first uses
// it; one with bounds of its own keeps them, as the operator's.
func TestExistingStreamBounds(t *testing.T) {
	t.Parallel()
	server := serverURL(t)
	nc, err := natsgo.Connect(server)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	for _, own := range []int64{0, 50} {
		stream := "HERALD_DT_" + drivertest.RandomHex(6)
		cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, Retention: jetstream.InterestPolicy}
		if own > 0 {
			cfg.MaxMsgs = own
		}
		_, err = js.CreateStream(t.Context(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { deleteStream(t, server, stream) })

		b, err := pnats.Open(pnats.Options{ServerURL: server, Stream: stream, Bounds: pubsubx.Bounds{MaxPending: 1234}})
		require.NoError(t, err)
		require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte("x"), Metadata: map[string]string{pubsubx.AttrEventType: "t"}}))
		require.NoError(t, b.Close())
		got := streamConfig(t, server, stream)
		if own > 0 {
			require.Equal(t, own, got.MaxMsgs, "the operator's bound is kept")
			require.Equal(t, int64(-1), got.MaxBytes)
		} else {
			require.Equal(t, int64(1234), got.MaxMsgs, "an unbounded stream gets the URL's bounds")
			require.Equal(t, int64(pubsubx.DefaultMaxPendingBytes), got.MaxBytes)
			require.Equal(t, jetstream.DiscardNew, got.Discard)
		}
	}
}
