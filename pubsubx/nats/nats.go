// Package nats is Herald's NATS broker: a *pubsubx.Broker over NATS
// JetStream with github.com/nats-io/nats.go and its jetstream package.
//
// gocloud.dev/pubsub/natspubsub is not used: it speaks core NATS, which
// delivers at most once and keeps nothing for a subscriber that is not
// connected; Herald needs durable subscriptions, acks and redelivery.
//
// # URLs
//
//	nats://[USER:PASS@]HOST:4222/STREAM?ackdeadline=60s&subject_prefix=PREFIX&max_pending=100000&max_pending_bytes=268435456&overflow=reject-publish
//
// STREAM names the deployment's JetStream stream (1-64 letters, digits,
// '-' or '_'). subject_prefix (default: STREAM) is the subject prefix the
// stream captures as "PREFIX.>": one or more tokens of letters, digits,
// '-' and '_', not starting with '$'. ackdeadline (a Go duration, default
// 60s) is each subscription's AckWait. max_pending, max_pending_bytes and
// overflow bound the stream (see # Limits; pubsubx.QueryBounds). Other
// query parameters are refused.
//
// Opening does not dial: the first call starts a background goroutine that
// connects and makes sure the stream exists (creating it with interest
// retention, file storage, one replica and the URL's bounds, when it does
// not; an existing stream is used if it captures PREFIX.> and is not a
// work queue, and is given the URL's bounds if it has none).
//
// # Connections
//
// Callers never dial and no lock is held across network I/O. The connect
// goroutine tries (within 5 s for the TCP connect and NATS handshake, 10 s
// for the stream check) until it succeeds or the Broker is closed, waiting
// between failures with a backoff that doubles from 100 ms to 5 s, with
// jitter. A call made while an attempt is in flight waits for that attempt
// only until its context ends; a call made while the loop backs off fails
// at once with the last attempt's error (herr.Unavailable for an
// unreachable server). So a black-holed server (one that accepts TCP and
// never answers) costs each call at most its own deadline, however many
// wait. Once connected, nats.go reconnects by itself (it pings every 10 s
// and gives a connection up after 2 unanswered pings); while it is
// disconnected calls fail at once with herr.Unavailable instead of
// buffering. Every request (publish acks, JetStream API calls, pulls)
// returns when the caller's context ends. Close aborts a connect in
// flight.
//
// # Delivery semantics
//
// At least once, in stream (publish) order. Send publishes on the
// message's subject and waits for JetStream's publish ack: a nil error
// means the stream stored it. The stream keeps a message until every
// subscription whose filter it passes has acked it (interest retention).
//
// Each subscription is a durable pull consumer created at the head of the
// stream (DeliverPolicy New), with explicit acks, AckWait = ackdeadline,
// no delivery limit and no ack-pending limit. Receive pulls with the
// JetStream pull API itself: first a no-wait request for up to max
// messages; when nothing was ready and wait > 0, a request for one
// message that expires after wait, then a no-wait request for the rest.
// The server ends every request with a status or by filling its batch,
// so nothing is pulled that Receive does not return; if the caller's
// context ends first, whatever the pending request still delivers is
// nacked at once rather than left to its ack deadline.
//
// Ack and Nack publish "+ACK" and "-NAK" to each message's reply subject
// ($JS.ACK…), in stream order, the last one as a request: the server
// applies one consumer's acks in the order it reads them from a
// connection, so its reply confirms them all, and when Ack or Nack returns
// the server has applied every one (one round trip per call, not one per
// message). The reply subject is
// the whole receipt (Message.Handle holds it with the stream sequence), so
// any client on the same stream could settle a message, not only the
// process that received it. A nacked message is delivered again before
// anything new, in the order of the nacks; Nack settles each call's
// messages in stream order, so a receiver that nacks what it got keeps
// seeing publish order (Features.PublishOrder). (Unlike RabbitMQ's
// requeue, two Nack calls made newest first redeliver newest first.)
// Settling twice is
// harmless; a late ack (after the deadline passed and the message was
// redelivered) still acks it.
//
// # Filters
//
// Messages are published on PREFIX.TYPE.R0.R1… where TYPE is the event
// type and R0… the pieces of the resource id split on '/', each written as
// one token: letters, digits, '-' and '_' stay, every other byte becomes
// %XX, and an empty piece is "~" (so "", "/", "/a" and "/a/" all differ).
// A subscription's filter subjects follow from its groups: an eq filter is
// the exact subject; a greedy prefix ending at a '/' is "….>"; a lazy one
// is "….*", "….*.*" and "….*.*.*" (one more piece, with the optional
// empty pieces of a leading or trailing '/'); a prefix ending inside a
// piece widens to its parent with ">"; a group without filters is
// "PREFIX.TYPE.>"; no groups is "PREFIX.>". Overlapping subjects are
// merged (JetStream refuses overlaps). These are supersets where the
// filter is not a subject shape; the handler re-checks every message.
//
// NATS servers before 2.10 take one filter subject per consumer: there a
// subscription gets the longest common prefix of its subjects, often
// PREFIX.TYPE.> or the whole stream. Servers from 2.10 take the list.
//
// UpdateSubscription cannot always just replace the filter: JetStream
// skips waiting messages the new filter rejects, and with interest
// retention, servers from 2.10 drop them from the stream at once, in
// flight or not. So when the consumer holds nothing (no message waiting,
// none unacked) the new filter is set; otherwise the filter becomes old ∪
// new, a superset that loses nothing, and a later update made while the
// consumer is idle narrows it to that update's filter. (Narrowing later
// from Receive would race with updates in other processes: JetStream has
// no conditional consumer update.)
//
// # Errors
//
// One table (sentinels, apiCodes) maps nats.go and jetstream errors:
// consumer or stream not found is herr.NotFound; an existing consumer is
// AlreadyExists; a closed, draining or reconnecting connection, no
// servers, timeouts and credential failures are Unavailable; a message
// over the server's max_payload is InvalidArgument. An ack whose consumer
// is gone (no responders) is NotFound. A closed Broker answers
// herr.Unavailable.
//
// # Limits
//
//   - Backlog: JetStream cannot bound one consumer's backlog, so the
//     stream is bounded: MaxMsgs max_pending (default 100,000 messages)
//     and MaxBytes max_pending_bytes (default 256 MiB). With interest
//     retention the stream keeps a message until every subscription that
//     wants it has acked it, so the stream's bound is every
//     subscription's bound, and it is shared: a subscription nobody reads
//     fills it for all. At the bound, with overflow=reject-publish (the
//     default, DiscardNew), a publish fails with herr.ResourceExhausted
//     for every subscription and nothing stored is lost; with
//     overflow=drop-head (DiscardOld) the oldest messages are discarded,
//     for every subscription that still wanted them (lost, not
//     dead-lettered). An existing stream with no bound of its own gets
//     these bounds when a broker first uses it; one with bounds keeps
//     them.
//   - A body plus its headers must fit the server's max_payload (1 MiB by
//     default); Send refuses a larger one with herr.InvalidArgument.
//   - Metadata keys are header names: printable ASCII without ':' or
//     spaces, not starting with "Nats-". Values are escaped and round-trip
//     exactly.
//   - Subjects carry the resource id's first 2 KiB (encoded); deeper
//     pieces are cut to one "%" token and filtered in the handler.
//   - Subscription names map to consumer names: [A-Za-z0-9_-]{1,64} as
//     is, others hashed (a readable head, '~', 32 hex digits).
//   - A consumer serves up to 512 waiting pull requests (MaxWaiting);
//     more concurrent waiting Receives fail with herr.Unavailable.
//   - Two processes creating one name at once may both succeed (they share
//     the consumer); concurrent updates of one subscription end with one
//     of their filters (last writer wins). On servers before 2.10 an update
//     racing a delete may re-create the consumer.
package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "nats"

