package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local"
)

// newClock returns a controllable time source for local.WithClock: it
// starts at the real time and moves only when told.
func newClock() *testkit.Clock { return testkit.NewClock(time.Now().UTC().Truncate(time.Millisecond)) }

// hookTransport calls hook with the path and status of every answered
// request, before the client sees the answer, so that a test can move the
// server's clock in step with what the client does.
type hookTransport struct {
	hook func(path string, status int)
}

func (h hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		h.hook(r.URL.Path, res.StatusCode)
	}
	return res, err
}

// setupHooked starts a Herald on clk and a client whose calls pass hook.
func setupHooked(t *testing.T, clk *testkit.Clock, hook func(path string, status int)) *bundle {
	t.Helper()
	h := local.Start(t, local.WithClock(clk.Now))
	c, err := client.New(h.URL, client.WithToken(h.Token), client.WithHTTPClient(&http.Client{Transport: hookTransport{hook}}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &bundle{h: h, c: c}
}

func TestExtendRetryAfterReject(t *testing.T) {
	t.Parallel()
	clk := newClock()
	b := setup(t, local.WithClock(clk.Now))
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "/x/1", nil)

	l, err := b.c.Pull(ctx, d.ID, client.PullOptions{Limit: 1, Visibility: 10 * time.Second, WorkerID: "w1"})
	require.NoError(t, err)
	require.NotNil(t, l)

	_, err = b.c.Extend(ctx, d.ID, l, 1500*time.Millisecond)
	require.Error(t, err, "not whole seconds")
	_, err = b.c.Extend(ctx, d.ID, l, 601*time.Second)
	require.Error(t, err, "above 600 s")
	_, err = b.c.AcknowledgeWith(ctx, d.ID, l, client.Ack{Status: client.AckOK, RetryAfter: time.Second})
	require.Error(t, err, "retryAfter only with failed")

	res, err := b.c.Extend(ctx, d.ID, l, 600*time.Second)
	require.NoError(t, err)
	require.Equal(t, client.OutcomeExtended, res.Outcome)
	assert.True(t, res.ExpiresAt.Equal(clk.Now().Add(600*time.Second)), "expiresAt %v", res.ExpiresAt)

	clk.Advance(300 * time.Second) // past the pull's 10 s, within the extension
	other, err := b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w2"})
	require.NoError(t, err)
	assert.Nil(t, other, "the extended lease is still w1's")

	ack, err := b.c.AcknowledgeWith(ctx, d.ID, l, client.Ack{Status: client.AckFailed, RetryAfter: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, client.OutcomeRequeued, ack.Outcome)
	clk.Advance(29 * time.Second)
	again, err := b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w2"})
	require.NoError(t, err)
	assert.Nil(t, again, "not handed out before its retryAfter")
	clk.Advance(2 * time.Second)
	again, err = b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w2"})
	require.NoError(t, err)
	require.NotNil(t, again, "handed out once its retryAfter passed")
	assert.Greater(t, again.Attempt, l.Attempt)
	assert.Greater(t, again.Generation, l.Generation)

	stale, err := b.c.Extend(ctx, d.ID, l, 10*time.Second)
	require.NoError(t, err, "a stale extension is an answer, not an error")
	assert.Equal(t, client.OutcomeStale, stale.Outcome)
	assert.True(t, stale.ExpiresAt.IsZero())

	ack, err = b.c.AcknowledgeWith(ctx, d.ID, again, client.Ack{Status: client.AckRejected})
	require.NoError(t, err)
	assert.Equal(t, client.OutcomeDeadLettered, ack.Outcome)
	dls, err := b.c.AllDeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "REJECTED", dls[0].Reason)
	assert.Equal(t, "/x/1", dls[0].ResourceID)
}

func TestExtendPastLeaseLife(t *testing.T) {
	t.Parallel()
	clk := newClock()
	b := setup(t, local.WithClock(clk.Now))
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "", nil)
	l, err := b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "w"})
	require.NoError(t, err)
	require.NotNil(t, l)
	handedOut := clk.Now()
	for clk.Now().Add(600 * time.Second).Before(handedOut.Add(client.MaxLeaseLife)) {
		res, err := b.c.Extend(ctx, d.ID, l, 600*time.Second)
		require.NoError(t, err)
		require.Equal(t, client.OutcomeExtended, res.Outcome)
		clk.Advance(590 * time.Second)
	}
	_, err = b.c.Extend(ctx, d.ID, l, 600*time.Second)
	assert.Equal(t, http.StatusBadRequest, client.StatusCode(err), "past the 12-hour life: %v", err)
}

