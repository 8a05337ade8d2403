package gcppubsub

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/pubsubx"
)

func eq(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.Eq, ResourceID: id}
}
func greedy(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithGreedy, ResourceID: id}
}
func lazy(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithLazy, ResourceID: id}
}

func TestFilterExpression(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("r", 100)
	cases := []struct {
		name   string
		groups filter.Groups
		want   string
	}{
		{"none", nil, ""},
		{"type only", filter.Groups{{EventType: "order.created"}},
			`attributes.event_type = "order.created"`},
		{"eq", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq("/users/7")}}},
			`attributes.event_type = "t" AND attributes.resource_id = "/users/7"`},
		{"unspecified is eq", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{{ResourceID: "x"}}}},
			`attributes.event_type = "t" AND attributes.resource_id = "x"`},
		{"greedy", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{greedy("/users/")}}},
			`attributes.event_type = "t" AND hasPrefix(attributes.resource_id, "/users/")`},
		{"lazy pushes its prefix down deep", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{lazy("/users/")}}},
			`attributes.event_type = "t" AND hasPrefix(attributes.resource_id, "/users/")`},
		{"lazy and greedy of one prefix merge", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{lazy("/u/"), greedy("/u/")}}},
			`attributes.event_type = "t" AND hasPrefix(attributes.resource_id, "/u/")`},
		{"filters ORed", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq("/a"), greedy("/b/")}}},
			`attributes.event_type = "t" AND (attributes.resource_id = "/a" OR hasPrefix(attributes.resource_id, "/b/"))`},
		{"greedy empty matches events without resource_id", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq("/a"), greedy("")}}},
			`attributes.event_type = "t"`},
		{"lazy empty matches events without resource_id", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{lazy("")}}},
			`attributes.event_type = "t"`},
		{"groups ORed", filter.Groups{
			{EventType: "a", Filters: []filter.ResourceFilter{eq("/x")}},
			{EventType: "b"},
		}, `(attributes.event_type = "a" AND attributes.resource_id = "/x") OR attributes.event_type = "b"`},
		{"groups of one type merge", filter.Groups{
			{EventType: "a", Filters: []filter.ResourceFilter{eq("/x")}},
			{EventType: "a", Filters: []filter.ResourceFilter{eq("/y")}},
		}, `attributes.event_type = "a" AND (attributes.resource_id = "/x" OR attributes.resource_id = "/y")`},
		{"a type-only group absorbs the others of its type", filter.Groups{
			{EventType: "a", Filters: []filter.ResourceFilter{eq("/x")}},
			{EventType: "a"},
			{EventType: "a", Filters: []filter.ResourceFilter{eq("/y")}},
		}, `attributes.event_type = "a"`},
		{"quotes and backslashes escaped", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq(`/a"b\c`)}}},
			`attributes.event_type = "t" AND attributes.resource_id = "/a\"b\\c"`},
		{"unicode kept", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{greedy("/ünï/路")}}},
			`attributes.event_type = "t" AND hasPrefix(attributes.resource_id, "/ünï/路")`},
		{"control characters not pushed down", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq("/a"), eq("a\nb")}}},
			`attributes.event_type = "t"`},
		{"invalid UTF-8 not pushed down", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{greedy("\xff")}}},
			`attributes.event_type = "t"`},
		{"eq empty matches nothing", filter.Groups{
			{EventType: "a", Filters: []filter.ResourceFilter{eq("")}},
			{EventType: "b"},
		}, `attributes.event_type = "b"`},
		{"too long: the longest conditions go first", filter.Groups{
			{EventType: "a", Filters: []filter.ResourceFilter{greedy(long), eq(long + "x")}},
			{EventType: "b", Filters: []filter.ResourceFilter{eq("/short")}},
		}, `attributes.event_type = "a" OR (attributes.event_type = "b" AND attributes.resource_id = "/short")`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := filterExpression(c.groups)
			require.Equal(t, c.want, got)
			require.LessOrEqual(t, len(got), MaxFilterBytes)
		})
	}
}

// TestFilterExpressionTooLong: when even the event types do not fit in
// 256 bytes there is no filter (a superset), never a truncated one.
func TestFilterExpressionTooLong(t *testing.T) {
	t.Parallel()
	var groups filter.Groups
	for i := range filter.MaxGroups {
		groups = append(groups, filter.Group{EventType: strings.Repeat("t", 20) + string(rune('a'+i))})
	}
	require.Equal(t, "", filterExpression(groups))

	// Just under the limit, the type-only expression is kept whole.
	fit := filter.Groups{{EventType: strings.Repeat("t", MaxFilterBytes-len(`attributes.event_type = ""`))}}
	require.Len(t, filterExpression(fit), MaxFilterBytes)
}