// DefaultAckDeadline is used when the URL gives none.
const DefaultAckDeadline = 60 * time.Second

const (
	// connectTimeout bounds dialling when the context allows longer.
	connectTimeout = 5 * time.Second
	// apiTimeout bounds a JetStream API call or a settle when the caller's
	// context has no deadline.
	apiTimeout = 10 * time.Second
	// responseGrace is how long past a pull request's expiry the server's
	// closing status may take before the request is given up.
	responseGrace = 2 * time.Second
	// verifyTTL is how long a process trusts that a consumer it saw still
	// exists before Receive looks again (a pull on a missing consumer gets
	// no answer at all, so this saves waiting out responseGrace).
	verifyTTL = 30 * time.Second
)

var (
	streamPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

func init() {
	pubsubx.Register(Scheme, openURL)
}

func openURL(_ context.Context, u *url.URL) (driver.Broker, error) {
	if err := pubsubx.CheckQuery(u, "ackdeadline", "subject_prefix", "max_pending", "max_pending_bytes", "overflow"); err != nil {
		return nil, err
	}
	bounds, err := pubsubx.QueryBounds(u)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	server := url.URL{Scheme: "nats", User: u.User, Host: u.Host}
	opts := Options{
		ServerURL:     server.String(),
		Stream:        strings.Trim(u.Path, "/"),
		SubjectPrefix: q.Get("subject_prefix"),
		Bounds:        bounds,
	}
	d, err := pubsubx.QueryDuration(u, "ackdeadline")
	if err != nil {
		return nil, err
	}
	opts.AckDeadline = d
	return open(opts)
}

// Options configure Open.
type Options struct {
	// ServerURL is the NATS server URL, e.g. "nats://127.0.0.1:4222".
	ServerURL string
	// Stream is the deployment's JetStream stream.
	Stream string
	// SubjectPrefix defaults to Stream.
	SubjectPrefix string
	// AckDeadline defaults to DefaultAckDeadline.
	AckDeadline time.Duration
	// Bounds bound the stream, and so every subscription's backlog (see
	// # Limits); zero fields take pubsubx's defaults.
	Bounds pubsubx.Bounds
}

// Open returns a Broker on opts.Stream. It validates opts but does not
// dial; see the package doc.
func Open(opts Options) (*pubsubx.Broker, error) {
	d, err := open(opts)
	if err != nil {
		return nil, err
	}
	return pubsubx.NewBroker(d), nil
}

// open is Open's driver.
func open(opts Options) (*broker, error) {
	if opts.ServerURL == "" || opts.ServerURL == "nats:" || opts.ServerURL == "nats://" {
		return nil, herr.New(herr.InvalidArgument, "nats URL: a server host is required, as in nats://127.0.0.1:4222/STREAM")
	}
	if !streamPattern.MatchString(opts.Stream) {
		return nil, herr.New(herr.InvalidArgument, "nats URL: stream %q must be 1-64 letters, digits, '-' or '_' (the URL's path)", opts.Stream)
	}
	if opts.SubjectPrefix == "" {
		opts.SubjectPrefix = opts.Stream
	}
	if !prefixPattern.MatchString(opts.SubjectPrefix) || len(opts.SubjectPrefix) > 128 {
		return nil, herr.New(herr.InvalidArgument, "nats URL: subject_prefix %q must be up to 128 bytes of '.'-separated tokens of letters, digits, '-' or '_'", opts.SubjectPrefix)
	}
	if opts.AckDeadline <= 0 {
		opts.AckDeadline = DefaultAckDeadline
	}
	if err := opts.Bounds.Validate(); err != nil {
		return nil, err
	}
	opts.Bounds = opts.Bounds.WithDefaults()
	b := &broker{
		opts:     opts,
		subjects: newSubjects(opts.SubjectPrefix),
		verified: map[string]time.Time{},
		done:     make(chan struct{}),
		attempt:  make(chan struct{}),
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

type broker struct {
	opts     Options
	subjects subjects

	// mu guards the fields below; it is never held across network I/O.
	mu     sync.Mutex
	nc     *natsgo.Conn
	js     jetstream.JetStream
	multi  bool // the server takes several filter subjects (2.10+)
	closed bool
	done   chan struct{} // closed by Close: stops background drains

	// The connect loop (conn.go).
	ctx        context.Context // cancelled by Close: aborts a connect in flight
	cancel     context.CancelFunc
	dialing    bool          // the connect loop runs
	attempt    chan struct{} // closed when the loop's current attempt ends
	backingOff bool          // the last attempt failed; the loop waits to retry
	lastErr    error         // why the last attempt failed

	verifiedMu sync.Mutex
	verified   map[string]time.Time // consumer → when it was last seen
}

// versionAtLeast compares a "MAJOR.MINOR.PATCH[-…]" server version.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimLeft(parts[1], "v"))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func (b *broker) ensureStream(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	want := b.subjects.all()
	for attempt := 0; ; attempt++ {
		s, err := js.Stream(ctx, b.opts.Stream)
		if err == nil {
			cfg := s.CachedInfo().Config
			if cfg.Retention == jetstream.WorkQueuePolicy {
				return herr.New(herr.FailedPrecondition, "NATS stream %q is a work queue; Herald needs interest or limits retention", b.opts.Stream)
			}
			for _, sub := range cfg.Subjects {
				if covers(strings.Split(sub, "."), want) {
					return b.boundStream(ctx, js, cfg)
				}
			}
			return herr.New(herr.FailedPrecondition, "NATS stream %q does not capture %q", b.opts.Stream, strings.Join(want, "."))
		}
		if codeOf(err) != herr.NotFound || attempt > 0 {
			return wrap(err, "cannot look up the NATS stream")
		}
		cfg := jetstream.StreamConfig{
			Name:        b.opts.Stream,
			Description: "Herald deployment stream",
			Subjects:    []string{strings.Join(want, ".")},
			Retention:   jetstream.InterestPolicy,
			Storage:     jetstream.FileStorage,
		}
		b.setBounds(&cfg)
		_, err = js.CreateStream(ctx, cfg)
		if err != nil && codeOf(err) != herr.AlreadyExists && !isStreamExists(err) {
			return wrap(err, "cannot create the NATS stream")
		}
		// Created, or created by someone else meanwhile: check it.
	}
}

// setBounds puts the broker's bounds on cfg (see # Limits).
func (b *broker) setBounds(cfg *jetstream.StreamConfig) {
	cfg.MaxMsgs = b.opts.Bounds.MaxPending
	cfg.MaxBytes = b.opts.Bounds.MaxPendingBytes
	cfg.Discard = jetstream.DiscardNew
	if b.opts.Bounds.Overflow == pubsubx.DropHead {
		cfg.Discard = jetstream.DiscardOld
	}
}

// boundStream bounds an existing stream that has no bound on its messages
// or bytes (one made by a Herald before bounds, or by hand) with the
// broker's bounds. A stream that has bounds keeps them: they are the
// operator's.
func (b *broker) boundStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	if cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 {
		return nil
	}
	b.setBounds(&cfg)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return wrap(err, "cannot bound the NATS stream")
	}
	return nil
}

