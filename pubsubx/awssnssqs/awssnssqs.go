// Package awssnssqs is Herald's Amazon SNS + SQS broker: one SNS topic per
// deployment, and one SQS queue per subscription, subscribed to the topic
// with raw message delivery and a filter policy built from the consumer's
// filter groups.
//
// # URLs
//
//	awssnssqs:///TOPIC?region=us-east-1&endpoint=http://127.0.0.1:4566&ackdeadline=60s
//
// TOPIC is the SNS topic name (1–256 characters of letters, digits, '_' and
// '-'; FIFO topics are not supported). The topic is created on first use if
// it does not exist: CreateTopic is idempotent, so every process opening
// the URL gets the same topic, and opening makes no network call.
//
// Query parameters (any other is refused with herr.InvalidArgument):
//
//   - region: the AWS region; default from the AWS configuration
//     (AWS_REGION, the shared config file). One of the two must give it.
//   - endpoint: a base URL used for both SNS and SQS instead of AWS's,
//     for an emulator such as moto_server.
//   - ackdeadline: a Go duration, default 60s, rounded up to whole seconds,
//     1s to 12h: the SQS visibility timeout, both of the queues this
//     client creates and of every receive it makes.
//
// Credentials always come from the default AWS chain (environment, shared
// files, container or instance role). With an emulator, set
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to anything. Code that builds
// a broker itself can pass a provider in Options.Credentials.
//
// Subscription names map to SQS queue names with QueueName: the sanitized
// topic and subscription names, cut to fit SQS's 80 characters, and a hash
// of both. Queues get the tags herald:topic and herald:subscription (when
// the name is a valid tag value), so operators can map them back.
//
// # Delivery semantics
//
// At least once. A received message stays invisible for the ack deadline
// (the SQS visibility timeout); Ack deletes it (DeleteMessageBatch), Nack
// makes it visible at once (ChangeMessageVisibilityBatch to 0). Settling a
// message twice, or after its deadline passed, is harmless.
//
// Order: none. SQS standard queues do not keep publish order, so a
// subscription may deliver messages in any order.
//
// A short poll (wait 0) asks only a sample of SQS's servers: on AWS it can
// come back empty while messages wait, so callers that must not report
// "caught up" falsely should wait at least a second.
//
// Receive makes ReceiveMessage calls of at most 10 messages each. The
// first long-polls for wait (rounded up to whole seconds, so it may return
// up to a second late when nothing comes; at most 20 s a call, repeated
// while wait lasts; 0 is a short poll). Once something arrived, rounds of
// concurrent short polls gather more, their sizes adding up to what max
// still allows, until a round finds nothing: nothing beyond max is ever
// taken, so nothing is held back. A call in flight is not interrupted when
// ctx is canceled, because SQS may already have hidden the messages it
// will return: Receive lets it finish, makes what it got visible again,
// and then reports the cancellation. Long polls are shortened to end
// before ctx's deadline.
//
// CreateSubscription creates the queue (visibility timeout = ackdeadline,
// retention 14 days, a policy letting only the topic send to it),
// subscribes it, and only then returns, so later sends reach it. On AWS
// itself a new subscription, and a changed filter policy, can take a short
// while to take effect everywhere (SNS documents up to 15 minutes for
// filter policy changes); the emulator applies both at once.
// UpdateSubscription replaces the filter policy in place: messages already
// in the queue stay. DeleteSubscription unsubscribes the queue, then
// deletes it with whatever it holds. On AWS a deleted subscription's name
// can be created again only after 60 s (herr.Unavailable until then). A
// queue left without its SNS subscription by a creation that died half-way
// makes CreateSubscription answer herr.AlreadyExists and
// UpdateSubscription herr.NotFound; DeleteSubscription removes it.
//
// # Filters
//
// Filter groups become an SNS filter policy on the message attributes
// event_type and resource_id (FilterPolicyScope MessageAttributes): a
// group's event type exactly, and its filters as resource_id values: eq as
// an exact value, starts_with_greedy as a prefix, and starts_with_lazy as
// a prefix too (a superset: a shallow prefix cannot be expressed). A group
// with no filters, or with an empty prefix, sets no resource_id condition,
// so messages without a resource_id attribute still reach it. Several
// groups become an "$or" of their conditions. No groups means no policy.
// Resource ids containing '"' or '\' are not pushed down (SNS needs them
// escaped twice, a rule the emulator cannot confirm).
//
// The policy never filters out a message filter.Groups.Match accepts, and
// Herald's handler re-checks every message, so filtering is exact overall.
// When SNS refuses a policy (its complexity limit of 150 combinations, or
// the quota of 200 filter policies per topic), the driver falls back to a
// coarser one: a single condition without "$or", then none at all. The
// subscription then receives more, never less.
//
// # Errors
//
// AWS errors are mapped to herr codes in one table: a missing queue, topic
// or subscription is herr.NotFound; creating a subscription that exists is
// herr.AlreadyExists; connection failures, throttling, 5xx answers and
// "queue deleted recently" (SQS refuses a name for 60 s after deleting it)
// are herr.Unavailable; validation failures, a body too large or not
// UTF-8, and a message handle from another subscription are
// herr.InvalidArgument; exhausted quotas are herr.ResourceExhausted;
// refused credentials or permissions are herr.Internal (a deployment fault).
// A closed broker answers herr.Unavailable.
//
// # Connections
//
// Every call is an HTTPS request of the AWS SDK, bounded by the caller's
// context (the SDK's retries included), so an endpoint that accepts TCP
// and never answers costs a call its deadline and no more. No lock is held
// across a request: the one lazy step, creating the topic, is made by one
// caller while the others wait for it only as long as their contexts
// allow. Ping is one unretried request.
//
// # Limits
//
//   - A message: body plus attributes at most 256 KiB (262,144 bytes; each
//     attribute counts its name, its type "String" and its value). Send
//     refuses bigger messages with herr.InvalidArgument; nothing is cut.
//     MaxMessageBytes is the body size always accepted with Herald's
//     attributes. Herald's own limit (a 256 KiB message inside a CloudEvents
//     envelope) is higher, so the broker states it (driver.BatchOptions)
//     with MaxMessageBytes: Herald's publisher stores an event whose
//     encoding exceeds it in the lease store and sends a claim-check
//     reference instead (package delivery).
//   - The body must be valid UTF-8 and not empty (SNS sends strings).
//   - At most 10 attributes, with names of [A-Za-z0-9_.-] (not starting
//     with "AWS." or "Amazon."); attributes with an empty value are not
//     sent (SNS refuses them), so they arrive missing.
//   - Subscriptions per topic: 12,500,000; filter policies per topic: 200
//     by default (see Filters for what happens beyond).
//   - In-flight (received, unsettled) messages per queue: 120,000.
//   - Backlog: SQS bounds a queue's length by nothing but time: a message
//     nobody receives is deleted after MessageRetention (14 days, set on
//     every queue), not dead-lettered. So a subscription nobody reads
//     holds at most what is published to it in 14 days. Herald takes the
//     backlog of a queue with a maximum length into the lease store well
//     before (package delivery).
//
// # IAM
//
// The driver calls sns:CreateTopic, sns:Publish, sns:Subscribe,
// sns:Unsubscribe, sns:SetSubscriptionAttributes and
// sns:ListSubscriptionsByTopic on the topic, and sqs:CreateQueue,
// sqs:GetQueueUrl, sqs:DeleteQueue, sqs:TagQueue, sqs:ListQueueTags,
// sqs:ReceiveMessage, sqs:DeleteMessage and sqs:ChangeMessageVisibility on
// the queues, whose names all start with the topic's first 16 characters
// and '-' (see QueueName).
package awssnssqs

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/conntrack"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "awssnssqs"

