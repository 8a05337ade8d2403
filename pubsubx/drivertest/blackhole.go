package drivertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/pubsubx"
)

// BlackHoled is an optional Harness capability, implemented by every
// driver that talks to a server over the network: it opens a broker whose
// server is addr ("127.0.0.1:PORT"), a listener that accepts TCP
// connections and never answers (package internal/blackhole). The
// in-memory driver cannot black-hole and does not implement it.
type BlackHoled interface {
	MakeBlackHoledBroker(ctx context.Context, t testing.TB, addr string) (*pubsubx.Broker, error)
}

const (
	// blackHoleCallers is how many calls wait on the black hole at once.
	blackHoleCallers = 8
	// blackHoleDeadline is the deadline of calls that must give up on a
	// server that never answers: Herald's publish bound, shortened.
	blackHoleDeadline = 300 * time.Millisecond
)

// testPing: a live broker answers Ping (the readiness check) with nil, a
// closed one with herr.Unavailable.
func testPing(t *testing.T, f *fixture) {
	b := f.broker()
	p := b
	ctx, cancel := context.WithTimeout(f.ctx, failureBound)
	defer cancel()
	require.NoError(t, p.Ping(ctx), "Ping on a live broker")
	require.NoError(t, p.Ping(ctx), "Ping again")

	require.NoError(t, b.Close())
	err := call(t, "Ping", func() error { return p.Ping(ctx) })
	require.Error(t, err, "Ping on a closed broker must fail")
	require.Equal(t, herr.Unavailable.String(), herr.CodeOf(err).String(), "Ping on a closed broker: %v", err)
}

// results collects the errors of calls started at once, failing the test
// when one has not returned within failureBound (a liveness bound, not a
// speed figure: each call should return within its own deadline).
type results struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (r *results) start(n int, fn func() error) {
	for range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			err := fn()
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}()
	}
}

func (r *results) wait(t *testing.T, what string) []error {
	t.Helper()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(failureBound):
		r.mu.Lock()
		n := len(r.errs)
		r.mu.Unlock()
		t.Fatalf("%s: only %d calls returned within %s; the others wait on the black hole past their context", what, n, failureBound)
	}
	return r.errs
}

// testBlackHoledBroker: against a server that accepts TCP and never
// answers, every call returns when its context ends, concurrent callers
// share one dial instead of dialling in turn (holding a lock through a
// dial made them answer after 10, 20, 30… seconds), and closing the
// broker leaves no connection open.
func testBlackHoledBroker(t *testing.T, f *fixture) {
	h, ok := f.h.(BlackHoled)
	if !ok {
		t.Log("the harness has no black-holed server (BlackHoled); not exercised")
		return
	}
	hole := blackhole.Start(t)
	b, err := h.MakeBlackHoledBroker(f.ctx, t, hole.Addr())
	if err != nil {
		require.True(t, herr.Retryable(err), "opening a black-holed broker: want a retryable code, got %s: %v", herr.CodeOf(err), err)
		t.Logf("opening the black-holed broker failed (retryable, %s); calls not reached", herr.CodeOf(err))
		return
	}
	t.Cleanup(func() { closeQuietly(t, b) })

	// Callers that give up (a client hanging up): contexts without a
	// deadline, cancelled once the driver is dialling.
	ctx, cancel := context.WithCancel(f.ctx)
	var canceled results
	canceled.start(blackHoleCallers, func() error { return b.Send(ctx, f.message("herald.test", "/blackhole")) })
	watch, stop := context.WithTimeout(f.ctx, failureBound)
	require.NoError(t, hole.WaitFor(watch, func(accepted, _ int) bool { return accepted > 0 }), "the driver never dialled the black hole")
	stop()
	cancel()
	for _, err := range canceled.wait(t, "Send cancelled while dialling") {
		require.Error(t, err, "Send to a black hole must fail: a message is never reported sent when it was not")
		code := herr.CodeOf(err)
		require.True(t, herr.Retryable(err) || code == herr.Canceled, "cancelled Send: want a retryable code or canceled, got %s: %v", code, err)
	}
	require.Less(t, hole.Accepted(), blackHoleCallers, "every waiting caller dialled again: dial once, in the background")

	// Callers with a deadline, as Herald's publish bound gives them.
	var timed results
	timed.start(blackHoleCallers, func() error {
		ctx, cancel := context.WithTimeout(f.ctx, blackHoleDeadline)
		defer cancel()
		return b.Send(ctx, f.message("herald.test", "/blackhole"))
	})
	timed.start(1, func() error {
		ctx, cancel := context.WithTimeout(f.ctx, blackHoleDeadline)
		defer cancel()
		_, err := b.Receive(ctx, subName("blackhole"), pubsubx.ReceiveParams{Max: 10, Wait: quietWait})
		return err
	})
	timed.start(2, func() error {
		ctx, cancel := context.WithTimeout(f.ctx, blackHoleDeadline)
		defer cancel()
		return b.Ping(ctx)
	})
	for _, err := range timed.wait(t, "calls with a deadline") {
		require.Error(t, err, "a call on a black-holed broker must fail")
		require.True(t, herr.Retryable(err), "want a retryable code, got %s: %v", herr.CodeOf(err), err)
	}

	// Nothing keeps the black hole busy once the broker is closed.
	require.NoError(t, b.Close(), "Close")
	watch, stop = context.WithTimeout(f.ctx, failureBound)
	defer stop()
	require.NoError(t, hole.WaitFor(watch, func(_, open int) bool { return open == 0 }),
		"connections to the black hole still open after Close: %d", hole.Open())
}
