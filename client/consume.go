package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Handler processes one leased batch. Returning nil acknowledges it ok
// (committed); returning an error acknowledges it failed, so it is
// redelivered, ahead of new work, with a higher attempt, or as a
// *Rejection says (later, or to the dead-letter queue).
//
// Consume keeps the lease while the handler runs by extending it (see
// ConsumeOptions.MaxExtension). The context's deadline is the end of the
// lease's extended life, with cause ErrLeaseExpired; it is cancelled
// sooner, with cause ErrLeaseLost, when an extension answers stale (the
// lease is no longer this worker's), and with ErrLeaseExpired when
// extensions failed until the lease ran out. It is not cancelled when
// Consume is asked to stop, so that the batch in hand can be finished. A
// panicking handler is not recovered.
type Handler func(ctx context.Context, l *Lease) error

// Causes of a handler context's end (context.Cause).
var (
	// ErrLeaseExpired: the lease's life ran out (MaxExtension reached, or
	// extensions failed until its expiry); Herald may hand it out again.
	ErrLeaseExpired = errors.New("herald client: the lease expired")
	// ErrLeaseLost: an extension answered stale, the lease was acknowledged
	// or handed to another worker; this worker's acknowledgement will be
	// stale too.
	ErrLeaseLost = errors.New("herald client: the lease is no longer this worker's")
)

// Rejection is a handler error that says how a batch failed. Any other
// non-nil error counts as a Rejection with only Err set: the batch is
// acknowledged failed and redelivered as the consumer's retry policy says
// (at once without one).
type Rejection struct {
	// Err is why the batch failed; Consume logs it.
	Err error
	// RetryAfter delays the redelivery: the batch is acknowledged failed
	// with retryAfter, rounded up to whole seconds and at most
	// MaxRetryAfter (12 h), and nobody is handed it before then while
	// other work flows. Zero (or negative): no delay of its own, the
	// consumer's retry policy applies.
	RetryAfter time.Duration
	// DeadLetter gives up on the batch: it is acknowledged rejected and its
	// events go to the dead-letter queue at once. It wins over RetryAfter.
	DeadLetter bool
}

func (r *Rejection) Error() string {
	if r.Err == nil {
		return "batch rejected"
	}
	return r.Err.Error()
}

func (r *Rejection) Unwrap() error { return r.Err }

// DefaultMaxExtension is ConsumeOptions.MaxExtension's default.
const DefaultMaxExtension = time.Hour

// ConsumeOptions configure Consume. Zero fields take the defaults given.
type ConsumeOptions struct {
	// Workers is how many pull loops run at once (default 1). Each has its
	// own workerId: WorkerPrefix + "-" + its index.
	Workers int
	// WorkerPrefix names the workers (default "herald-" and 8 random hex
	// digits, fresh per Consume call). Set a stable prefix to have a
	// restarted process take back the leases its workers held.
	WorkerPrefix string
	// Limit is the most events per batch, 1–100 (default 20).
	Limit int
	// Visibility is each lease's visibility timeout, whole seconds from 1 s
	// to 600 s (default 60 s), and what each extension asks for.
	Visibility time.Duration
	// MaxExtension is how long a handler may keep a lease, from when it is
	// handed out (default 1 h; 0 keeps the default; at most MaxLeaseLife,
	// 12 h). While the handler runs, Consume extends the lease
	// (POST …/extend) when half of Visibility is left, each time by
	// Visibility, and the last time just up to MaxExtension; the handler's
	// context ends then. A negative MaxExtension never extends: the
	// handler must finish within Visibility.
	MaxExtension time.Duration
	// IdleBackoff is the first wait after a pull that found nothing (204)
	// or a paused consumer (409); consecutive ones double it up to
	// MaxIdleBackoff. Defaults 250 ms and 5 s. Waits are jittered.
	IdleBackoff    time.Duration
	MaxIdleBackoff time.Duration
	// AckTimeout bounds the acknowledgement of a batch, with its retries,
	// which is sent even after Consume is asked to stop (default 30 s).
	AckTimeout time.Duration
	// Logger receives failed handlers, stale acknowledgements and errors
	// Consume recovers from (default: discarded).
	Logger *slog.Logger
}