// Defaults and bounds.
const (
	// DefaultAckDeadline is the visibility timeout when none is given.
	DefaultAckDeadline = 60 * time.Second
	// MaxAckDeadline is SQS's largest visibility timeout.
	MaxAckDeadline = 12 * time.Hour

	// MaxSNSMessageBytes is SNS's limit on a message: body and attributes.
	MaxSNSMessageBytes = 256 << 10
	// attributeAllowance is room kept for Herald's attributes: event_type
	// (≤255 bytes), resource_id (≤1,024), event_id (36) and herald_claim
	// (36, on a claim-check reference), with their names and types, take
	// at most 1,420 bytes.
	attributeAllowance = 2 << 10
	// MaxMessageBytes is the largest body Send always accepts with
	// Herald's attributes: 256 KiB less 2 KiB, 260,096 bytes. Bodies up to
	// MaxSNSMessageBytes less the actual attributes' size are accepted too.
	MaxMessageBytes = MaxSNSMessageBytes - attributeAllowance

	// MaxAttributes is how many attributes SQS delivers with a message.
	MaxAttributes = 10

	// MessageRetention is how long a subscription's queue keeps a message
	// nobody receives: SQS's longest retention, 14 days. It is the bound
	// of a subscription's backlog (see # Limits).
	MessageRetention = 14 * 24 * time.Hour
	// maxWaitTimeSeconds is SQS's longest long poll.
	maxWaitTimeSeconds = 20
	// maxBatch is SQS's largest receive and settle batch.
	maxBatch = 10
	// receiveSlack bounds how long past its long poll a ReceiveMessage
	// call may take before the driver gives up on it.
	receiveSlack = 30 * time.Second
)

