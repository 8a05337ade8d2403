package leasestore

import (
	"context"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
)

// The attempt log of a webhook consumer: its most recent delivery
// attempts, for an operator who asks why an endpoint fails. One record
// per consumer, apart from the webhook record, which every push reads:
// the log is written once per push run and read only when asked for.

// Attempt log limits.
const (
	// MaxWebhookAttempts is the most attempts an attempt log keeps; the
	// oldest go first.
	MaxWebhookAttempts = 100
	// WebhookAttemptRetention is how long an attempt stays in the log.
	WebhookAttemptRetention = 24 * time.Hour
	// MaxWebhookAttemptBody is the most bytes of an answer's body kept.
	MaxWebhookAttemptBody = 1024
	// maxWebhookAttemptError bounds an attempt's error text.
	maxWebhookAttemptError = 512
)

// WebhookAttempt is one delivery attempt as the log keeps it.
type WebhookAttempt struct {
	// At is when the attempt started.
	At time.Time
	// WebhookID is the delivery's webhook-id header (an event id, or a
	// lease id for a batch).
	WebhookID string
	// Attempt is the delivery's attempt number, 1 for the first.
	Attempt int64
	// Events counts the events the delivery carried.
	Events int
	// Status is the answer's HTTP status; 0 when there was none (a
	// timeout, a refused or failed connection).
	Status int
	// Latency is how long the attempt took, to the end of the part of
	// the answer read; kept to the millisecond.
	Latency time.Duration
	// Body is the start of the answer's body: at most
	// MaxWebhookAttemptBody bytes, invalid UTF-8 replaced.
	Body string
	// Error says why an attempt without an answer failed ("" otherwise).
	// It never holds the URL.
	Error string
}

type webhookAttemptsDoc struct {
	Key       string   `docstore:"key"`
	Kind      string   `docstore:"kind"`
	Consumer  string   `docstore:"consumer"`
	AtMs      []int64  `docstore:"at_ms"`
	IDs       []string `docstore:"ids"`
	Attempts  []int64  `docstore:"attempts"`
	Events    []int64  `docstore:"events"`
	Statuses  []int64  `docstore:"statuses"`
	LatencyMs []int64  `docstore:"latency_ms"`
	Bodies    []string `docstore:"bodies"`
	Errors    []string `docstore:"errors"`

	DocstoreRevision any
}

const (
	kindWebhookAttempts   = "webhook-attempts"
	webhookAttemptsPrefix = "wha:"
)

func webhookAttemptsKey(consumer string) string {
	return webhookAttemptsPrefix + webhookKey(consumer)[len(webhookPrefix):]
}

// clean bounds a's texts: the body to MaxWebhookAttemptBody bytes, the
// error to maxWebhookAttemptError, both valid UTF-8 (what every store's
// strings must be).
func (a WebhookAttempt) clean() WebhookAttempt {
	a.Body = cut(a.Body, MaxWebhookAttemptBody)
	a.Error = cut(a.Error, maxWebhookAttemptError)
	a.At = time.UnixMilli(a.At.UnixMilli()).UTC()
	a.Latency = a.Latency.Round(time.Millisecond)
	return a
}

