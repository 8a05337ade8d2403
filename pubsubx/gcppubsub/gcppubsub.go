package gcppubsub

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"golang.org/x/sync/singleflight"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Scheme is the URL scheme this package registers with pubsubx.
const Scheme = "gcppubsub"

// Ack deadlines. Pub/Sub accepts 10–600 s in whole seconds.
const (
	DefaultAckDeadline = 60 * time.Second
	MinAckDeadline     = 10 * time.Second
	MaxAckDeadline     = 600 * time.Second
)

// MessageRetention is how long a subscription keeps an unacknowledged
// message: Pub/Sub's default and Herald's promise, 7 days (lowered to the
// expiration when one is set and shorter, since an expired subscription
// keeps nothing).
const MessageRetention = 7 * 24 * time.Hour

// MinExpiration is Pub/Sub's shortest subscription expiration.
const MinExpiration = 24 * time.Hour

// MaxMessageBytes is the largest Body Send accepts. Pub/Sub takes 10 MB
// (10,000,000 bytes) per publish request; 8 KiB are left for the
// attributes (Herald's three take under 1.4 KiB) and the request's own
// framing. A larger Body fails with herr.InvalidArgument before anything
// is sent.
const MaxMessageBytes = 10_000_000 - 8<<10

// rpcTimeout bounds one Pub/Sub RPC that the caller's context does not
// bound more tightly. gax's own retries are switched off (the caller
// retries on herr.Retryable), so this is one attempt.
const rpcTimeout = 30 * time.Second

// Options configure a broker opened with Open. The URL opener fills them
// from the URL.
type Options struct {
	// Project is the Google Cloud project id that holds the topic and the
	// subscriptions. Required.
	Project string
	// Topic is the topic id (not its full name). Required. The topic is
	// created on first use if it does not exist.
	Topic string
	// AckDeadline is the ack deadline of subscriptions this broker
	// creates, rounded up to whole seconds. Zero means
	// DefaultAckDeadline. Open accepts 1 s–600 s so that tests against
	// the emulator and pstest can redeliver quickly; Pub/Sub itself
	// refuses less than MinAckDeadline (herr.InvalidArgument from
	// CreateSubscription), and the URL opener accepts only 10 s–600 s.
	AckDeadline time.Duration
	// Expiration is the expiration policy of subscriptions this broker
	// creates: Pub/Sub deletes a subscription that has had no pull or
	// other activity for this long. Zero means never (Herald's idle
	// sweeper decides instead). Otherwise at least MinExpiration.
	Expiration time.Duration
	// ClientOptions are passed to the Pub/Sub clients, after the
	// defaults (which honour PUBSUB_EMULATOR_HOST): an endpoint with
	// insecure credentials for an emulator, for example.
	ClientOptions []option.ClientOption
}

func init() {
	pubsubx.Register(Scheme, openURL)
}

// openURL opens gcppubsub://projects/PROJECT/topics/TOPIC?ackdeadline=…&expiration=….
// The URL is parsed here rather than by gocloud's opener, whose v2 form
// misreads the project (DESIGN.md, "Known traps").
func openURL(ctx context.Context, u *url.URL) (driver.Broker, error) {
	if err := pubsubx.CheckQuery(u, "ackdeadline", "expiration"); err != nil {
		return nil, err
	}
	// url.Parse puts "projects" in Host and "/PROJECT/topics/TOPIC" in Path.
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if u.Host != "projects" || len(parts) != 3 || parts[1] != "topics" || u.User != nil || u.Fragment != "" {
		return nil, herr.New(herr.InvalidArgument, "gcppubsub URL must be gcppubsub://projects/PROJECT/topics/TOPIC, got %q", u.Redacted())
	}
	opts := Options{Project: parts[0], Topic: parts[2]}
	q := u.Query()
	if s := q.Get("ackdeadline"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < MinAckDeadline || d > MaxAckDeadline {
			return nil, herr.New(herr.InvalidArgument, "gcppubsub URL: ackdeadline %q must be a duration from 10s to 600s", s)
		}
		opts.AckDeadline = d
	}
	if s := q.Get("expiration"); s != "" && s != "never" {
		d, err := time.ParseDuration(s)
		if err != nil || (d != 0 && d < MinExpiration) {
			return nil, herr.New(herr.InvalidArgument, "gcppubsub URL: expiration %q must be \"never\", 0 or a duration of at least 24h", s)
		}
		opts.Expiration = d
	}
	return open(ctx, opts)
}

// Open returns a broker on opts.Topic. It does not contact Pub/Sub: a
// wrong project, missing credentials or an unreachable server show up as
// errors of the first call. Errors are herr.InvalidArgument for bad
// options.
func Open(ctx context.Context, opts Options) (*pubsubx.Broker, error) {
	d, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return pubsubx.NewBroker(d), nil
}