func TestNames(t *testing.T) {
	t.Parallel()
	// Herald's names pass unchanged.
	require.Equal(t, "herald-events~herald-dc-0d6f~g1", genID(baseID("herald-events", "herald-dc-0d6f"), 1))
	queue := "herald-q-" + strings.Repeat("Ab9._-", 200/6) + "xy"
	require.Equal(t, "events~"+queue, baseID("events", queue), "a 200-character queue id fits unchanged")

	// Other bytes are escaped, and '~' and '%' too, so that the topic
	// and the name cannot run into each other.
	require.Equal(t, "top~a%2Fb%20c%7E%25", baseID("top", "a/b c~%"))
	require.NotEqual(t, baseID("a~b", "c"), baseID("a", "b~c"))
	require.NotEqual(t, baseID("top", "x%7E"), baseID("top", "x~"))

	// Too long: shortened deterministically, distinct, and a valid id.
	n1, n2 := strings.Repeat("n", 300)+"1", strings.Repeat("n", 300)+"2"
	b1, b2 := baseID("topic", n1), baseID("topic", n2)
	require.Equal(t, b1, baseID("topic", n1))
	require.NotEqual(t, b1, b2)
	require.Contains(t, b1, "~~")
	require.LessOrEqual(t, len(genID(b1, ^uint64(0))), maxIDLen)
	require.NoError(t, checkTopicID(genID(b1, 7)), "a generation id follows Pub/Sub's id rules")

	// Generations parse back only from their exact form.
	base := baseID("topic", "q")
	for id, want := range map[string]uint64{genID(base, 1): 1, genID(base, 42): 42} {
		g, ok := parseGen(base, id)
		require.True(t, ok, id)
		require.Equal(t, want, g)
	}
	for _, id := range []string{base, base + "~g", base + "~g01", base + "~g1~g2", base + "~gx", baseID("topic", "q~g1") + "~g1"} {
		_, ok := parseGen(base, id)
		require.False(t, ok, id)
	}
}

func TestOpenURLRejects(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"gcppubsub://projects/p/topics/herald?ackdeadline=5s",
		"gcppubsub://projects/p/topics/herald?ackdeadline=601s",
		"gcppubsub://projects/p/topics/herald?ackdeadline=soon",
		"gcppubsub://projects/p/topics/herald?expiration=1h",
		"gcppubsub://projects/p/topics/herald?unknown=1",
		"gcppubsub://projects/p/herald",
		"gcppubsub://p/topics/herald",
		"gcppubsub://projects/p/topics/herald/extra",
		"gcppubsub://projects/p/topics/x",
		"gcppubsub://projects/p/topics/9lives",
		"gcppubsub://projects/p/topics/google-topic",
	} {
		_, err := pubsubx.Open(t.Context(), u)
		require.Error(t, err, u)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", u, err)
	}
}

func TestOpenURL(t *testing.T) {
	// Not parallel: it sets PUBSUB_EMULATOR_HOST, which the clients read.
	addr := emulators.PubSub(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", addr)
	h, err := newHarness(t.Context(), t, addr)
	require.NoError(t, err)
	topic := h.newTopic(t)
	b, err := pubsubx.Open(t.Context(), "gcppubsub://projects/"+testProject+"/topics/"+topic+"?ackdeadline=15s&expiration=48h")
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.Equal(t, 48*time.Hour, b.Driver().(*broker).opts.Expiration)

	ctx := t.Context()
	require.NoError(t, b.CreateSubscription(ctx, "herald-q-url", nil))
	t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), "herald-q-url") })
	s, err := b.Driver().(*broker).sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: "projects/" + testProject + "/subscriptions/" + topic + "~herald-q-url~g1"})
	require.NoError(t, err)
	require.EqualValues(t, 15, s.GetAckDeadlineSeconds())
	require.Equal(t, 48*time.Hour, s.GetExpirationPolicy().GetTtl().AsDuration())
	require.Equal(t, 48*time.Hour, s.GetMessageRetentionDuration().AsDuration(), "retention lowered to the expiration")
	require.NotEmpty(t, s.GetLabels()[createdLabel])

	require.NoError(t, b.Send(ctx, msg("herald.test", "/url", "u1")))
	require.Equal(t, []string{"u1"}, receiveIDs(t, b, "herald-q-url", "u1"))
}

