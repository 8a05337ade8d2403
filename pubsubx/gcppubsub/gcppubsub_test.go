package gcppubsub

import (
	"context"
	"strconv"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/drivertest"
)

// testProject is the project every test uses; emulators accept any.
const testProject = "herald-test"

// clientOptions dials a local server without TLS or credentials.
func clientOptions(endpoint string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled(),
	}
}

// harness implements drivertest.Harness (and ShortAckDeadline) for one
// server: Google's emulator or pstest.
type harness struct {
	endpoint string
	admin    *pubsub.TopicAdminClient // deletes the test topics
	maxBody  int                      // the server's limit on a Body
	pstest   *pstest.Server           // the server, when it is pstest
}

// pstestMaxBody is the largest Body pstest takes: its gRPC server keeps
// grpc-go's default 4 MiB limit on a request, below Pub/Sub's 10 MB, and
// offers no option to raise it. 16 KiB are left for attributes and
// framing.
const pstestMaxBody = 4<<20 - 16<<10

// newHarness returns a harness on the server at endpoint.
func newHarness(ctx context.Context, t testing.TB, endpoint string) (*harness, error) {
	admin, err := pubsub.NewTopicAdminClient(ctx, clientOptions(endpoint)...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = admin.Close() })
	return &harness{endpoint: endpoint, admin: admin, maxBody: MaxMessageBytes}, nil
}

// emulatorHarness starts Google's emulator (or skips, through
// internal/emulators, when it is not installed).
func emulatorHarness(ctx context.Context, t testing.TB) (drivertest.Harness, error) {
	return newHarness(ctx, t, emulators.PubSub(t))
}

// pstestHarness starts pstest in this process.
func pstestHarness(ctx context.Context, t testing.TB) (drivertest.Harness, error) {
	srv := pstest.NewServer()
	t.Cleanup(func() { _ = srv.Close() })
	h, err := newHarness(ctx, t, srv.Addr)
	if err != nil {
		return nil, err
	}
	h.maxBody, h.pstest = pstestMaxBody, srv
	return h, nil
}

func (h *harness) open(ctx context.Context, t testing.TB, topic string, ackDeadline time.Duration) (*pubsubx.Broker, error) {
	return Open(ctx, Options{Project: testProject, Topic: topic, AckDeadline: ackDeadline, ClientOptions: clientOptions(h.endpoint)})
}

// newTopic returns a unique topic id and deletes the topic when t ends
// (it exists once a broker has used it).
func (h *harness) newTopic(t testing.TB) string {
	topic := "herald-" + uuid.NewString()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.admin.DeleteTopic(ctx, &pb.DeleteTopicRequest{Topic: "projects/" + testProject + "/topics/" + topic})
	})
	return topic
}

func (h *harness) MakeBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	return h.open(ctx, t, h.newTopic(t), 0)
}

func (h *harness) MakeBrokerWithAckDeadline(ctx context.Context, t testing.TB, d time.Duration) (*pubsubx.Broker, error) {
	return h.open(ctx, t, h.newTopic(t), max(d, time.Second))
}

func (h *harness) MakeSecondClient(ctx context.Context, t testing.TB, b *pubsubx.Broker) (*pubsubx.Broker, error) {
	return Open(ctx, b.Driver().(*broker).opts)
}

func (h *harness) MakeUnreachableBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	closed := "127.0.0.1:" + strconv.Itoa(emulators.FreePort(t))
	return Open(ctx, Options{Project: testProject, Topic: "herald-unreachable", ClientOptions: clientOptions(closed)})
}

// MakeBlackHoledBroker points at a server that accepts TCP and never
// answers.
func (h *harness) MakeBlackHoledBroker(ctx context.Context, _ testing.TB, addr string) (*pubsubx.Broker, error) {
	return Open(ctx, Options{Project: testProject, Topic: "herald-blackhole", ClientOptions: clientOptions(addr)})
}

