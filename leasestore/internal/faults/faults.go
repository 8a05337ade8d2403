// Package faults lets leasestore's conformance suite make a store step
// fail on purpose, to check that a failure between two writes never loses
// an event. It is internal to leasestore: applications cannot reach it, and
// production code never sets a hook, so Check is one atomic load.
package faults

import (
	"sync"
	"sync/atomic"
)

// Points where leasestore asks Check whether to fail. Each names the write
// that would come next.
const (
	// DeadLetterWrite: dead-letter records are about to be written for
	// leases marked for dead-lettering.
	DeadLetterWrite = "dead-letter-write"
	// DeadLetterRemove: the dead-letter records are written; the consumer
	// record is about to drop the leases they came from.
	DeadLetterRemove = "dead-letter-remove"
	// ReplayConsumerWrite: a replay's payload record is written; the origin
	// consumer record is about to get the requeued lease.
	ReplayConsumerWrite = "replay-consumer-write"
	// ReplayDelete: the replayed event is on its origin consumer; the dead
	// letter is about to be deleted.
	ReplayDelete = "replay-delete"
	// Reserve: a pull's payload is written; the head and the new block are
	// about to be written together.
	Reserve = "reserve"
	// HintLower: a lease's block is written requeued (a failed
	// acknowledgement, a nack); the block's hint in the head is about to be
	// lowered so that pulls read it.
	HintLower = "hint-lower"
	// KeyPublish: an idempotency key is claimed; its publish is about to
	// be sent to the broker. The "consumer" is the idempotency key.
	KeyPublish = "idempotency-publish"
	// KeyComplete: a keyed publish was accepted by the broker; its result
	// is about to be recorded on the key. The "consumer" is the
	// idempotency key.
	KeyComplete = "idempotency-complete"
)

// hooks holds the hooks set now, replaced whole on every Set and restore
// (copy on write under setMu), so that Check stays one atomic load and
// conformance cases running in parallel each keep their own hook.
var (
	hooks atomic.Pointer[[]*hook]
	setMu sync.Mutex
)

// hook is one Set call's function; its address identifies it for removal.
type hook struct {
	f func(point, consumer string) error
}

// Set adds f to the hooks that decide, at every point, whether the step
// fails: a non-nil error from any hook is returned as the failure of the
// write that would follow. consumer is the consumer the step works on (for
// a dead letter: its origin). The returned function removes f (calling it
// again does nothing). Hooks are process-wide and several may be set at
// once (conformance cases run in parallel), so a hook fails only steps on
// its own test's consumer ids or keys and returns nil for the rest.
func Set(f func(point, consumer string) error) (restore func()) {
	h := &hook{f: f}
	setMu.Lock()
	defer setMu.Unlock()
	var next []*hook
	if cur := hooks.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, h)
	hooks.Store(&next)
	return func() {
		setMu.Lock()
		defer setMu.Unlock()
		var rest []*hook
		if cur := hooks.Load(); cur != nil {
			for _, o := range *cur {
				if o != h {
					rest = append(rest, o)
				}
			}
		}
		if len(rest) == 0 {
			hooks.Store(nil)
			return
		}
		hooks.Store(&rest)
	}
}

// Check returns the first non-nil verdict of the hooks at point for
// consumer, or nil when no hook is set or none fails the step.
func Check(point, consumer string) error {
	hs := hooks.Load()
	if hs == nil {
		return nil
	}
	for _, h := range *hs {
		if err := h.f(point, consumer); err != nil {
			return err
		}
	}
	return nil
}