func TestErrorTable(t *testing.T) {
	t.Parallel()
	b := &broker{}
	ctx := t.Context()
	for c, want := range map[codes.Code]herr.Code{
		codes.NotFound:          herr.NotFound,
		codes.AlreadyExists:     herr.AlreadyExists,
		codes.Unavailable:       herr.Unavailable,
		codes.DeadlineExceeded:  herr.Unavailable,
		codes.InvalidArgument:   herr.InvalidArgument,
		codes.ResourceExhausted: herr.ResourceExhausted,
		codes.PermissionDenied:  herr.PermissionDenied,
		codes.Internal:          herr.Unavailable,
	} {
		err := b.wrap(ctx, status.Error(c, "boom"), "call")
		require.Equal(t, want, herr.CodeOf(err), c.String())
		require.Equal(t, "call", herr.MessageOf(err), "the status text stays out of the caller-safe message")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.Equal(t, herr.Canceled, herr.CodeOf(b.wrap(canceled, status.Error(codes.Canceled, "x"), "call")))
	b.closed = true
	require.Equal(t, herr.Unavailable, herr.CodeOf(b.wrap(ctx, status.Error(codes.Canceled, "x"), "call")))
}

// TestFilterPushdown: the expression reaches Pub/Sub as built, pstest
// applies it, and the emulator (which ignores filters) still delivers
// every matching event.
func TestFilterPushdown(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, h *harness) {
		b := openBroker(t, h, 0)
		ctx := t.Context()
		groups := filter.Groups{
			{EventType: "order.created", Filters: []filter.ResourceFilter{greedy("/users/"), eq(`/q"uote`)}},
			{EventType: "user.deleted"},
		}
		name := "herald-q-push-" + uuid.NewString()[:8]
		require.NoError(t, b.CreateSubscription(ctx, name, groups))
		t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), name) })
		s, err := b.sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: b.path(baseID(b.opts.Topic, name), 1)})
		require.NoError(t, err)
		require.Equal(t, filterExpression(groups), s.GetFilter())

		sent := []*pubsubx.Message{
			msg("order.created", "/users/7", "match1"),
			msg("order.created", `/q"uote`, "match2"),
			msg("user.deleted", "", "match3"),
			msg("order.created", "/orders/1", "miss1"),
			msg("order.created", "", "miss2"),
			msg("user.created", "/users/7", "miss3"),
		}
		for _, m := range sent {
			require.NoError(t, b.Send(ctx, m))
		}
		got := receiveIDs(t, b, name, "match1", "match2", "match3")
		// Drain what else the server delivers (the emulator: everything).
		for {
			batch, err := b.Receive(ctx, name, pubsubx.ReceiveParams{Max: 10, Wait: time.Second})
			require.NoError(t, err)
			if len(batch) == 0 {
				break
			}
			for _, m := range batch {
				got = append(got, m.Metadata[pubsubx.AttrEventID])
			}
			require.NoError(t, b.Ack(ctx, name, batch))
		}
		if strings.HasPrefix(t.Name(), "TestFilterPushdown/pstest") {
			require.ElementsMatch(t, []string{"match1", "match2", "match3"}, got, "pstest applies the filter")
		} else {
			require.ElementsMatch(t, []string{"match1", "match2", "match3", "miss1", "miss2", "miss3"}, got, "the emulator ignores filters")
		}
	})
}

// TestGenerations: UpdateSubscription adds a generation only when the
// expression changes, Receive reads every generation, and
// DeleteSubscription removes them all.
func TestGenerations(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, h *harness) {
		b := openBroker(t, h, 0)
		ctx := t.Context()
		name := "herald-q-gen-" + uuid.NewString()[:8]
		base := baseID(b.opts.Topic, name)
		a := filter.Groups{{EventType: "a"}}
		bb := filter.Groups{{EventType: "b"}}
		require.NoError(t, b.CreateSubscription(ctx, name, a))
		t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), name) })
		require.NoError(t, b.Send(ctx, msg("a", "/1", "a1")))

		require.NoError(t, b.UpdateSubscription(ctx, name, bb))
		gens, err := b.listGens(ctx, base)
		require.NoError(t, err)
		require.Equal(t, []uint64{1, 2}, gens)
		require.NoError(t, b.UpdateSubscription(ctx, name, bb), "same expression")
		gens, err = b.listGens(ctx, base)
		require.NoError(t, err)
		require.Equal(t, []uint64{1, 2}, gens, "an unchanged expression adds no generation")

		// A second client, which never saw the update, reads both.
		c2, err := Open(ctx, b.opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c2.Close() })
		require.NoError(t, b.Send(ctx, msg("b", "/1", "b1")))
		receiveIDs(t, c2, name, "a1", "b1")

		require.NoError(t, b.DeleteSubscription(ctx, name))
		gens, err = b.listGens(ctx, base)
		require.NoError(t, err)
		require.Empty(t, gens)
		_, err = c2.Receive(ctx, name, pubsubx.ReceiveParams{Max: 1, Wait: 0})
		require.Equal(t, herr.NotFound, herr.CodeOf(err), "%v", err)
	})
}

