package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// failureBound is the context deadline of calls on a closed or unreachable
// broker: they must fail, not hang.
const failureBound = 5 * time.Second

// call runs fn, failing the test instead of crashing it when fn panics.
func call(t testing.TB, name string, fn func() error) error {
	t.Helper()
	var err error
	require.NotPanics(t, func() { err = fn() }, "%s panicked", name)
	return err
}

// testClosedBroker: after Close every call fails with Unavailable (or
// Canceled): never a panic, never nil, never a hang.
func testClosedBroker(t *testing.T, f *fixture) {
	b := f.broker()
	// Clean up through a second client: the closed one cannot delete.
	c2 := f.secondClient(b)
	sub := subName("closed")
	require.NoError(t, b.CreateSubscription(f.ctx, sub, nil), "CreateSubscription")
	f.deleteAtCleanup(c2, sub)
	m := f.message("herald.test", "/closed")
	f.send(b, m)
	held := f.receiveUntil(b, sub, 1, hasCount(1))

	require.NoError(t, b.Close(), "Close")

	ctx, cancel := context.WithTimeout(f.ctx, failureBound)
	defer cancel()
	created := subName("closed")
	f.deleteAtCleanup(c2, created) // in case the closed broker wrongly creates it
	calls := map[string]func() error{
		"Send": func() error { return b.Send(ctx, f.message("herald.test", "/closed")) },
		"Receive": func() error {
			_, err := b.Receive(ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: quietWait})
			return err
		},
		"Ack":                func() error { return b.Ack(ctx, sub, held) },
		"Nack":               func() error { return b.Nack(ctx, sub, held) },
		"CreateSubscription": func() error { return b.CreateSubscription(ctx, created, nil) },
		"UpdateSubscription": func() error { return b.UpdateSubscription(ctx, sub, nil) },
		"DeleteSubscription": func() error { return b.DeleteSubscription(ctx, sub) },
	}
	for _, name := range sortedKeys(calls) {
		err := call(t, name, calls[name])
		require.Error(t, err, "%s on a closed broker must fail", name)
		code := herr.CodeOf(err)
		require.Contains(t, []string{herr.Unavailable.String(), herr.Canceled.String()}, code.String(),
			"%s on a closed broker: want unavailable or canceled, got %v", name, err)
	}

	// Closing one client leaves the others working: the held message is
	// still there for them once its ack deadline passes, and they can
	// manage the subscription.
	_, err := c2.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: 0})
	require.NoError(t, err, "Receive on another client after one closed")
	require.NoError(t, c2.DeleteSubscription(f.ctx, sub), "DeleteSubscription on another client after one closed")
}

// testUnreachableBroker: when the server does not answer, Send and Receive
// fail with a retryable code (herr.Retryable; DeadlineExceeded counts)
// within a bounded context, so Herald answers 503 and callers retry.
func testUnreachableBroker(t *testing.T, f *fixture) {
	ctx, cancel := context.WithTimeout(f.ctx, failureBound)
	defer cancel()
	b, err := f.h.MakeUnreachableBroker(ctx, t)
	if err != nil {
		// A driver that dials when opening fails here; that must be
		// retryable too.
		require.True(t, herr.Retryable(err), "opening an unreachable broker: want a retryable code, got %s: %v", herr.CodeOf(err), err)
		t.Logf("opening the unreachable broker failed (retryable, %s); Send and Receive not reached", herr.CodeOf(err))
		return
	}
	t.Cleanup(func() { closeQuietly(t, b) })

	err = call(t, "Send", func() error { return b.Send(ctx, f.message("herald.test", "/unreachable")) })
	require.Error(t, err, "Send to an unreachable broker must fail: a message is never reported sent when it was not")
	require.True(t, herr.Retryable(err), "Send to an unreachable broker: want a retryable code, got %s: %v", herr.CodeOf(err), err)

	ctx2, cancel2 := context.WithTimeout(f.ctx, failureBound)
	defer cancel2()
	err = call(t, "Receive", func() error {
		_, err := b.Receive(ctx2, subName("unreachable"), pubsubx.ReceiveParams{Max: 10, Wait: quietWait})
		return err
	})
	require.Error(t, err, "Receive from an unreachable broker must fail")
	require.True(t, herr.Retryable(err), "Receive from an unreachable broker: want a retryable code, got %s: %v", herr.CodeOf(err), err)
}
