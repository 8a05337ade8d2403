package awssnssqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/awssnssqs"
	"github.com/heraldevents/herald/pubsubx/drivertest"
)

// region is the emulator's region; moto accepts any, with account
// 123456789012.
const region = "us-east-1"

// fakeCredentials are what moto wants: anything.
var fakeCredentials = credentials.NewStaticCredentialsProvider("herald-test", "herald-test", "")

// uniqueTopic returns a topic name no other test uses.
func uniqueTopic(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// harness opens brokers on one moto_server, each on a topic of its own.
// It remembers each broker's options so a second client opens the same
// topic, as another process with the same URL would.
type harness struct {
	endpoint string

	mu   sync.Mutex
	opts map[*pubsubx.Broker]awssnssqs.Options
}

func (h *harness) open(ctx context.Context, t testing.TB, o awssnssqs.Options) (*pubsubx.Broker, error) {
	b, err := awssnssqs.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.opts[b] = o
	h.mu.Unlock()
	return b, nil
}

func (h *harness) options(topic string, ackDeadline time.Duration) awssnssqs.Options {
	return awssnssqs.Options{
		Topic: topic, Region: region, Endpoint: h.endpoint,
		AckDeadline: ackDeadline, Credentials: fakeCredentials,
	}
}

// MakeBroker opens a broker on a new topic, and deletes the topic when the
// test ends (after the suite deleted its subscriptions and closed it).
func (h *harness) MakeBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	topic := uniqueTopic("dt")
	t.Cleanup(func() { deleteTopic(t, h.endpoint, topic) })
	return h.open(ctx, t, h.options(topic, 0))
}

// MakeBrokerWithAckDeadline implements drivertest.ShortAckDeadline: SQS
// visibility timeouts are whole seconds, and 1 s is the suite's ask.
func (h *harness) MakeBrokerWithAckDeadline(ctx context.Context, t testing.TB, d time.Duration) (*pubsubx.Broker, error) {
	topic := uniqueTopic("dt")
	t.Cleanup(func() { deleteTopic(t, h.endpoint, topic) })
	return h.open(ctx, t, h.options(topic, d))
}

func (h *harness) MakeSecondClient(ctx context.Context, t testing.TB, b *pubsubx.Broker) (*pubsubx.Broker, error) {
	h.mu.Lock()
	o, ok := h.opts[b]
	h.mu.Unlock()
	require.True(t, ok, "MakeSecondClient: broker was not made by this harness")
	return h.open(ctx, t, o)
}

// MakeUnreachableBroker points at a port nothing listens on.
func (h *harness) MakeUnreachableBroker(ctx context.Context, t testing.TB) (*pubsubx.Broker, error) {
	o := h.options(uniqueTopic("dt"), 0)
	o.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", emulators.FreePort(t))
	return awssnssqs.Open(ctx, o)
}

func (h *harness) Features() drivertest.Features {
	return drivertest.Features{
		PublishOrder:    false, // SQS standard queues do not keep order
		MaxMessageBytes: awssnssqs.MaxMessageBytes,
		AckDeadline:     awssnssqs.DefaultAckDeadline,

		BacklogRetention: awssnssqs.MessageRetention,
	}
}

// Retention implements drivertest.RetainedBacklog: the
// MessageRetentionPeriod of the subscription's queue, as SQS reports it.
func (h *harness) Retention(ctx context.Context, t testing.TB, b *pubsubx.Broker, name string) (time.Duration, error) {
	h.mu.Lock()
	o, ok := h.opts[b]
	h.mu.Unlock()
	require.True(t, ok, "Retention: broker was not made by this harness")
	_, client := awsClients(h.endpoint)
	q, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awssnssqs.QueueName(o.Topic, name))})
	if err != nil {
		return 0, err
	}
	qa, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameMessageRetentionPeriod},
	})
	if err != nil {
		return 0, err
	}
	secs, err := strconv.Atoi(qa.Attributes[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)])
	return time.Duration(secs) * time.Second, err
}

// newHarness starts one moto_server for the top-level test or benchmark.
func newHarness(_ context.Context, t testing.TB) (drivertest.Harness, error) {
	return &harness{endpoint: emulators.Moto(t), opts: map[*pubsubx.Broker]awssnssqs.Options{}}, nil
}

func TestConformance(t *testing.T) { drivertest.RunConformanceTests(t, newHarness) }

func BenchmarkConformance(b *testing.B) { drivertest.RunBenchmarks(b, newHarness) }

// awsClients returns raw SNS and SQS clients on the emulator, for setting
// up states the driver would not make and for checking what it made.
func awsClients(endpoint string) (*sns.Client, *sqs.Client) {
	cfg := aws.Config{Region: region, Credentials: fakeCredentials}
	return sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// deleteTopic removes topic and any queue of its left behind. Failures are
// logged: cleanup must not hide the test's own result.
func deleteTopic(t testing.TB, endpoint, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snsc, sqsc := awsClients(endpoint)
	// Queue names start with the topic's first 16 characters and '-'
	// (awssnssqs.QueueName); test topics are shorter and never prefixes of
	// each other.
	prefix := topic[:min(len(topic), 16)] + "-"
	queues, err := sqsc.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix)})
	if err != nil {
		t.Logf("cleanup: listing queues of %s: %v", topic, err)
		return
	}
	for _, q := range queues.QueueUrls {
		if _, err := sqsc.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q)}); err != nil {
			t.Logf("cleanup: deleting queue %s: %v", q, err)
		}
	}
	out, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(topic)})
	if err == nil {
		_, err = snsc.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: out.TopicArn})
	}
	if err != nil {
		t.Logf("cleanup: deleting topic %s: %v", topic, err)
	}
}

// MakeBlackHoledBroker points at an endpoint that accepts TCP and never
// answers.
func (h *harness) MakeBlackHoledBroker(ctx context.Context, _ testing.TB, addr string) (*pubsubx.Broker, error) {
	o := h.options(uniqueTopic("dt"), 0)
	o.Endpoint = "http://" + addr
	return awssnssqs.Open(ctx, o)
}
