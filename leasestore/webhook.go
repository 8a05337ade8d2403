package leasestore

import (
	"context"
	"encoding/base64"
	"math"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
)

// Webhook records: where and how Herald pushes the events of a consumer
// of TypeWebhook (package delivery's push worker). The consumer itself is
// an ordinary consumer record: its leases, cursor, policies and dead
// letters are those of a durable consumer, and Herald is its only
// worker. The record is apart from the consumer's head so that the
// head, read by every operation, does not grow with a URL and secrets.

// TypeWebhook is a consumer whose events Herald POSTs to a URL (its
// Webhook record), taking leased batches as a durable consumer's worker
// does. It is never reaped.
const TypeWebhook = "WEBHOOK"

// Webhook limits.
const (
	// MaxWebhookURLLength is the longest webhook URL, in bytes.
	MaxWebhookURLLength = 2048
	// MaxWebhookSecrets bounds Webhook.Secrets: the current secret and
	// those being retired after rotations.
	MaxWebhookSecrets = 4
)

// Webhook is a webhook consumer's push configuration, a record of kind
// "webhook" keyed "wh:<consumer id in unpadded base64url>".
type Webhook struct {
	// Consumer is the consumer's id.
	Consumer string
	// URL is the endpoint, checked by the caller (package delivery).
	URL string
	// Secrets are the signing secrets as serialized ("whsec_…"),
	// current first; at most MaxWebhookSecrets. Stored as given: the
	// store cannot sign without them.
	Secrets []WebhookSecret
	// Timeout bounds one delivery attempt; 0 takes the caller's default.
	Timeout time.Duration
	// MaxBatch is the most events one delivery carries; 0 or 1 sends
	// each event in a request of its own.
	MaxBatch int
	// Disabled, when set, is why pushes stopped (the endpoint answered
	// 410 Gone); "" while pushes go on.
	Disabled string
	// Ordered asks for one delivery in flight at a time, in sequence.
	Ordered bool
	// RateLimit is the most deliveries per second; 0 is no limit. Kept to
	// a thousandth (stored as deliveries per 1,000 s).
	RateLimit float64
	// Failures counts the endpoint's consecutive failed attempts, the
	// circuit breaker's count, shared by every dispatcher; a success
	// resets it.
	Failures int
	// OpenedAt is when the circuit breaker last opened or let a probe
	// through (half-open); zero while it is closed.
	OpenedAt time.Time

	revision any
}

// WebhookSecret is one signing secret and, for one being retired, when
// it stops signing (zero: it does not expire).
type WebhookSecret struct {
	Secret    string
	ExpiresAt time.Time
}

type webhookDoc struct {
	Key       string   `docstore:"key"`
	Kind      string   `docstore:"kind"`
	Consumer  string   `docstore:"consumer"`
	URL       string   `docstore:"url"`
	Secrets   []string `docstore:"secrets"`
	Expiries  []int64  `docstore:"expiries_ms"` // Unix ms per secret; 0 = none
	TimeoutMs int64    `docstore:"timeout_ms"`
	MaxBatch  int64    `docstore:"max_batch"`
	Disabled  string   `docstore:"disabled"`
	Ordered   bool     `docstore:"ordered"`
	RateMilli int64    `docstore:"rate_milli"` // deliveries per 1,000 s
	Failures  int64    `docstore:"failures"`
	OpenedMs  int64    `docstore:"opened_ms"` // Unix ms; 0 = closed

	DocstoreRevision any
}

const (
	kindWebhook   = "webhook"
	webhookPrefix = "wh:"
)

func webhookKey(consumer string) string {
	return webhookPrefix + base64.RawURLEncoding.EncodeToString([]byte(consumer))
}

func (w *Webhook) validate() error {
	switch {
	case w.Consumer == "":
		return herr.New(herr.InvalidArgument, "a webhook needs its consumer's id")
	case w.URL == "" || len(w.URL) > MaxWebhookURLLength:
		return herr.New(herr.InvalidArgument, "url must be 1 to %d bytes long", MaxWebhookURLLength)
	case len(w.Secrets) == 0 || len(w.Secrets) > MaxWebhookSecrets:
		return herr.New(herr.InvalidArgument, "a webhook holds 1 to %d signing secrets", MaxWebhookSecrets)
	case w.Timeout < 0 || w.MaxBatch < 0 || w.RateLimit < 0 || w.Failures < 0:
		return herr.New(herr.InvalidArgument, "a webhook's timeout, max_batch, rate limit and failure count must not be negative")
	}
	for _, s := range w.Secrets {
		if s.Secret == "" {
			return herr.New(herr.InvalidArgument, "a webhook's signing secret must not be empty")
		}
	}
	return nil
}