func (h *harness) Features() drivertest.Features {
	return drivertest.Features{
		PublishOrder:    false, // no ordering keys: Pub/Sub is unordered
		MaxMessageBytes: h.maxBody,
		AckDeadline:     DefaultAckDeadline,

		BacklogRetention: MessageRetention,
	}
}

// Retention implements drivertest.RetainedBacklog: the message retention
// duration of the subscription's generations, as the server reports it
// (the longest, if they differ).
func (h *harness) Retention(ctx context.Context, t testing.TB, b *pubsubx.Broker, name string) (time.Duration, error) {
	d := b.Driver().(*broker)
	base := baseID(d.opts.Topic, name)
	gens, err := d.listGens(ctx, base)
	if err != nil {
		return 0, err
	}
	require.NotEmpty(t, gens, "subscription %s has no generation", name)
	var longest time.Duration
	for _, g := range gens {
		s, err := d.sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: d.path(base, g)})
		if err != nil {
			return 0, err
		}
		longest = max(longest, s.GetMessageRetentionDuration().AsDuration())
	}
	return longest, nil
}

var (
	_ drivertest.ShortAckDeadline = (*harness)(nil)
	_ drivertest.RetainedBacklog  = (*harness)(nil)
)

func TestConformanceEmulator(t *testing.T) {
	drivertest.RunConformanceTests(t, emulatorHarness)
}

func TestConformancePstest(t *testing.T) {
	drivertest.RunConformanceTests(t, pstestHarness)
}

func BenchmarkEmulator(b *testing.B) {
	drivertest.RunBenchmarks(b, emulatorHarness)
}

func BenchmarkPstest(b *testing.B) {
	drivertest.RunBenchmarks(b, pstestHarness)
}

// servers lists both servers for the focused tests below.
var servers = []struct {
	name string
	make drivertest.HarnessMaker
}{
	{"emulator", emulatorHarness},
	{"pstest", pstestHarness},
}

// forEachServer runs fn against both servers as parallel subtests.
func forEachServer(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			h, err := s.make(t.Context(), t)
			require.NoError(t, err)
			fn(t, h.(*harness))
		})
	}
}

// openBroker opens a broker on a fresh topic and closes it when t ends.
func openBroker(t *testing.T, h *harness, ackDeadline time.Duration) *broker {
	t.Helper()
	b, err := h.open(t.Context(), t, h.newTopic(t), ackDeadline)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b.Driver().(*broker)
}

// msg builds a message as Herald publishes it.
func msg(eventType, resourceID, id string) *pubsubx.Message {
	md := map[string]string{pubsubx.AttrEventType: eventType, pubsubx.AttrEventID: id}
	if resourceID != "" {
		md[pubsubx.AttrResourceID] = resourceID
	}
	return &pubsubx.Message{Body: []byte(`{"id":"` + id + `"}`), Metadata: md}
}

// receiveIDs receives from name until the event ids in want all arrived
// (acking everything) and returns every id received, duplicates included.
// receiver is what receiveIDs needs: the portable Broker or the driver.
type receiver interface {
	Receive(ctx context.Context, name string, p pubsubx.ReceiveParams) ([]*pubsubx.Message, error)
	Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error
}

func receiveIDs(t *testing.T, b receiver, name string, want ...string) []string {
	t.Helper()
	ctx := t.Context()
	giveUp := time.Now().Add(60 * time.Second)
	var got []string
	seen := map[string]bool{}
	for {
		missing := 0
		for _, w := range want {
			if !seen[w] {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		require.True(t, time.Now().Before(giveUp), "still missing %d of %v; got %v", missing, want, got)
		batch, err := b.Receive(ctx, name, pubsubx.ReceiveParams{Max: 10, Wait: 2 * time.Second})
		require.NoError(t, err)
		for _, m := range batch {
			id := m.Metadata[pubsubx.AttrEventID]
			got = append(got, id)
			seen[id] = true
		}
		require.NoError(t, b.Ack(ctx, name, batch))
	}
}