// TestOldGenerationRetired: after an update, an old generation's copies
// of newer messages are dropped (so they arrive once), and the old
// generation is deleted once nothing was taken from it for its ack
// deadline plus the grace. pstest only: it applies the filters that keep
// the two generations' contents apart, and its clock is this process's.
func TestOldGenerationRetired(t *testing.T) {
	t.Parallel()
	h, err := pstestHarness(t.Context(), t)
	require.NoError(t, err)
	b := openBroker(t, h.(*harness), time.Second)
	b.retireGrace, b.dedupeMargin, b.createdSlack = 0, 0, 0
	ctx := t.Context()
	name := "herald-q-retire"
	base := baseID(b.opts.Topic, name)
	require.NoError(t, b.CreateSubscription(ctx, name, nil))
	t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), name) })
	require.NoError(t, b.Send(ctx, msg("a", "/1", "before")))
	require.NoError(t, b.UpdateSubscription(ctx, name, filter.Groups{{EventType: "a"}}))
	// The creation label is in whole milliseconds, rounded up: let the
	// clock pass it, so that "after" is published after it.
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, b.Send(ctx, msg("a", "/1", "after"))) // in both generations

	require.ElementsMatch(t, []string{"before", "after"}, receiveIDs(t, b, name, "before", "after"),
		"each message once: the old generation's copy of \"after\" is dropped")

	giveUp := time.Now().Add(60 * time.Second)
	for {
		gens, err := b.listGens(ctx, base)
		require.NoError(t, err)
		if len(gens) == 1 {
			require.Equal(t, []uint64{2}, gens)
			break
		}
		require.True(t, time.Now().Before(giveUp), "generation 1 was never retired: %v", gens)
		batch, err := b.Receive(ctx, name, pubsubx.ReceiveParams{Max: 10, Wait: 200 * time.Millisecond})
		require.NoError(t, err)
		require.Empty(t, batch)
	}
	require.NoError(t, b.Send(ctx, msg("a", "/1", "later")))
	require.Equal(t, []string{"later"}, receiveIDs(t, b, name, "later"))
}

// TestLongNames: names that must be escaped or shortened work end to end.
func TestLongNames(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, h *harness) {
		b := openBroker(t, h, 0)
		ctx := t.Context()
		for _, name := range []string{
			"herald-q-" + strings.Repeat("q", 200),
			"herald/" + strings.Repeat("é~%", 120),
		} {
			require.NoError(t, b.CreateSubscription(ctx, name, nil))
			t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), name) }) // if the test stops early
			id := uuid.NewString()
			require.NoError(t, b.Send(ctx, msg("herald.test", "/n", id)))
			require.Equal(t, []string{id}, receiveIDs(t, b, name, id))
			require.NoError(t, b.DeleteSubscription(ctx, name))
		}
	})
}

// TestCheckedLocally: what the driver refuses before any RPC, on a broker
// whose server does not even answer.
func TestCheckedLocally(t *testing.T) {
	t.Parallel()
	h := &harness{}
	br, err := h.MakeUnreachableBroker(t.Context(), t)
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	ctx := t.Context()

	big := &pubsubx.Message{Body: make([]byte, MaxMessageBytes+1), Metadata: map[string]string{pubsubx.AttrEventType: "t"}}
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(br.Send(ctx, big)), "a body over MaxMessageBytes")
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(br.Send(ctx, &pubsubx.Message{})), "neither body nor attributes")
	_, err = br.Receive(ctx, "herald-q-x", pubsubx.ReceiveParams{Max: 0, Wait: 0})
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "max 0")
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(br.CreateSubscription(ctx, "", nil)), "empty name")
	foreign := []*pubsubx.Message{{Handle: "not ours"}}
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(br.Ack(ctx, "herald-q-x", foreign)), "a handle of another driver")

	require.NoError(t, br.Close())
	require.NoError(t, br.Close(), "closing twice")
	require.Equal(t, herr.Unavailable, herr.CodeOf(br.Send(ctx, msg("t", "", "x"))))
}