func isStreamExists(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamNameInUse
}

// withTimeout gives ctx a deadline when it has none: JetStream calls must
// not hang on a server that stopped answering.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, apiTimeout)
}

// BatchOptions implements driver.Broker: a batch goes whole to
// SendBatch, and order is kept (JetStream stores a stream's messages in the order one connection published them).
func (b *broker) BatchOptions() driver.BatchOptions {
	return driver.BatchOptions{KeepsPublishOrder: true, CheapFilterUpdates: true}
}

// SendBatch implements driver.Broker with JetStream's async
// publish: every message is written to the connection in batch order (one
// connection keeps it, so the stream stores them in that order), then the
// publish acks are awaited together, so a batch costs about one round
// trip. Each message gets its own result: one the server refuses (or one
// over max_payload, refused before it is sent) fails alone. A message
// whose ack has not come when ctx ends fails with Unavailable (or ctx's
// error): it may still have been stored.
func (b *broker) SendBatch(ctx context.Context, msgs []*pubsubx.Message) []error {
	errs := make([]error, len(msgs))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	nc, js, err := b.client(ctx)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, len(msgs))
	expect := jetstream.WithExpectStream(b.opts.Stream) // one option value for the batch, not one per message
	for i, m := range msgs {
		h, err := headersOf(m.Metadata)
		if err != nil {
			errs[i] = err
			continue
		}
		msg := &natsgo.Msg{
			Subject: b.subjects.message(m.Metadata[pubsubx.AttrEventType], m.Metadata[pubsubx.AttrResourceID]),
			Header:  h,
			Data:    m.Body,
		}
		if size := msgSize(msg); int64(size) > nc.MaxPayload() {
			errs[i] = herr.New(herr.InvalidArgument, "message is %d bytes with its headers; the NATS server takes at most %d", size, nc.MaxPayload())
			continue
		}
		f, err := js.PublishMsgAsync(msg, expect)
		if err != nil {
			errs[i] = wrap(err, "NATS did not take the message")
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = b.publishErr(err)
		case <-ctx.Done():
			errs[i] = wrap(ctx.Err(), "NATS did not acknowledge the message in time")
		case <-b.ctx.Done():
			errs[i] = errClosed
		}
	}
	return errs
}