// Queue tag keys.
const (
	tagTopic           = "herald:topic"
	tagSubscription    = "herald:subscription"
	tagSubscriptionARN = "herald:subscription-arn"
)

func init() {
	pubsubx.Register(Scheme, openURL)
}

// Options configure Open.
type Options struct {
	// Topic is the SNS topic name; required. It is created on first use if
	// missing.
	Topic string
	// Region is the AWS region; empty means the AWS configuration's.
	Region string
	// Endpoint, if set, replaces AWS's endpoints for SNS and SQS (an
	// emulator's base URL, such as "http://127.0.0.1:4566").
	Endpoint string
	// AckDeadline is the visibility timeout of received messages, rounded
	// up to whole seconds; 0 means DefaultAckDeadline. At most
	// MaxAckDeadline.
	AckDeadline time.Duration
	// Credentials, if set, replace the default AWS credential chain.
	Credentials aws.CredentialsProvider
	// RetryMaxAttempts, if positive, replaces the SDK's attempt count
	// (3) for every call.
	RetryMaxAttempts int
}

func openURL(ctx context.Context, u *url.URL) (driver.Broker, error) {
	if err := pubsubx.CheckQuery(u, "region", "endpoint", "ackdeadline"); err != nil {
		return nil, err
	}
	q := u.Query()
	o := Options{
		Topic:    strings.Trim(u.Host+u.Path, "/"),
		Region:   q.Get("region"),
		Endpoint: q.Get("endpoint"),
	}
	d, err := pubsubx.QueryDuration(u, "ackdeadline")
	if err != nil {
		return nil, err
	}
	o.AckDeadline = d
	return open(ctx, o)
}

// Open returns a broker on topic o.Topic. It loads the AWS configuration
// but makes no network call: the topic is created (or found) on first use.
// Errors are herr.InvalidArgument for bad options.
func Open(ctx context.Context, o Options) (*pubsubx.Broker, error) {
	d, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	return pubsubx.NewBroker(d), nil
}