// open is Open's driver.
func open(ctx context.Context, opts Options) (*broker, error) {
	if err := checkProjectID(opts.Project); err != nil {
		return nil, err
	}
	if err := checkTopicID(opts.Topic); err != nil {
		return nil, err
	}
	if opts.AckDeadline == 0 {
		opts.AckDeadline = DefaultAckDeadline
	}
	if opts.AckDeadline < time.Second || opts.AckDeadline > MaxAckDeadline {
		return nil, herr.New(herr.InvalidArgument, "gcppubsub: ack deadline %s is outside 1s-600s", opts.AckDeadline)
	}
	if r := opts.AckDeadline % time.Second; r != 0 {
		opts.AckDeadline += time.Second - r // round up: never shorter than asked
	}
	if opts.Expiration != 0 && opts.Expiration < MinExpiration {
		return nil, herr.New(herr.InvalidArgument, "gcppubsub: expiration %s is shorter than 24h", opts.Expiration)
	}
	tc, err := pubsub.NewTopicAdminClient(ctx, opts.ClientOptions...)
	if err != nil {
		return nil, herr.Wrap(herr.Unavailable, err, "gcppubsub: cannot create the Pub/Sub publisher client")
	}
	sc, err := pubsub.NewSubscriptionAdminClient(ctx, opts.ClientOptions...)
	if err != nil {
		_ = tc.Close()
		return nil, herr.Wrap(herr.Unavailable, err, "gcppubsub: cannot create the Pub/Sub subscriber client")
	}
	// No gax retries or timeouts: one attempt per call, bounded by
	// rpcTimeout and the caller's context. Herald retries what
	// herr.Retryable allows, and a publish that hangs in retries for a
	// minute would hold a request far past its deadline.
	tc.CallOptions = &pubsub.TopicAdminCallOptions{}
	sc.CallOptions = &pubsub.SubscriptionAdminCallOptions{}
	return &broker{
		opts:      opts,
		topicPath: "projects/" + opts.Project + "/topics/" + opts.Topic,
		subPrefix: "projects/" + opts.Project + "/subscriptions/",
		pub:       tc,
		sub:       sc,
		subs:      map[string]*subState{},

		dedupeMargin: dedupeMargin,
		retireGrace:  retireGrace,
		createdSlack: rpcTimeout,
	}, nil
}

// broker is a *pubsubx.Broker on one Pub/Sub topic.
type broker struct {
	opts      Options
	topicPath string // projects/P/topics/T
	subPrefix string // projects/P/subscriptions/
	pub       *pubsub.TopicAdminClient
	sub       *pubsub.SubscriptionAdminClient

	// dedupeMargin and retireGrace are the constants of the same names,
	// createdSlack is rpcTimeout (see createdLabel); tests shorten them.
	dedupeMargin time.Duration
	retireGrace  time.Duration
	createdSlack time.Duration

	// topicFlight makes concurrent creators of the topic share one
	// CreateTopic (ensureTopic).
	topicFlight singleflight.Group

	mu     sync.Mutex
	closed bool
	subs   map[string]*subState // by base id; a cache, see subState
}

func (b *broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close closes the clients. Calls in flight and later calls fail with
// herr.Unavailable. Closing twice is harmless.
func (b *broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	err1 := b.sub.Close()
	err2 := b.pub.Close()
	if err1 != nil || err2 != nil {
		return herr.Wrap(herr.Internal, errors.Join(err1, err2), "gcppubsub: closing the clients failed")
	}
	return nil
}

// Pub/Sub's limits on one PublishRequest.
const (
	maxRequestMessages = 1000
	maxRequestBytes    = 10_000_000 - 64<<10 // a margin for attributes and framing
)

// BatchOptions implements driver.Broker: Herald publishes without ordering
// keys, and Pub/Sub delivers such messages in any order, so the portable
// layer may send the pieces of a batch (up to 1,000 messages, one
// PublishRequest's limit) concurrently.
func (b *broker) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{MaxMessages: maxRequestMessages, MaxHandlers: 4, MaxMessageBytes: MaxMessageBytes}
}

