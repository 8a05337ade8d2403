package leasestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// Defaults and limits of seed 000 ("Pull a batch").
const (
	// MaxInFlight is the most events a consumer may have leased and not
	// acknowledged (seed 000: "At most 1,000 events can be leased but
	// unacknowledged").
	MaxInFlight = 1000
	// DefaultMaxPayloadBytes caps one lease's payload record; see the
	// package doc.
	DefaultMaxPayloadBytes = 350_000
	// DefaultMaxRetries bounds how often an operation re-reads and retries
	// after losing a conditional-write race.
	DefaultMaxRetries = 200
)

// Consumer types.
const (
	TypeDurableConsumer = "DURABLE_CONSUMER"
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
}

// Store is the lease state machine over one docstore collection whose key
// field is "key" and whose revision field is docstore's default. It is safe
// for concurrent use, and any number of Stores (in any number of processes)
// may share one collection.
type Store struct {
	coll *docstore.Collection
	opts Options
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
	return &Store{coll: coll, opts: opts}
}

// Consumer is a durable consumer as callers see it.
type Consumer struct {
	ID           string
	Type         string
	Filters      filter.Groups
	Subscription string // broker subscription name
	Paused       bool
	CreatedAt    time.Time
	// Committed is the cursor position; 0 when nothing is committed yet.
	Committed int64
	// InFlight counts events leased and not acknowledged.
	InFlight int64
	// Requeued counts the in-flight events that wait for redelivery: in
	// leases failed by their worker or requeued by ExpireLeases.
	Requeued int64
}

func (d *consumerDoc) view() (*Consumer, error) {
	c := &Consumer{
		ID: d.ID, Type: d.Type, Subscription: d.Subscription, Paused: d.Paused,
		CreatedAt: d.CreatedAt, Committed: d.Committed, InFlight: d.inFlight(),
		Requeued: d.requeued(),
	}
	if d.Filters != "" {
		if err := json.Unmarshal([]byte(d.Filters), &c.Filters); err != nil {
			return nil, herr.Wrap(herr.Internal, err, "stored filters are corrupt")
		}
	}
	return c, nil
}

// CreateConsumer stores a new consumer. c.ID, c.Type and c.Subscription are
// required. It fails with herr.AlreadyExists if the id is taken.
func (s *Store) CreateConsumer(ctx context.Context, c Consumer) (*Consumer, error) {
	if c.ID == "" || c.Type == "" || c.Subscription == "" {
		return nil, herr.New(herr.InvalidArgument, "consumer needs an id, a type and a subscription")
	}
	fs, err := json.Marshal(c.Filters)
	if err != nil {
		return nil, herr.Wrap(herr.Internal, err, "encode filters")
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.opts.Now()
	}
	d := &consumerDoc{
		Key: consumerKey(c.ID), Kind: kindConsumer, ID: c.ID, Type: c.Type,
		Filters: string(fs), Subscription: c.Subscription, Paused: c.Paused,
		CreatedAt: c.CreatedAt.UTC(), Next: 1,
	}
	if err := s.coll.Create(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.AlreadyExists {
			return nil, herr.New(herr.AlreadyExists, "consumer %q already exists", c.ID)
		}
		return nil, storeErr(err)
	}
	return d.view()
}

// GetConsumer returns consumer id, or herr.NotFound.
func (s *Store) GetConsumer(ctx context.Context, id string) (*Consumer, error) {
	d, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return d.view()
}

// ListConsumers returns every consumer, in no particular order.
func (s *Store) ListConsumers(ctx context.Context) ([]*Consumer, error) {
	it := s.coll.Query().Where("kind", "=", kindConsumer).Get(ctx)
	defer it.Stop()
	var out []*Consumer
	for {
		var d consumerDoc
		err := it.Next(ctx, &d)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, storeErr(err)
		}
		c, err := d.view()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// DeleteConsumer removes consumer id and the payloads of its open leases.
// It returns the deleted consumer (for its subscription name) or
// herr.NotFound.
func (s *Store) DeleteConsumer(ctx context.Context, id string) (*Consumer, error) {
	var d *consumerDoc
	err := s.retry(ctx, func() (bool, error) {
		var err error
		if d, err = s.get(ctx, id); err != nil {
			return false, err
		}
		return s.write(ctx, s.coll.Delete, d)
	})
	if err != nil {
		return nil, err
	}
	for _, l := range d.Leases {
		// Best effort: a payload left behind is unreachable and harmless.
		_ = s.coll.Delete(ctx, &payloadDoc{Key: payloadKey(id, l.ID)})
	}
	return d.view()
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
		return s.write(ctx, s.coll.Replace, d)
	})
	if err != nil {
		return nil, err
	}
	return d.view()
}

func (s *Store) get(ctx context.Context, id string) (*consumerDoc, error) {
	d := &consumerDoc{Key: consumerKey(id)}
	if err := s.coll.Get(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, herr.New(herr.NotFound, "durable consumer %q does not exist", id)
		}
		return nil, storeErr(err)
	}
	return d, nil
}

// write runs a revision-conditional write of d. It reports (false, nil) when
// the write lost a race and the caller should re-read and retry.
func (s *Store) write(ctx context.Context, op func(context.Context, docstore.Document) error, d *consumerDoc) (bool, error) {
	err := op(ctx, d)
	switch gcerrors.Code(err) {
	case gcerrors.OK:
		return true, nil
	case gcerrors.FailedPrecondition:
		return false, nil
	case gcerrors.NotFound:
		return false, herr.New(herr.NotFound, "durable consumer %q does not exist", d.ID)
	default:
		return false, storeErr(err)
	}
}

// retry runs step until it reports done or fails, backing off a little
// after each lost race so that racing clients spread out.
func (s *Store) retry(ctx context.Context, step func() (bool, error)) error {
	for i := 0; i < s.opts.MaxRetries; i++ {
		done, err := step()
		if err != nil || done {
			return err
		}
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
