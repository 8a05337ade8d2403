package leasestore

import (
	"github.com/heraldevents/herald/leasestore/internal/headcfg"

	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Defaults and limits of the durable-consumer API ("Pull a batch").
const (
	// MaxInFlight is the most events a consumer may have leased and not
	// acknowledged (the durable-consumer API: "At most 1,000 events can be leased but
	// unacknowledged").
	MaxInFlight = 1000
	// DefaultMaxPayloadBytes caps one lease's payload record; see the
	// package doc.
	DefaultMaxPayloadBytes = 350_000
	// DefaultMaxRetries bounds how often an operation re-reads and retries
	// after losing a conditional-write race.
	DefaultMaxRetries = 200
	// DefaultDeliveryLimit is the default Options.DeliveryLimit (the notifications API,
	// "Bounded redelivery": a message whose delivery count passes the
	// deployment's delivery limit is dead-lettered).
	DefaultDeliveryLimit = 20
)

// Consumer types. All three are stored alike (record kind "consumer") and
// share one id namespace.
const (
	// TypeDurableConsumer is the durable-consumer API's durable consumer: leased batches
	// through Pull and Acknowledge; never reaped.
	TypeDurableConsumer = "DURABLE_CONSUMER"
	// TypeDurableQueue is the notifications API's durable queue: streams attach to it as
	// sessions and take single events through PullEvents and Settle.
	// ReapIdle deletes one that has had no live session for its idle
	// window.
	TypeDurableQueue = "DURABLE_QUEUE"
	// TypeNonDurableQueue is the notifications API's non-durable queue (its id is the
	// reconnect token): like a durable queue, but ReapIdle deletes it once
	// the reconnect grace window has passed without a live session.
	TypeNonDurableQueue = "NON_DURABLE_QUEUE"
)

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Now returns the current time; defaults to time.Now. Tests move it.
	Now func() time.Time
	// MaxPayloadBytes caps the encoded events in one lease (default
	// DefaultMaxPayloadBytes).
	MaxPayloadBytes int
	// MaxRetries bounds retries after a lost conditional write (default
	// DefaultMaxRetries).
	MaxRetries int
	// DeliveryLimit is the most times an event is delivered (default
	// DefaultDeliveryLimit; values below 1 take the default). A lease's
	// Attempt is its events' lifetime delivery count; when redelivering it
	// would make that count pass DeliveryLimit, its events are moved to the
	// dead-letter queue (reason ReasonDeliveryLimit) instead and the cursor
	// moves past them. It applies to every consumer type, the durable-consumer API's
	// durable consumers included, and to every redelivery path: a failed
	// or nacked lease, an expired visibility timeout, a session that left.
	DeliveryLimit int
	// Uncompressed stores payload records without compression. Compression
	// (zstd, where it saves an eighth) is what keeps DynamoDB and Firestore
	// bills down; a store whose records cost nothing per byte (memdocstore,
	// the local default) saves the CPU instead.
	Uncompressed bool
	// ProcessTTL is how long a process record may go without a heartbeat
	// before the process counts as dead (default DefaultProcessTTL): its
	// hub queues can then be taken over, and ReapIdle counts their idle
	// time from its last heartbeat.
	ProcessTTL time.Duration
}

// DefaultProcessTTL is Options.ProcessTTL's default: five of the hub's
// default 2 s heartbeats.
const DefaultProcessTTL = 10 * time.Second

// Store is the lease state machine over one docstore collection whose key
// field is "key" and whose revision field is docstore's default. It is safe
// for concurrent use, and any number of Stores (in any number of processes)
// may share one collection.
type Store struct {
	coll  *docstore.Collection
	opts  Options
	notes notes
	res   reservations
}

// New returns a Store over coll. The Store does not own coll: closing it is
// the caller's job.
func New(coll *docstore.Collection, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.DeliveryLimit <= 0 {
		opts.DeliveryLimit = DefaultDeliveryLimit
	}
	if opts.ProcessTTL <= 0 {
		opts.ProcessTTL = DefaultProcessTTL
	}
	return &Store{coll: coll, opts: opts}
}