func TestOpenOptions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	opts := Options{Project: testProject, Topic: "herald-opts", AckDeadline: 1500 * time.Millisecond, ClientOptions: clientOptions("127.0.0.1:1")}
	br, err := Open(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = br.Close() })
	require.Equal(t, 2*time.Second, br.Driver().(*broker).opts.AckDeadline, "rounded up to whole seconds")

	for _, bad := range []Options{
		{Topic: "herald-opts"},
		{Project: testProject},
		{Project: testProject, Topic: "herald-opts", AckDeadline: 601 * time.Second},
		{Project: testProject, Topic: "herald-opts", Expiration: time.Hour},
	} {
		_, err := Open(ctx, bad)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%+v", bad)
	}
}

// TestSettleOtherSubscription: messages settled on a subscription they
// did not come from are refused, and leave the other subscription alone.
func TestSettleOtherSubscription(t *testing.T) {
	t.Parallel()
	h, err := pstestHarness(t.Context(), t)
	require.NoError(t, err)
	b := openBroker(t, h.(*harness), 0)
	ctx := t.Context()
	for _, name := range []string{"herald-q-one", "herald-q-two"} {
		require.NoError(t, b.CreateSubscription(ctx, name, nil))
		t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), name) })
	}
	require.NoError(t, b.Send(ctx, msg("t", "/1", "m1")))
	var got []*pubsubx.Message
	for len(got) == 0 {
		got, err = b.Receive(ctx, "herald-q-one", pubsubx.ReceiveParams{Max: 1, Wait: time.Second})
		require.NoError(t, err)
	}
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(b.Ack(ctx, "herald-q-two", got)))
	require.Equal(t, []string{"m1"}, receiveIDs(t, b, "herald-q-two", "m1"), "the second subscription keeps its own copy")
	require.NoError(t, b.Ack(ctx, "herald-q-one", got))
}

// TestDetach: a pull's context outlives its caller's by the grace only.
func TestDetach(t *testing.T) {
	t.Parallel()
	parent, cancelParent := context.WithCancel(t.Context())
	ctx, cancel := detach(parent, time.Hour, time.Hour)
	cancelParent()
	require.NoError(t, ctx.Err(), "still running within the grace")
	cancel()
	require.Error(t, ctx.Err())

	parent, cancelParent = context.WithCancel(t.Context())
	ctx, cancel = detach(parent, time.Hour, 0)
	defer cancel()
	cancelParent()
	<-ctx.Done() // ends once the (zero) grace has passed
}

// TestCanceledReceiveHandsBack: a Receive whose caller has gone away
// returns its context's error and nacks what its pull brought, so the
// next Receive gets it at once instead of after the 60 s ack deadline.
func TestCanceledReceiveHandsBack(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, h *harness) {
		b := openBroker(t, h, 0)
		ctx := t.Context()
		name := "herald-q-cancel"
		require.NoError(t, b.CreateSubscription(ctx, name, nil))
		t.Cleanup(func() { _ = b.DeleteSubscription(context.Background(), name) })
		require.NoError(t, b.Send(ctx, msg("t", "/1", "c1")))

		gone, cancel := context.WithCancel(ctx)
		cancel()
		batch, err := b.Receive(gone, name, pubsubx.ReceiveParams{Max: 10, Wait: 0})
		require.Equal(t, herr.Canceled, herr.CodeOf(err), "%v", err)
		require.Empty(t, batch)
		got, err := b.Receive(ctx, name, pubsubx.ReceiveParams{Max: 10, Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Len(t, got, 1, "the handed-back message is available at once")
		require.Equal(t, "c1", got[0].Metadata[pubsubx.AttrEventID])
		if h.pstest != nil {
			// The canceled Receive did pull it: this is its second delivery.
			msgs := h.pstest.Messages()
			require.Len(t, msgs, 1)
			require.Equal(t, 2, msgs[0].Deliveries)
		}
		require.NoError(t, b.Ack(ctx, name, got))
	})
}

// Send sends one message through the driver's SendBatch, for the tests
// of this file that call the driver without the portable layer.
func (b *broker) Send(ctx context.Context, m *pubsubx.Message) error {
	return b.SendBatch(ctx, []*pubsubx.Message{m})[0]
}