// SendBatch implements driver.Broker with Pub/Sub's batch publish: the
// messages go in as few PublishRequests as its limits allow (1,000
// messages, 10 MB), one after the other. Bodies and metadata are copied
// into the requests before SendBatch returns. A message refused here (no
// body and no attribute) fails alone. Pub/Sub accepts or refuses a
// request whole: a request refused as invalid or too big (nothing of it
// published) is sent again one message per request, so that only the
// messages it refuses fail; a request that fails otherwise (unreachable,
// timed out: it may have been published) fails the messages it carried.
func (b *broker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	errs := make([]error, len(msgs))
	if b.isClosed() {
		for i := range errs {
			errs[i] = errClosed
		}
		return errs
	}
	var (
		req   *pb.PublishRequest
		index []int // req.Messages[k] is msgs[index[k]]
		size  int
	)
	publish := func(req *pb.PublishRequest) error {
		return b.withTopic(ctx, func(ctx context.Context) error {
			_, err := b.pub.Publish(ctx, req)
			return err
		})
	}
	flush := func() {
		if req == nil {
			return
		}
		err := publish(req)
		switch {
		case err == nil:
		case len(req.Messages) > 1 && refusedWhole(err):
			// Pub/Sub refused the request without publishing any of it
			// (a message it will not take, a request over a server's
			// size limit): send each message alone, so that only the
			// ones it refuses fail.
			for k, m := range req.Messages {
				if err := publish(&pb.PublishRequest{Topic: b.topicPath, Messages: []*pb.PubsubMessage{m}}); err != nil {
					errs[index[k]] = b.wrap(ctx, err, "gcppubsub: publishing failed")
				}
			}
		default:
			err = b.wrap(ctx, err, "gcppubsub: publishing failed")
			for _, i := range index {
				errs[i] = err
			}
		}
		req, index, size = nil, nil, 0
	}
	for i, m := range msgs {
		if len(m.Body) == 0 && len(m.Metadata) == 0 {
			errs[i] = herr.New(herr.InvalidArgument, "gcppubsub: a message needs a body or an attribute")
			continue
		}
		n := len(m.Body)
		for k, v := range m.Metadata {
			n += len(k) + len(v)
		}
		if req != nil && (len(req.Messages) == maxRequestMessages || size+n > maxRequestBytes) {
			flush()
		}
		if req == nil {
			req = &pb.PublishRequest{Topic: b.topicPath}
		}
		req.Messages = append(req.Messages, &pb.PubsubMessage{Data: m.Body, Attributes: m.Metadata})
		index = append(index, i)
		size += n
	}
	flush()
	return errs
}

// refusedWhole reports whether Pub/Sub refused a publish without
// publishing any of it: an invalid request, or one over a size limit.
func refusedWhole(err error) bool {
	switch codeOf(err) {
	case codes.InvalidArgument, codes.ResourceExhausted:
		return true
	}
	return false
}

// withTopic runs call with rpcTimeout; if it fails because the topic does
// not exist, it makes sure the topic exists (ensureTopic) and runs call
// once more. Creating on demand keeps Open free of RPCs, and a publish to
// a topic that did not exist has no subscription to deliver to anyway.
//
// call must be a publish or a subscription create, for which NotFound
// means the topic. A NotFound of the second attempt (the topic deleted
// again in between) is herr.Unavailable: nothing the caller named is
// missing, so it must not read as a 404.
func (b *broker) withTopic(ctx context.Context, call func(ctx context.Context) error) error {
	err := b.rpc(ctx, call)
	if codeOf(err) != codes.NotFound {
		return err
	}
	if err := b.ensureTopic(ctx); err != nil {
		return err
	}
	err = b.rpc(ctx, call)
	if codeOf(err) == codes.NotFound {
		return herr.Wrap(herr.Unavailable, err, "gcppubsub: the topic is missing although it was just created; retry")
	}
	return err
}

// ensureTopic creates the topic unless it exists. Concurrent callers of
// one broker share one CreateTopic (singleflight), so a burst of first
// calls on a fresh deployment makes one request; each waits for it until
// its own ctx ends. The shared request runs detached from any one
// caller's context, bounded by rpcTimeout, so that a caller who gives up
// does not fail the others. Before, each caller that found the topic
// missing checked again with GetTopic and, finding that another caller
// had created it meanwhile, returned its own first NotFound: a 404 for a
// race between creators.
func (b *broker) ensureTopic(ctx context.Context) error {
	ch := b.topicFlight.DoChan(b.topicPath, func() (any, error) {
		err := b.rpc(context.Background(), func(ctx context.Context) error {
			_, err := b.pub.CreateTopic(ctx, &pb.Topic{Name: b.topicPath})
			return err
		})
		if codeOf(err) == codes.AlreadyExists {
			err = nil
		}
		return nil, err
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rpc runs call under rpcTimeout.
func (b *broker) rpc(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	return call(ctx)
}

// Ping implements driver.Broker: one GetTopic call, never retried,
// bounded by ctx and rpcTimeout. A topic that does not exist yet still
// answers (Send creates it), so NotFound is a nil error. The gRPC channel
// reconnects by itself in the background; Ping never dials beyond it.
// Errors are herr-coded as every call's (Unavailable for an unreachable
// server, DeadlineExceeded or Canceled from ctx).
func (b *broker) Ping(ctx context.Context) error {
	if b.isClosed() {
		return errClosed
	}
	err := b.rpc(ctx, func(ctx context.Context) error {
		_, err := b.pub.GetTopic(ctx, &pb.GetTopicRequest{Topic: b.topicPath})
		return err
	})
	if codeOf(err) == codes.NotFound {
		return nil
	}
	return b.wrap(ctx, err, "gcppubsub: ping failed")
}