// ConsumerIdentity is what a consumer is, as opposed to what it holds:
// the fields of Consumer that Pull hands PullParams.SourceFor.
type ConsumerIdentity struct {
	ID           string
	Type         string // TypeDurableConsumer, TypeDurableQueue, TypeNonDurableQueue or TypeWebhook
	Subscription string // broker subscription name
	Filters      filter.Groups
}

// Consumer is a consumer (durable consumer, durable queue or non-durable
// queue) as callers see it.
type Consumer struct {
	ID           string
	Type         string // TypeDurableConsumer, TypeDurableQueue, TypeNonDurableQueue or TypeWebhook
	Filters      filter.Groups
	Subscription string // broker subscription name
	Paused       bool
	CreatedAt    time.Time
	// Committed is the cursor position; 0 when nothing is committed yet.
	Committed int64
	// InFlight counts the events Herald holds for the consumer: leased and
	// not acknowledged, waiting for redelivery, or being dead-lettered.
	InFlight int64
	// Requeued counts the in-flight events that wait for redelivery: in
	// leases failed or nacked, requeued by ExpireLeases or because their
	// session left, and events a replay or a MaxLength intake put there.
	Requeued int64

	// LastAttached is the last time a session was known attached (its
	// last Attach or Detach, or the moment its TTL lapsed); zero when none
	// ever was. Read only: CreateConsumer ignores it.
	LastAttached time.Time
	// LiveSessions counts the sessions attached now (their TTL has not
	// lapsed). Read only.
	LiveSessions int
	// MessageTTL, when positive, is the queue's message TTL: PullEvents
	// dead-letters (ReasonExpired) an event it would hand out that was
	// enqueued (published, or replayed) at least MessageTTL ago. Stored
	// with millisecond precision; 0 means no TTL.
	MessageTTL time.Duration
	// MaxLength, when positive, bounds the events Herald holds for the
	// queue (InFlight: leased plus waiting for redelivery); see PullEvents
	// for how it is kept (ReasonMaxLen). 0 means no bound; at most
	// MaxInFlight.
	MaxLength int
	// Policies are the consumer's delivery policies (retry backoff,
	// delivery limit, ack timeout); zero values take the Store's and the
	// deployment's defaults.
	Policies
	// Owner is the principal id of whoever created the consumer, kept for
	// the callers that decide who may reconfigure it (package delivery
	// records it on non-durable queues: only their owner may change
	// their filters); "" for none. Set by CreateConsumer and never
	// changed. A consumer with an Owner is stored in a head encoding that
	// releases before owners were recorded cannot read (see package
	// internal/headcfg); one without is stored as before.
	Owner string

	// Home, when set, makes the consumer a hub queue: a non-durable queue
	// held in the memory of the process Home names (a process record, see
	// Process), fed by that process's hub subscription instead of a
	// subscription of its own (Subscription is then empty). "" for every
	// other consumer, and for a hub queue its home released
	// (ReleasedHome). See docs/streams-at-scale.md.
	Home string
	// Shared reports that a hub queue is read by sessions on several
	// processes: its home writes its events into the store (Spill) and
	// sessions take them with PullEvents, as from any other queue.
	Shared bool
}