func (o *ConsumeOptions) setDefaults() error {
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.WorkerPrefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.WorkerPrefix = "herald-" + hex.EncodeToString(b[:])
	}
	if o.IdleBackoff == 0 {
		o.IdleBackoff = 250 * time.Millisecond
	}
	if o.MaxIdleBackoff == 0 {
		o.MaxIdleBackoff = 5 * time.Second
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = 30 * time.Second
	}
	if o.Visibility == 0 {
		o.Visibility = DefaultVisibility
	}
	if o.MaxExtension == 0 {
		o.MaxExtension = DefaultMaxExtension
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case o.Workers < 0:
		return errors.New("herald client: ConsumeOptions.Workers must not be negative")
	case o.Limit < 0 || o.Limit > MaxPullLimit:
		return fmt.Errorf("herald client: ConsumeOptions.Limit must be 0 (default) or 1-%d", MaxPullLimit)
	case o.Visibility < time.Second || o.Visibility > MaxVisibility || o.Visibility%time.Second != 0:
		return fmt.Errorf("herald client: ConsumeOptions.Visibility must be whole seconds from 1s to %v", MaxVisibility)
	case len(o.WorkerPrefix)+1+len(fmt.Sprint(o.Workers)) > MaxWorkerIDLength:
		return fmt.Errorf("herald client: ConsumeOptions.WorkerPrefix is too long: a workerId has at most %d characters", MaxWorkerIDLength)
	case o.MaxExtension > MaxLeaseLife:
		return fmt.Errorf("herald client: ConsumeOptions.MaxExtension must be at most %v", MaxLeaseLife)
	case o.IdleBackoff < 0 || o.MaxIdleBackoff < o.IdleBackoff || o.AckTimeout < 0:
		return errors.New("herald client: ConsumeOptions backoffs must be positive, MaxIdleBackoff at least IdleBackoff")
	}
	return nil
}