// open is Open's driver.
func open(ctx context.Context, o Options) (*broker, error) {
	if !topicNamePattern.MatchString(o.Topic) {
		return nil, herr.New(herr.InvalidArgument, "%s: topic name %q must be 1-256 letters, digits, '_' or '-'", Scheme, o.Topic)
	}
	if o.AckDeadline == 0 {
		o.AckDeadline = DefaultAckDeadline
	}
	if o.AckDeadline < 0 || o.AckDeadline > MaxAckDeadline {
		return nil, herr.New(herr.InvalidArgument, "%s: ackdeadline must be between 1s and %v", Scheme, MaxAckDeadline)
	}
	if o.Endpoint != "" {
		if eu, err := url.Parse(o.Endpoint); err != nil || eu.Scheme == "" || eu.Host == "" {
			return nil, herr.New(herr.InvalidArgument, "%s: endpoint %q is not an absolute URL", Scheme, o.Endpoint)
		}
	}
	// The SDK's buildable client, so that the configuration can add
	// AWS_CA_BUNDLE to it, with idle connections for 16 concurrent sends
	// and the concurrent settles of a receive instead of its 10.
	buildable := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = 64
	})
	loads := []func(*config.LoadOptions) error{config.WithHTTPClient(buildable)}
	if o.Region != "" {
		loads = append(loads, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		loads = append(loads, config.WithCredentialsProvider(o.Credentials))
	}
	if o.RetryMaxAttempts > 0 {
		loads = append(loads, config.WithRetryMaxAttempts(o.RetryMaxAttempts))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, herr.Wrap(herr.InvalidArgument, err, Scheme+": cannot load the AWS configuration")
	}
	// Every clone of a buildable client gets a transport of its own (the
	// SNS and SQS clients would each clone it), so Close could not reach
	// their connections. Both clients share one frozen client instead,
	// with the SDK's redirect and read-timeout rules, dialing through a
	// tracker that Close closes.
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		buildable = bc
	}
	var conns *conntrack.Tracker
	cfg.HTTPClient = buildable.WithTransportOptions(func(tr *http.Transport) {
		conns = conntrack.New(tr.DialContext)
		tr.DialContext = conns.Dial
	}).Freeze()
	if cfg.Region == "" {
		return nil, herr.New(herr.InvalidArgument, "%s: no AWS region: set the region query parameter or AWS_REGION", Scheme)
	}
	var endpoint *string
	if o.Endpoint != "" {
		endpoint = aws.String(o.Endpoint)
	}
	secs := int32(math.Ceil(o.AckDeadline.Seconds()))
	return &broker{
		topic:       o.Topic,
		conns:       conns,
		ackDeadline: secs,
		sns:         sns.NewFromConfig(cfg, func(so *sns.Options) { so.BaseEndpoint = endpoint }),
		sqs:         sqs.NewFromConfig(cfg, func(so *sqs.Options) { so.BaseEndpoint = endpoint }),
	}, nil
}

type broker struct {
	topic       string
	ackDeadline int32 // seconds
	sns         *sns.Client
	sqs         *sqs.Client

	closed atomic.Bool

	// topicMu guards topicARN and topicCreating; it is never held across
	// a request.
	topicMu       sync.Mutex
	topicARN      string             // set once CreateTopic succeeded
	topicCreating chan struct{}      // non-nil while a caller creates the topic
	conns         *conntrack.Tracker // every connection to SNS and SQS

	queueURLs sync.Map // subscription name → queue URL
}

// receipt is a received message's Handle.
type receipt struct {
	sub    string // the subscription it came from
	handle string // the SQS receipt handle
}

var errClosed = herr.New(herr.Unavailable, Scheme+": broker is closed")

func (b *broker) check(ctx context.Context) error {
	if b.closed.Load() {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return mapErr(err, Scheme)
	}
	return nil
}

// topicArn returns the topic's ARN, creating the topic on first use. One
// caller calls CreateTopic, outside the lock; the others wait for it until
// their context ends, and try themselves if it failed.
func (b *broker) topicArn(ctx context.Context) (string, error) {
	for {
		b.topicMu.Lock()
		if b.topicARN != "" {
			arn := b.topicARN
			b.topicMu.Unlock()
			return arn, nil
		}
		if wait := b.topicCreating; wait != nil {
			b.topicMu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", mapErr(ctx.Err(), fmt.Sprintf("topic %q", b.topic))
			}
		}
		creating := make(chan struct{})
		b.topicCreating = creating
		b.topicMu.Unlock()

		out, err := b.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(b.topic)})
		b.topicMu.Lock()
		if err == nil {
			b.topicARN = aws.ToString(out.TopicArn)
		}
		b.topicCreating = nil
		arn := b.topicARN
		b.topicMu.Unlock()
		close(creating)
		if err != nil {
			return "", mapErr(err, fmt.Sprintf("topic %q", b.topic))
		}
		return arn, nil
	}
}