// view returns the consumer as callers see it at nowMs, from its head and
// its blocks (nil: read none; InFlight and Requeued are then the head's
// bounds) and its cursor. It prunes d's sessions in memory (see
// pruneSessions), so lapsed sessions neither count as live nor hold
// leases, whether or not a write has recorded that yet.
func (d *consumerDoc) view(nowMs int64, blocks map[int64]*blockDoc, committed int64) (*Consumer, error) {
	d.pruneSessions(nowMs)
	c := &Consumer{
		Home: d.Home, Shared: d.Shared,
		ID: d.ID, Type: d.Type, Subscription: d.Subscription, Paused: d.Paused,
		CreatedAt: d.CreatedAt, Committed: max(committed, d.Committed), LiveSessions: d.liveSessions(nowMs),
		MessageTTL: time.Duration(d.MessageTTL) * time.Millisecond, MaxLength: int(d.MaxLength),
		Policies: d.policies(), Owner: d.Owner,
	}
	live := d.sessionLive(nowMs)
	if blocks == nil {
		for _, e := range d.Blocks {
			c.InFlight += e.Held
		}
	}
	for _, b := range blocks {
		if b == nil {
			continue
		}
		for i := range b.Leases {
			l := &b.Leases[i]
			c.InFlight += l.Count
			if l.waiting(nowMs, live) {
				c.Requeued += l.Count
			}
		}
	}
	if d.LastAttached > 0 {
		c.LastAttached = time.UnixMilli(d.LastAttached).UTC()
	}
	if err := d.decodeFilters(&c.Filters); err != nil {
		return nil, err
	}
	return c, nil
}

// identity returns what d is: its id, type, subscription and filters.
func (d *consumerDoc) identity() (ConsumerIdentity, error) {
	id := ConsumerIdentity{ID: d.ID, Type: d.Type, Subscription: d.Subscription}
	return id, d.decodeFilters(&id.Filters)
}

// decodeFilters decodes d's stored filters into g (none: g unchanged).
func (d *consumerDoc) decodeFilters(g *filter.Groups) error {
	if d.Filters == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(d.Filters), g); err != nil {
		return herr.Wrap(herr.Internal, err, "stored filters are corrupt")
	}
	return nil
}

// fullView reads d's blocks and returns the exact view.
func (s *Store) fullView(ctx context.Context, d *consumerDoc) (*Consumer, error) {
	blocks, err := s.getBlocks(ctx, d, d.allStarts())
	if err != nil {
		return nil, err
	}
	committed, err := s.cursor(ctx, d, blocks)
	if err != nil {
		return nil, err
	}
	return d.view(s.nowMs(), blocks, committed)
}

// CreateConsumer stores a new consumer at the head of its stream (nothing
// committed, first position 1). c.ID, c.Type and c.Subscription are
// required, except that a hub queue (c.Home set, c.Type
// TypeNonDurableQueue) has no subscription; c.Filters, c.Paused,
// c.CreatedAt (default: now), c.MessageTTL, c.MaxLength, c.Policies and
// c.Home are stored as given; the other fields are ignored. It fails with herr.AlreadyExists if the id is taken (by a
// consumer of any type), and with herr.InvalidArgument for a missing
// field, a negative MessageTTL, a MaxLength outside 0–MaxInFlight, or
// policies outside their ranges (Policies.Validate).
func (s *Store) CreateConsumer(ctx context.Context, c Consumer) (*Consumer, error) {
	if c.ID == "" || c.Type == "" || (c.Subscription == "" && c.Home == "") {
		return nil, herr.New(herr.InvalidArgument, "consumer needs an id, a type and a subscription")
	}
	if c.Home != "" && (c.Type != TypeNonDurableQueue || c.Subscription != "") {
		return nil, herr.New(herr.InvalidArgument, "only a non-durable queue without a subscription can have a home")
	}
	// Record keys embed the id; Firestore reads '/' in a document id as a
	// path separator, so every backend refuses it alike.
	if strings.ContainsRune(c.ID, '/') {
		return nil, herr.New(herr.InvalidArgument, "consumer id must not contain '/'")
	}
	if c.MessageTTL < 0 {
		return nil, herr.New(herr.InvalidArgument, "message TTL must not be negative (0 means none)")
	}
	if c.MaxLength < 0 || c.MaxLength > MaxInFlight {
		return nil, herr.New(herr.InvalidArgument, "max length must be between 0 (none) and %d, the in-flight window", MaxInFlight)
	}
	if err := c.Policies.Validate(); err != nil {
		return nil, err
	}
	fs, err := json.Marshal(c.Filters)
	if err != nil {
		return nil, herr.Wrap(herr.Internal, err, "encode filters")
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.opts.Now()
	}
	d := &consumerDoc{
		Key: consumerKey(c.ID), Kind: kindConsumer, Layout: layoutBlocks, Next: 1,
		Config: headcfg.Config{
			ID: c.ID, Type: c.Type, Filters: string(fs), Subscription: c.Subscription, Paused: c.Paused,
			CreatedAt:  c.CreatedAt.UTC(),
			MessageTTL: c.MessageTTL.Milliseconds(), MaxLength: int64(c.MaxLength),
			Incarnation: newIncarnation(), Owner: c.Owner,
		},
	}
	d.setPolicies(c.Policies)
	d.Home = c.Home
	if err := s.coll.Create(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.AlreadyExists {
			return nil, herr.New(herr.AlreadyExists, "consumer %q already exists", c.ID)
		}
		return nil, storeErr(err)
	}
	return d.view(s.nowMs(), map[int64]*blockDoc{}, 0)
}