func TestConsumerPolicies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	plain, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, plain.RetryPolicy)
	assert.Nil(t, plain.DeadLetterPolicy)

	d, err := b.c.CreateConsumerWith(ctx, client.ConsumerOptions{
		RetryPolicy:      &client.ConsumerRetryPolicy{MinimumBackoff: time.Second, MaximumBackoff: time.Minute},
		DeadLetterPolicy: &client.DeadLetterPolicy{MaxDeliveryAttempts: 3},
	})
	require.NoError(t, err)
	require.NotNil(t, d.RetryPolicy)
	assert.Equal(t, client.ConsumerRetryPolicy{MinimumBackoff: time.Second, MaximumBackoff: time.Minute}, *d.RetryPolicy)
	require.NotNil(t, d.DeadLetterPolicy)
	assert.Equal(t, 3, d.DeadLetterPolicy.MaxDeliveryAttempts)

	u, err := b.c.UpdateConsumer(ctx, d.ID, client.PolicyUpdate{DeadLetterPolicy: &client.DeadLetterPolicy{MaxDeliveryAttempts: 5}})
	require.NoError(t, err)
	require.NotNil(t, u.RetryPolicy, "an absent policy stays as it is")
	assert.Equal(t, time.Minute, u.RetryPolicy.MaximumBackoff)
	require.NotNil(t, u.DeadLetterPolicy)
	assert.Equal(t, 5, u.DeadLetterPolicy.MaxDeliveryAttempts)

	u, err = b.c.UpdateConsumer(ctx, d.ID, client.PolicyUpdate{RemoveRetryPolicy: true})
	require.NoError(t, err)
	assert.Nil(t, u.RetryPolicy, "removed")
	got, err := b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.Nil(t, got.RetryPolicy)
	require.NotNil(t, got.DeadLetterPolicy)
	assert.Equal(t, 5, got.DeadLetterPolicy.MaxDeliveryAttempts)

	_, err = b.c.UpdateConsumer(ctx, d.ID, client.PolicyUpdate{DeadLetterPolicy: &client.DeadLetterPolicy{MaxDeliveryAttempts: 0}})
	assert.Error(t, err, "max_delivery_attempts out of range")
	_, err = b.c.UpdateConsumer(ctx, "no-such-consumer", client.PolicyUpdate{RemoveDeadLetterPolicy: true})
	assert.True(t, client.IsNotFound(err), "%v", err)
}

// TestConsumeExtendsLease holds a lease in the handler for longer than its
// visibility on Herald's clock: each extension Consume sends moves the
// server's clock 0.9 s on, so after three the 1 s visibility is long past,
// and the lease must still be the worker's.
func TestConsumeExtendsLease(t *testing.T) {
	t.Parallel()
	clk := newClock()
	extends := make(chan struct{}, 100)
	b := setupHooked(t, clk, func(path string, status int) {
		if strings.HasSuffix(path, "/extend") && status == http.StatusOK {
			clk.Advance(900 * time.Millisecond)
			extends <- struct{}{}
		}
	})
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "", nil)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var calls atomic.Int32
	err = b.c.Consume(cctx, d.ID, func(hctx context.Context, l *client.Lease) error {
		calls.Add(1)
		defer cancel()
		start := clk.Now()
		for range 3 {
			select {
			case <-extends:
			case <-hctx.Done():
				t.Errorf("the handler's context ended: %v", context.Cause(hctx))
				return hctx.Err()
			case <-ctx.Done():
				t.Errorf("Consume did not extend the lease")
				return ctx.Err()
			}
		}
		assert.Greater(t, clk.Now().Sub(start), 2*time.Second, "the server's clock is past the visibility")
		other, err := b.c.Pull(ctx, d.ID, client.PullOptions{WorkerID: "other"})
		assert.NoError(t, err)
		assert.Nil(t, other, "the extended lease is not handed to another worker")
		assert.NoError(t, hctx.Err())
		return nil
	}, client.ConsumeOptions{Limit: 1, Visibility: time.Second, IdleBackoff: 10 * time.Millisecond, MaxIdleBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, int32(1), calls.Load())

	got, err := b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	assert.Zero(t, got.InFlight)
	require.NotNil(t, got.Committed, "the acknowledgement after the extensions committed")
}