func (w *Webhook) doc() *webhookDoc {
	d := &webhookDoc{
		Key: webhookKey(w.Consumer), Kind: kindWebhook, Consumer: w.Consumer, URL: w.URL,
		TimeoutMs: w.Timeout.Milliseconds(), MaxBatch: int64(w.MaxBatch), Disabled: w.Disabled,
		Ordered: w.Ordered, RateMilli: int64(math.Round(w.RateLimit * 1000)), Failures: int64(w.Failures),
		DocstoreRevision: w.revision,
	}
	if !w.OpenedAt.IsZero() {
		d.OpenedMs = w.OpenedAt.UnixMilli()
	}
	for _, s := range w.Secrets {
		var ms int64
		if !s.ExpiresAt.IsZero() {
			ms = s.ExpiresAt.UnixMilli()
		}
		d.Secrets = append(d.Secrets, s.Secret)
		d.Expiries = append(d.Expiries, ms)
	}
	return d
}

func (d *webhookDoc) view() *Webhook {
	w := &Webhook{
		Consumer: d.Consumer, URL: d.URL, Timeout: time.Duration(d.TimeoutMs) * time.Millisecond,
		MaxBatch: int(d.MaxBatch), Disabled: d.Disabled, revision: d.DocstoreRevision,
		Ordered: d.Ordered, RateLimit: float64(d.RateMilli) / 1000, Failures: int(d.Failures),
	}
	if d.OpenedMs != 0 {
		w.OpenedAt = time.UnixMilli(d.OpenedMs).UTC()
	}
	for i, s := range d.Secrets {
		ws := WebhookSecret{Secret: s}
		if i < len(d.Expiries) && d.Expiries[i] != 0 {
			ws.ExpiresAt = time.UnixMilli(d.Expiries[i]).UTC()
		}
		w.Secrets = append(w.Secrets, ws)
	}
	return w
}

// CreateWebhook stores w for its consumer. One write, which fails with
// herr.AlreadyExists when the consumer has a webhook record already;
// herr.InvalidArgument for a record missing its consumer, URL or secrets.
func (s *Store) CreateWebhook(ctx context.Context, w Webhook) (*Webhook, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	w.revision = nil
	d := w.doc()
	if err := s.coll.Create(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.AlreadyExists {
			return nil, herr.New(herr.AlreadyExists, "consumer %q has a webhook already", w.Consumer)
		}
		return nil, storeErr(err)
	}
	return d.view(), nil
}

// GetWebhook returns consumer's webhook record; herr.NotFound when it has
// none. One read.
func (s *Store) GetWebhook(ctx context.Context, consumer string) (*Webhook, error) {
	d := &webhookDoc{Key: webhookKey(consumer)}
	if err := s.coll.Get(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, herr.New(herr.NotFound, "consumer %q has no webhook", consumer)
		}
		return nil, storeErr(err)
	}
	return d.view(), nil
}

// UpdateWebhook changes consumer's webhook record to what change makes of
// it, in a revision-conditional write, read and run again when another
// write came first (two rotations at once both land, one after the
// other). change may not change the consumer. An error from change is
// returned as it is, nothing written; herr.NotFound when there is no
// record; herr.InvalidArgument when change leaves it invalid.
func (s *Store) UpdateWebhook(ctx context.Context, consumer string, change func(*Webhook) error) (*Webhook, error) {
	var out *Webhook
	err := s.retry(ctx, func() (bool, error) {
		w, err := s.GetWebhook(ctx, consumer)
		if err != nil {
			return false, err
		}
		if err := change(w); err != nil {
			return false, err
		}
		w.Consumer = consumer
		if err := w.validate(); err != nil {
			return false, err
		}
		d := w.doc()
		if err := s.coll.Replace(ctx, d); err != nil {
			switch gcerrors.Code(err) {
			case gcerrors.FailedPrecondition:
				return false, nil
			case gcerrors.NotFound:
				return false, herr.New(herr.NotFound, "consumer %q has no webhook", consumer)
			}
			return false, storeErr(err)
		}
		// The revision the write made is not returned by every driver:
		// read it back only when the caller writes again.
		out = d.view()
		out.revision = nil
		return true, nil
	})
	return out, err
}

// DeleteWebhook removes consumer's webhook record and its attempt log; a
// missing one is no error (deleting a consumer deletes its record after
// the consumer, and a retry must succeed).
func (s *Store) DeleteWebhook(ctx context.Context, consumer string) error {
	if err := s.coll.Delete(ctx, &webhookDoc{Key: webhookKey(consumer)}); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return storeErr(err)
	}
	return s.deleteWebhookAttempts(ctx, consumer)
}

// ListWebhooks returns every webhook record of the collection, in no
// particular order: one query over the webhook records alone, so that a
// push run costs reads in proportion to the webhook destinations, not to
// every consumer and non-durable queue of the deployment. A record whose
// consumer is being created or deleted may be listed; callers read the
// consumer when they need it.
func (s *Store) ListWebhooks(ctx context.Context) ([]*Webhook, error) {
	var out []*Webhook
	err := eachOfKind(ctx, s, kindWebhook, func(d *webhookDoc) error {
		out = append(out, d.view())
		return nil
	})
	return out, err
}