// publishErr is the Send result of a message whose publish ack is an
// error. A stream at its bounds (overflow=reject-publish) is
// herr.ResourceExhausted with a message naming the bounds; it names no
// subscription, since a publisher need not learn what another principal's
// consumers are called.
func (b *broker) publishErr(err error) error {
	if codeOf(err) == herr.ResourceExhausted && b.opts.Bounds.Overflow == pubsubx.RejectPublish {
		return herr.Wrap(herr.ResourceExhausted, err, fmt.Sprintf("NATS did not store the event: the stream holds max_pending=%d messages or max_pending_bytes=%d bytes that a consumer has not acknowledged; consume or delete the consumers that are not keeping up, or raise the bounds in the broker URL",
			b.opts.Bounds.MaxPending, b.opts.Bounds.MaxPendingBytes))
	}
	return wrap(err, "NATS did not store the message")
}

// msgSize is the payload size NATS checks against max_payload: the body
// plus the encoded headers (with a margin for the headers JetStream adds).
func msgSize(m *natsgo.Msg) int {
	n := len(m.Data) + len("NATS/1.0\r\n\r\n") + 64
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

func notFound(name string) error {
	return herr.New(herr.NotFound, "subscription %q does not exist", name)
}

func checkName(name string) error {
	if name == "" {
		return herr.New(herr.InvalidArgument, "subscription name must not be empty")
	}
	return nil
}

// consumerConfig is a new subscription's consumer.
func (b *broker) consumerConfig(name string) jetstream.ConsumerConfig {
	desc := "herald subscription " + name
	if len(desc) > 1024 {
		desc = desc[:1024]
	}
	return jetstream.ConsumerConfig{
		Durable:       consumerName(name),
		Description:   desc,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.opts.AckDeadline,
		MaxDeliver:    -1,
		MaxAckPending: -1,
	}
}

// setFilter puts patterns on cfg: the list on 2.10+ servers, their common
// prefix on older ones.
func (b *broker) setFilter(cfg *jetstream.ConsumerConfig, patterns [][]string) {
	cfg.FilterSubject, cfg.FilterSubjects = "", nil
	if b.multi && len(patterns) > 1 {
		cfg.FilterSubjects = subjectStrings(patterns)
		return
	}
	cfg.FilterSubject = strings.Join(joinAll(patterns), ".")
}

// filterOf reads a consumer's filter back as patterns.
func (b *broker) filterOf(cfg jetstream.ConsumerConfig) [][]string {
	switch {
	case len(cfg.FilterSubjects) > 0:
		return tokensOf(cfg.FilterSubjects)
	case cfg.FilterSubject != "":
		return tokensOf([]string{cfg.FilterSubject})
	}
	return [][]string{strings.Split(">", ".")}
}

func (b *broker) begin(ctx context.Context, name string, groups filter.Groups) (jetstream.JetStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := groups.Validate("filter_groups"); err != nil {
		return nil, err
	}
	_, js, err := b.client(ctx)
	return js, err
}

// CreateSubscription creates a durable pull consumer at the head of the
// stream.
func (b *broker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	js, err := b.begin(ctx, name, groups)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	cname := consumerName(name)
	// Servers before 2.10 treat create as create-or-update, so look first.
	if _, err := js.Consumer(ctx, b.opts.Stream, cname); err == nil {
		return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
	} else if codeOf(err) != herr.NotFound {
		return wrap(err, "cannot look up the subscription")
	}
	cfg := b.consumerConfig(name)
	b.setFilter(&cfg, b.subjects.patterns(groups))
	if _, err := js.CreateConsumer(ctx, b.opts.Stream, cfg); err != nil {
		if codeOf(err) == herr.AlreadyExists {
			return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
		}
		return wrap(err, "cannot create the subscription")
	}
	b.markVerified(cname)
	return nil
}

// UpdateSubscription sets the new filter when the consumer holds nothing,
// and old ∪ new otherwise; see the package doc, "Filters".
func (b *broker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	js, err := b.begin(ctx, name, groups)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	cname := consumerName(name)
	c, err := js.Consumer(ctx, b.opts.Stream, cname)
	if err != nil {
		if codeOf(err) == herr.NotFound {
			return notFound(name)
		}
		return wrap(err, "cannot look up the subscription")
	}
	info := c.CachedInfo()
	cfg := info.Config
	patterns := b.subjects.patterns(groups)
	if info.NumPending > 0 || info.NumAckPending > 0 {
		patterns = normalize(append(b.filterOf(cfg), patterns...))
	}
	b.setFilter(&cfg, patterns)
	if _, err := js.UpdateConsumer(ctx, b.opts.Stream, cfg); err != nil {
		if codeOf(err) == herr.NotFound {
			return notFound(name)
		}
		return wrap(err, "cannot update the subscription")
	}
	return nil
}

// DeleteSubscription deletes the consumer; with interest retention the
// stream then drops what only it was waiting for.
func (b *broker) DeleteSubscription(ctx context.Context, name string) error {
	js, err := b.begin(ctx, name, nil)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	cname := consumerName(name)
	b.forget(cname)
	if err := js.DeleteConsumer(ctx, b.opts.Stream, cname); err != nil {
		if codeOf(err) == herr.NotFound {
			return notFound(name)
		}
		return wrap(err, "cannot delete the subscription")
	}
	return nil
}

// Close closes the connection; unsettled messages return after their ack
// deadline.
func (b *broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	b.cancel()
	nc := b.nc
	b.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
	return nil
}

func (b *broker) markVerified(cname string) {
	b.verifiedMu.Lock()
	defer b.verifiedMu.Unlock()
	b.verified[cname] = time.Now()
}

func (b *broker) forget(cname string) {
	b.verifiedMu.Lock()
	defer b.verifiedMu.Unlock()
	delete(b.verified, cname)
}

// verify makes sure the consumer exists, asking the server at most once
// per verifyTTL per process.
func (b *broker) verify(ctx context.Context, js jetstream.JetStream, name, cname string) error {
	b.verifiedMu.Lock()
	seen, ok := b.verified[cname]
	b.verifiedMu.Unlock()
	if ok && time.Since(seen) < verifyTTL {
		return nil
	}
	return b.lookup(ctx, js, name, cname)
}

// lookup asks the server whether the consumer exists.
func (b *broker) lookup(ctx context.Context, js jetstream.JetStream, name, cname string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := js.Consumer(ctx, b.opts.Stream, cname); err != nil {
		b.forget(cname)
		if codeOf(err) == herr.NotFound {
			return notFound(name)
		}
		return wrap(err, "cannot look up the subscription")
	}
	b.markVerified(cname)
	return nil
}

// pullRequest is the body of $JS.API.CONSUMER.MSG.NEXT.
type pullRequest struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires,omitempty"`
	NoWait  bool          `json:"no_wait,omitempty"`
}

func marshalPull(batch int, expires time.Duration) []byte {
	b, _ := json.Marshal(pullRequest{Batch: batch, Expires: expires, NoWait: expires == 0})
	return b
}