// newIncarnation returns a short random token that tells apart consumers
// that reuse one id (a durable queue re-created after it was reaped).
func newIncarnation() string {
	u := uuid.New()
	return base64.RawURLEncoding.EncodeToString(u[:9])
}

func (s *Store) nowMs() int64 { return s.opts.Now().UnixMilli() }

// GetConsumer returns consumer id, or herr.NotFound.
func (s *Store) GetConsumer(ctx context.Context, id string) (*Consumer, error) {
	d, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.fullView(ctx, d)
}

// LookupConsumer returns consumer id as its head alone tells it: one read,
// for the hot paths that need its type, filters, subscription or paused
// flag. Committed is a floor of the cursor (exact once the head was last
// written); InFlight is an upper bound of the events held; Requeued is an
// upper bound of those waiting for redelivery (the events of every block a
// pull would read now for reclaimable leases). GetConsumer gives exact
// figures. It fails with herr.NotFound for an unknown consumer.
func (s *Store) LookupConsumer(ctx context.Context, id string) (*Consumer, error) {
	d, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	nowMs := s.nowMs()
	c, err := d.view(nowMs, nil, 0)
	if err != nil {
		return nil, err
	}
	live := map[uint16]bool{}
	for _, e := range d.Sessions {
		if !e.Tombstone && e.Expires > nowMs {
			live[holderCode(e.Key, true)] = true
		}
	}
	for _, e := range d.Blocks {
		if e.Until <= nowMs || (sessionCode(e.Holder) && !live[e.Holder]) {
			c.Requeued += e.Held
		}
	}
	return c, nil
}