func cut(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (d *webhookAttemptsDoc) view() []WebhookAttempt {
	out := make([]WebhookAttempt, 0, len(d.AtMs))
	for i, at := range d.AtMs {
		a := WebhookAttempt{At: time.UnixMilli(at).UTC()}
		if i < len(d.IDs) {
			a.WebhookID = d.IDs[i]
		}
		if i < len(d.Attempts) {
			a.Attempt = d.Attempts[i]
		}
		if i < len(d.Events) {
			a.Events = int(d.Events[i])
		}
		if i < len(d.Statuses) {
			a.Status = int(d.Statuses[i])
		}
		if i < len(d.LatencyMs) {
			a.Latency = time.Duration(d.LatencyMs[i]) * time.Millisecond
		}
		if i < len(d.Bodies) {
			a.Body = d.Bodies[i]
		}
		if i < len(d.Errors) {
			a.Error = d.Errors[i]
		}
		out = append(out, a)
	}
	return out
}

func (d *webhookAttemptsDoc) set(as []WebhookAttempt) {
	d.AtMs, d.IDs, d.Attempts, d.Events, d.Statuses, d.LatencyMs, d.Bodies, d.Errors = nil, nil, nil, nil, nil, nil, nil, nil
	for _, a := range as {
		d.AtMs = append(d.AtMs, a.At.UnixMilli())
		d.IDs = append(d.IDs, a.WebhookID)
		d.Attempts = append(d.Attempts, a.Attempt)
		d.Events = append(d.Events, int64(a.Events))
		d.Statuses = append(d.Statuses, int64(a.Status))
		d.LatencyMs = append(d.LatencyMs, a.Latency.Milliseconds())
		d.Bodies = append(d.Bodies, a.Body)
		d.Errors = append(d.Errors, a.Error)
	}
}

// AppendWebhookAttempts adds attempts to consumer's attempt log, which
// then keeps the MaxWebhookAttempts most recent of those not older than
// WebhookAttemptRetention (by the store's clock), oldest first. One read
// and one conditional write, run again when another write came first.
// Texts are bounded as WebhookAttempt says.
func (s *Store) AppendWebhookAttempts(ctx context.Context, consumer string, attempts []WebhookAttempt) error {
	if len(attempts) == 0 {
		return nil
	}
	add := make([]WebhookAttempt, len(attempts))
	for i, a := range attempts {
		add[i] = a.clean()
	}
	return s.retry(ctx, func() (bool, error) {
		d := &webhookAttemptsDoc{Key: webhookAttemptsKey(consumer)}
		err := s.coll.Get(ctx, d)
		fresh := gcerrors.Code(err) == gcerrors.NotFound
		if err != nil && !fresh {
			return false, storeErr(err)
		}
		cutoff := s.opts.Now().Add(-WebhookAttemptRetention)
		var keep []WebhookAttempt
		for _, a := range append(d.view(), add...) {
			if !a.At.Before(cutoff) {
				keep = append(keep, a)
			}
		}
		if len(keep) > MaxWebhookAttempts {
			keep = keep[len(keep)-MaxWebhookAttempts:]
		}
		d.Kind, d.Consumer = kindWebhookAttempts, consumer
		d.set(keep)
		if fresh {
			d.DocstoreRevision = nil
			err = s.coll.Create(ctx, d)
		} else {
			err = s.coll.Replace(ctx, d)
		}
		switch gcerrors.Code(err) {
		case gcerrors.OK:
			return true, nil
		case gcerrors.AlreadyExists, gcerrors.FailedPrecondition, gcerrors.NotFound:
			return false, nil // another write came first: read again
		}
		return false, storeErr(err)
	})
}

// WebhookAttempts returns consumer's attempt log, newest first, without
// the attempts past WebhookAttemptRetention; none when it has none. One
// read.
func (s *Store) WebhookAttempts(ctx context.Context, consumer string) ([]WebhookAttempt, error) {
	d := &webhookAttemptsDoc{Key: webhookAttemptsKey(consumer)}
	if err := s.coll.Get(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, nil
		}
		return nil, storeErr(err)
	}
	cutoff := s.opts.Now().Add(-WebhookAttemptRetention)
	all := d.view()
	out := make([]WebhookAttempt, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		if !all[i].At.Before(cutoff) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// deleteWebhookAttempts removes consumer's attempt log; a missing one is
// no error.
func (s *Store) deleteWebhookAttempts(ctx context.Context, consumer string) error {
	if err := s.coll.Delete(ctx, &webhookAttemptsDoc{Key: webhookAttemptsKey(consumer)}); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return storeErr(err)
	}
	return nil
}