// Consume runs opts.Workers pull workers on the durable consumer
// destinationID until ctx is cancelled or an error retrying cannot fix
// (the consumer deleted, a token refused). Each worker pulls a batch, runs
// h while extending the lease (see ConsumeOptions.MaxExtension), and
// acknowledges the batch ok (h returned nil), failed (h returned an error;
// with retryAfter for a *Rejection with RetryAfter) or rejected (a
// *Rejection with DeadLetter). Workers back off, with jitter, when the consumer is caught up
// (204) or paused (409), wait for the Retry-After of a full in-flight
// window (429), and keep going through outages (connection errors, 503)
// after the client's own retries.
//
// When ctx is cancelled Consume stops gracefully: every worker finishes
// the batch it holds and acknowledges it, and no worker pulls again. A
// pull cut short by the cancellation may leave a lease nobody handles;
// Herald redelivers it when its visibility timeout ends. Consume returns
// nil after a graceful stop, else the first error that stopped it (the
// other workers stop gracefully too).
func (c *Client) Consume(ctx context.Context, destinationID string, h Handler, opts ConsumeOptions) error {
	if err := opts.setDefaults(); err != nil {
		return err
	}
	if h == nil {
		return errors.New("herald client: Consume needs a handler")
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	for i := range opts.Workers {
		w := &worker{c: c, dest: destinationID, h: h, opts: &opts, id: fmt.Sprintf("%s-%d", opts.WorkerPrefix, i)}
		wg.Go(func() {
			if err := w.run(ctx); err != nil {
				stop(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// worker is one pull loop of Consume.
type worker struct {
	c    *Client
	dest string
	h    Handler
	opts *ConsumeOptions
	id   string
}

// run pulls and handles until ctx ends (nil) or a fatal error (returned).
func (w *worker) run(ctx context.Context) error {
	idle := 0 // consecutive pulls that found nothing to do
	for ctx.Err() == nil {
		l, err := w.c.Pull(ctx, w.dest, PullOptions{Limit: w.opts.Limit, Visibility: w.opts.Visibility, WorkerID: w.id})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait, fatal := w.classify("pull", err)
			if fatal {
				return err
			}
			idle++
			_ = sleep(ctx, max(wait, jitter(backoffCeiling(w.opts.IdleBackoff, w.opts.MaxIdleBackoff, idle))))
			continue
		}
		if l == nil { // caught up
			idle++
			_ = sleep(ctx, jitter(backoffCeiling(w.opts.IdleBackoff, w.opts.MaxIdleBackoff, idle)))
			continue
		}
		idle = 0
		if err := w.handle(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// classify sorts an error of op (pull, acknowledge): a wait for the ones a
// worker outlasts (paused, window full, outages), fatal for the rest.
func (w *worker) classify(op string, err error) (wait time.Duration, fatal bool) {
	var he *Error
	if errors.As(err, &he) {
		switch {
		case he.StatusCode == http.StatusConflict: // paused
			return 0, false
		case retryableStatus(he.StatusCode): // 429: Retry-After; 502-504 outlasted retries
			if he.StatusCode != http.StatusTooManyRequests {
				w.opts.Logger.Warn("herald consume: "+op+" failed; going on", "worker", w.id, "err", err)
			}
			return he.RetryAfter, false
		}
		return 0, true
	}
	// A transport failure that outlasted the client's retries.
	w.opts.Logger.Warn("herald consume: "+op+" failed; going on", "worker", w.id, "err", err)
	return 0, false
}

// handle runs the handler on l, keeping its lease, and acknowledges it. It
// returns an error only when the acknowledgement shows Consume must stop.
func (w *worker) handle(ctx context.Context, l *Lease) error {
	// The batch in hand is finished even when ctx is cancelled, within
	// its lease. ExpiresAt is on Herald's clock: a skewed local clock
	// falls back to the visibility asked for. The keeper works on the
	// local clock from here on, so skew does not matter after the pull.
	start := time.Now()
	remaining := time.Until(l.ExpiresAt)
	if remaining <= 0 || remaining > w.opts.Visibility {
		remaining = w.opts.Visibility
	}
	expiry := start.Add(remaining)
	limit := expiry
	if w.opts.MaxExtension > 0 && start.Add(w.opts.MaxExtension).After(limit) {
		limit = start.Add(w.opts.MaxExtension)
	}
	base, lose := context.WithCancelCause(context.WithoutCancel(ctx))
	hctx, cancel := context.WithDeadlineCause(base, limit, ErrLeaseExpired)
	done := make(chan struct{})
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		w.keep(hctx, l, expiry, limit, done, lose)
	}()
	herr := w.h(hctx, l)
	close(done)
	<-kept
	cancel()
	lose(nil)

	ack := Ack{Status: AckOK}
	if herr != nil {
		var rej *Rejection
		if !errors.As(herr, &rej) {
			rej = &Rejection{Err: herr}
		}
		ack = rejectionAck(rej)
		w.opts.Logger.Warn("herald consume: handler failed; batch acknowledged "+string(ack.Status),
			"worker", w.id, "lease", l.ID, "attempt", l.Attempt, "retryAfter", ack.RetryAfter, "err", rej.Err)
	}
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.AckTimeout)
	defer acancel()
	res, err := w.c.AcknowledgeWith(actx, w.dest, l, ack)
	switch {
	case err != nil:
		if _, fatal := w.classify("acknowledge", err); fatal {
			return err
		}
		// Not acknowledged: Herald redelivers the lease when it expires.
		w.opts.Logger.Warn("herald consume: acknowledge failed; the lease will be redelivered", "worker", w.id, "lease", l.ID, "err", err)
	case res.Outcome == OutcomeStale:
		w.opts.Logger.Warn("herald consume: acknowledgement was stale: the lease had expired and was handed out again",
			"worker", w.id, "lease", l.ID)
	}
	return nil
}

// rejectionAck is the acknowledgement a Rejection asks for.
func rejectionAck(r *Rejection) Ack {
	if r.DeadLetter {
		return Ack{Status: AckRejected}
	}
	a := Ack{Status: AckFailed}
	if r.RetryAfter > 0 {
		// Whole seconds, rounded up: a delay asked for is never shortened.
		a.RetryAfter = min((r.RetryAfter + time.Second - 1).Truncate(time.Second), MaxRetryAfter)
	}
	return a
}

// keep extends l while the handler runs (until done closes): each time
// half of the visibility is left before expiry (local clock), by the
// visibility, the last time only up to limit. A stale answer ends the
// handler's context with ErrLeaseLost; failed extensions are retried until
// the lease expires, which ends it with ErrLeaseExpired. A 4xx other than
// 429 (such as past the lease's 12-hour life) stops extending: the lease
// then lasts until its current expiry.
func (w *worker) keep(hctx context.Context, l *Lease, expiry, limit time.Time, done <-chan struct{}, lose context.CancelCauseFunc) {
	vis := w.opts.Visibility
	next := expiry.Add(-vis / 2)
	for expiry.Before(limit) {
		t := time.NewTimer(time.Until(next))
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		now := time.Now()
		if !now.Before(expiry) {
			lose(ErrLeaseExpired)
			return
		}
		// Whole seconds, rounded up, so the lease reaches limit.
		v := min(vis, max(time.Second, (limit.Sub(now)+time.Second-1).Truncate(time.Second)))
		ectx, cancel := context.WithDeadline(hctx, expiry)
		res, err := w.c.Extend(ectx, w.dest, l, v)
		cancel()
		var he *Error
		switch {
		case err == nil && res.Outcome == OutcomeStale:
			w.opts.Logger.Warn("herald consume: the lease was lost: extend answered stale", "worker", w.id, "lease", l.ID)
			lose(ErrLeaseLost)
			return
		case err == nil:
			expiry = now.Add(v)
			next = expiry.Add(-vis / 2)
		case errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500 && he.StatusCode != http.StatusTooManyRequests:
			w.opts.Logger.Warn("herald consume: extend refused; the lease is kept until it expires", "worker", w.id, "lease", l.ID, "err", err)
			<-done
			return
		default:
			select {
			case <-done: // the handler returned while extending
				return
			default:
			}
			// Retry soon, before the lease runs out.
			w.opts.Logger.Warn("herald consume: extend failed; retrying", "worker", w.id, "lease", l.ID, "err", err)
			next = time.Now().Add(min(time.Until(expiry)/2, time.Second))
		}
	}
	<-done
}