// Ping implements driver.Broker: one SNS request, never retried
// (GetTopicAttributes, or CreateTopic when the topic's ARN is not known
// yet, which is idempotent), bounded by ctx. Errors are herr-coded as
// every call's (Unavailable for an unreachable endpoint, DeadlineExceeded
// or Canceled from ctx).
func (b *broker) Ping(ctx context.Context) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	b.topicMu.Lock()
	arn := b.topicARN
	b.topicMu.Unlock()
	if arn == "" {
		_, err := b.topicArn(ctx)
		return err
	}
	_, err := b.sns.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(arn)},
		func(o *sns.Options) { o.RetryMaxAttempts = 1 })
	return mapErr(err, fmt.Sprintf("topic %q", b.topic))
}

// queueARN derives a queue's ARN from the topic's: same partition, region
// and account (arn:PARTITION:sns:REGION:ACCOUNT:TOPIC).
func queueARN(topicARN, queueName string) (string, error) {
	parts := strings.SplitN(topicARN, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return "", herr.New(herr.Internal, "%s: unexpected topic ARN %q", Scheme, topicARN)
	}
	return strings.Join([]string{"arn", parts[1], "sqs", parts[3], parts[4], queueName}, ":"), nil
}

func subject(name string) string { return fmt.Sprintf("subscription %q", name) }

// queueURL returns the URL of name's queue, herr.NotFound when it has none.
func (b *broker) queueURL(ctx context.Context, name string) (string, error) {
	if v, ok := b.queueURLs.Load(name); ok {
		return v.(string), nil
	}
	out, err := b.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(QueueName(b.topic, name))})
	if err != nil {
		return "", mapErr(err, subject(name))
	}
	u := aws.ToString(out.QueueUrl)
	b.queueURLs.Store(name, u)
	return u, nil
}

// forget drops a cached queue URL after the queue turned out missing.
func (b *broker) forget(name string, err error) error {
	if herr.CodeOf(err) == herr.NotFound {
		b.queueURLs.Delete(name)
	}
	return err
}