// ListConsumers returns every consumer, of every type, in no particular
// order, with exact figures (as GetConsumer: each consumer's head and open
// blocks are read). Consumers stored in an earlier layout are left out.
func (s *Store) ListConsumers(ctx context.Context) ([]*Consumer, error) {
	heads, err := s.listHeads(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Consumer, 0, len(heads))
	for _, d := range heads {
		c, err := s.fullView(ctx, d)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// listHeads returns the head of every consumer of this layout.
func (s *Store) listHeads(ctx context.Context) ([]*consumerDoc, error) {
	var out []*consumerDoc
	err := eachOfKind(ctx, s, kindConsumer, func(d *consumerDoc) error {
		d.unpacked()
		if d.Layout == layoutBlocks { // others are refused by every call; listing one would misread it
			out = append(out, d)
		}
		return nil
	}, headFields...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteConsumer removes consumer id, its blocks and the payload records
// of the events it holds. Its dead letters stay: they name it as their
// origin, and replaying one afterwards reports ReplayOriginQueueDeleted.
// It returns the deleted consumer (for its subscription name) or
// herr.NotFound. A consumer stored in an earlier layout is deleted too (its
// head only: its old payload records are unreachable and harmless).
func (s *Store) DeleteConsumer(ctx context.Context, id string) (*Consumer, error) {
	var (
		d      *consumerDoc
		blocks map[int64]*blockDoc
	)
	err := s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.getAny(ctx, id); err != nil {
			return false, err
		}
		if d.Layout != layoutBlocks {
			// The earlier layout: only its head can be found.
			blocks = nil
			if err := s.coll.Delete(ctx, &consumerDoc{Key: d.Key}); err != nil {
				return false, storeErr(err)
			}
			return true, nil
		}
		if blocks, err = s.getBlocks(ctx, d, d.recordStarts()); err != nil {
			return false, err
		}
		return s.commit(ctx, id, write{doc: d, delete: true})
	})
	if err != nil {
		return nil, err
	}
	s.deleteBlocks(ctx, d, blocks)
	return d.view(s.nowMs(), blocks, 0)
}

// deleteBlocks deletes blocks and their payloads, best effort: what is
// left behind belongs to a deleted incarnation and is unreachable.
func (s *Store) deleteBlocks(ctx context.Context, d *consumerDoc, blocks map[int64]*blockDoc) {
	ctx = context.WithoutCancel(ctx)
	acts := s.coll.Actions()
	n := 0
	for _, b := range blocks {
		if b == nil {
			continue
		}
		acts.Delete(&blockDoc{Key: b.Key})
		acts.Delete(&payloadDoc{Key: payloadKey(d.ID, b.Payload)})
		n++
	}
	if n > 0 {
		_ = acts.Do(ctx)
	}
}

// deletePayload deletes consumer's payload record id, best effort: a
// payload left behind is unreachable and harmless.
func (s *Store) deletePayload(ctx context.Context, consumer, id string) {
	_ = s.coll.Delete(context.WithoutCancel(ctx), &payloadDoc{Key: payloadKey(consumer, id)})
}

// SetPaused pauses or resumes consumer id and returns it.
func (s *Store) SetPaused(ctx context.Context, id string, paused bool) (*Consumer, error) {
	var d *consumerDoc
	err := s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.get(ctx, id); err != nil {
			return false, err
		}
		if d.Paused == paused {
			return true, nil
		}
		d.Paused = paused
		return s.commit(ctx, id, write{doc: d})
	})
	if err != nil {
		return nil, err
	}
	return s.fullView(ctx, d)
}

// SetFilters replaces consumer id's filter groups with groups and returns
// the consumer. The broker subscription is the caller's to update (first,
// so that no event the new filters admit is dropped meanwhile). It fails
// with herr.NotFound for an unknown consumer.
func (s *Store) SetFilters(ctx context.Context, id string, groups filter.Groups) (*Consumer, error) {
	fs, err := json.Marshal(groups)
	if err != nil {
		return nil, herr.Wrap(herr.Internal, err, "encode filters")
	}
	var d *consumerDoc
	err = s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.get(ctx, id); err != nil {
			return false, err
		}
		if d.Filters == string(fs) {
			return true, nil
		}
		d.Filters = string(fs)
		return s.commit(ctx, id, write{doc: d})
	})
	if err != nil {
		return nil, err
	}
	return s.fullView(ctx, d)
}

// retry runs step until it reports done or fails, backing off a little
// after each lost race so that racing clients spread out.
func (s *Store) retry(ctx context.Context, step func() (bool, error)) error {
	for i := 0; i < s.opts.MaxRetries; i++ {
		done, err := step()
		if err != nil || done {
			return err
		}
		telemetry.StoreConflict(ctx)
		if err := sleep(ctx, backoff(i)); err != nil {
			return err
		}
	}
	return herr.New(herr.Aborted, "too much contention on this consumer; retry")
}

func backoff(i int) time.Duration {
	ceiling := time.Duration(min(i+1, 20)) * 250 * time.Microsecond
	return time.Duration(rand.Int64N(int64(ceiling)))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func storeErr(err error) error {
	code := herr.FromGocloud(gcerrors.Code(err))
	switch code {
	case herr.Unknown, herr.Internal:
		code = herr.Unavailable
	}
	return herr.Wrap(code, err, fmt.Sprintf("lease store: %s", code))
}