// TestConsumeLostLease acknowledges the handler's lease behind Consume's
// back: the next extension is stale and ends the handler's context with
// ErrLeaseLost.
func TestConsumeLostLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "", nil)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cause error
	err = b.c.Consume(cctx, d.ID, func(hctx context.Context, l *client.Lease) error {
		defer cancel()
		res, err := b.c.Acknowledge(ctx, d.ID, l, client.AckOK)
		require.NoError(t, err)
		require.Equal(t, client.OutcomeCommitted, res.Outcome)
		select {
		case <-hctx.Done():
			cause = context.Cause(hctx)
		case <-ctx.Done():
		}
		return nil
	}, client.ConsumeOptions{Limit: 1, Visibility: 2 * time.Second})
	require.NoError(t, err)
	assert.ErrorIs(t, cause, client.ErrLeaseLost)
}

// TestConsumeMaxExtension: the handler's context has the lease's extended
// life as its deadline, and ends then with ErrLeaseExpired.
func TestConsumeMaxExtension(t *testing.T) {
	t.Parallel()
	var extended atomic.Int32
	b := setupHooked(t, newClock(), func(path string, status int) {
		if strings.HasSuffix(path, "/extend") && status == http.StatusOK {
			extended.Add(1)
		}
	})
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "", nil)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cause error
	var hasDeadline bool
	err = b.c.Consume(cctx, d.ID, func(hctx context.Context, l *client.Lease) error {
		defer cancel()
		_, hasDeadline = hctx.Deadline()
		select {
		case <-hctx.Done():
			cause = context.Cause(hctx)
		case <-ctx.Done():
		}
		return nil
	}, client.ConsumeOptions{Limit: 1, Visibility: time.Second, MaxExtension: 2 * time.Second})
	require.NoError(t, err)
	assert.True(t, hasDeadline)
	assert.ErrorIs(t, cause, client.ErrLeaseExpired)
	assert.Positive(t, extended.Load(), "the lease was extended before its life ran out")
}

// TestConsumeRejections: a DeadLetter rejection dead-letters its batch at
// once; a RetryAfter of 1.5 s is rounded up to 2 s, so the batch is not
// handed out again one second (on Herald's clock) after it failed.
func TestConsumeRejections(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var acks, emptyAfterFail atomic.Int32
	var due atomic.Bool
	b := setupHooked(t, clk, func(path string, status int) {
		switch {
		case strings.HasSuffix(path, "/acknowledge") && status == http.StatusOK:
			if acks.Add(1) == 2 {
				clk.Advance(time.Second)
			}
		case strings.HasSuffix(path, "/pull") && status == http.StatusNoContent && acks.Load() == 2:
			if emptyAfterFail.Add(1) == 3 {
				due.Store(true)
				clk.Advance(time.Second)
			}
		}
	})
	ctx := testContext(t)
	d, err := b.c.CreateConsumer(ctx, nil)
	require.NoError(t, err)
	b.publish(t, "a.b", "/poison", nil)
	b.publish(t, "a.b", "/flaky", nil)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var seen []string
	err = b.c.Consume(cctx, d.ID, func(hctx context.Context, l *client.Lease) error {
		sub := l.Events[0].Subject()
		seen = append(seen, sub)
		switch {
		case sub == "/poison":
			return &client.Rejection{Err: errors.New("cannot parse"), DeadLetter: true, RetryAfter: time.Hour}
		case l.Attempt == 1:
			return &client.Rejection{Err: errors.New("busy"), RetryAfter: 1500 * time.Millisecond}
		}
		assert.True(t, due.Load(), "redelivered before its retryAfter")
		cancel()
		return nil
	}, client.ConsumeOptions{Limit: 1, IdleBackoff: 10 * time.Millisecond, MaxIdleBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, []string{"/poison", "/flaky", "/flaky"}, seen)
	assert.GreaterOrEqual(t, emptyAfterFail.Load(), int32(3))

	dls, err := b.c.AllDeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "REJECTED", dls[0].Reason)
	assert.Equal(t, "/poison", dls[0].ResourceID)
}