// attributeNamePattern is SNS's rule for message attribute names.
var attributeNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]([A-Za-z0-9_.-]{0,254}[A-Za-z0-9_-])?$`)

// snsBatchEntries is how many messages one SNS PublishBatch carries.
const snsBatchEntries = 10

// SendBatch implements driver.Broker with SNS PublishBatch: the
// messages go in batches of up to 10 entries and MaxSNSMessageBytes in
// all (SNS's limits on one call); the portable layer hands it 10 at a
// time and overlaps the calls (100 events are 10 concurrent calls, not
// 100 sequential ones). SNS standard topics keep no order. Each message
// gets its own result: one refused here (empty, not UTF-8, too big) or in
// the response's Failed list fails alone; a call that fails as a whole
// fails the messages it carried.
func (b *broker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	errs := make([]error, len(msgs))
	fail := func(from int, err error) []error {
		for i := from; i < len(errs); i++ {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := b.check(ctx); err != nil {
		return fail(0, err)
	}
	arn, err := b.topicArn(ctx)
	if err != nil {
		return fail(0, err)
	}
	var (
		entries []snstypes.PublishBatchRequestEntry
		index   []int // index[k] is the message of entries[k]
		size    int
	)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		out, err := b.sns.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(arn), PublishBatchRequestEntries: entries})
		if err != nil {
			err = mapErr(err, "publish batch")
			for _, i := range index {
				errs[i] = err
			}
		} else {
			for _, f := range out.Failed {
				k, convErr := strconv.Atoi(aws.ToString(f.Id))
				if convErr != nil || k < 0 || k >= len(index) {
					continue
				}
				code := herr.Unavailable
				if f.SenderFault {
					code = herr.InvalidArgument
				}
				errs[index[k]] = herr.New(code, "%s: SNS did not publish the message: %s: %s", Scheme, aws.ToString(f.Code), aws.ToString(f.Message))
			}
			// An entry neither listed as successful nor as failed was
			// not published either.
			ok := make([]bool, len(index))
			for _, r := range out.Successful {
				if k, convErr := strconv.Atoi(aws.ToString(r.Id)); convErr == nil && k >= 0 && k < len(index) {
					ok[k] = true
				}
			}
			for k, i := range index {
				if !ok[k] && errs[i] == nil {
					errs[i] = herr.New(herr.Unavailable, "%s: SNS did not report the message published", Scheme)
				}
			}
		}
		entries, index, size = entries[:0], index[:0], 0
		return ctx.Err()
	}
	for i, m := range msgs {
		if m == nil || len(m.Body) == 0 {
			errs[i] = herr.New(herr.InvalidArgument, "%s: message body is empty; SNS sends no empty messages", Scheme)
			continue
		}
		if !utf8.Valid(m.Body) {
			errs[i] = herr.New(herr.InvalidArgument, "%s: message body is not valid UTF-8; SNS sends text", Scheme)
			continue
		}
		attrs, attrBytes, err := snsAttributes(m.Metadata)
		if err != nil {
			errs[i] = err
			continue
		}
		n := len(m.Body) + attrBytes
		if n > MaxSNSMessageBytes {
			errs[i] = herr.New(herr.InvalidArgument, "%s: message is %d bytes with its attributes; Amazon SNS carries at most %d", Scheme, n, MaxSNSMessageBytes)
			continue
		}
		if len(entries) == snsBatchEntries || size+n > MaxSNSMessageBytes {
			if err := flush(); err != nil {
				return fail(i, err)
			}
		}
		entries = append(entries, snstypes.PublishBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(len(entries))),
			Message:           aws.String(string(m.Body)),
			MessageAttributes: attrs,
		})
		index = append(index, i)
		size += n
	}
	if err := flush(); err != nil {
		return fail(len(msgs), err)
	}
	return errs
}

// snsAttributes converts metadata to SNS string attributes and returns
// their size as SNS counts it.
func snsAttributes(md map[string]string) (map[string]snstypes.MessageAttributeValue, int, error) {
	attrs := map[string]snstypes.MessageAttributeValue{}
	size := 0
	for k, v := range md {
		if v == "" {
			continue // SNS refuses empty values; a missing attribute reads as ""
		}
		if !attributeNamePattern.MatchString(k) || strings.Contains(k, "..") ||
			strings.HasPrefix(strings.ToLower(k), "aws.") || strings.HasPrefix(strings.ToLower(k), "amazon.") {
			return nil, 0, herr.New(herr.InvalidArgument, "%s: attribute name %q is not valid for Amazon SNS", Scheme, k)
		}
		if !utf8.ValidString(v) {
			return nil, 0, herr.New(herr.InvalidArgument, "%s: attribute %q is not valid UTF-8", Scheme, k)
		}
		attrs[k] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		size += len(k) + len("String") + len(v)
	}
	if len(attrs) > MaxAttributes {
		return nil, 0, herr.New(herr.InvalidArgument, "%s: %d attributes; at most %d are delivered", Scheme, len(attrs), MaxAttributes)
	}
	return attrs, size, nil
}

// BatchOptions implements driver.Broker: pieces of 10 messages (one SNS
// PublishBatch), up to 10 calls in flight at once (SNS standard topics
// keep no order), and the package constant MaxMessageBytes (260,096
// bytes), the largest body Send always accepts with Herald's attributes,
// above which a publisher uses the claim-check.
func (b *broker) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{MaxMessages: snsBatchEntries, MaxHandlers: 10, MaxMessageBytes: MaxMessageBytes}
}

// Close makes every later call fail with herr.Unavailable and closes every
// connection to SNS and SQS, idle or in use: calls in flight fail at once
// (a message a cut receive had hidden comes back after the ack deadline).
// It returns nil.
func (b *broker) Close() error {
	b.closed.Store(true)
	return b.conns.Close()
}
