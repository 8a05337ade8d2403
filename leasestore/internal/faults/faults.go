// Package faults lets leasestore's conformance suite make a store step
// fail on purpose, to check that a failure between two writes never loses
// an event. It is internal to leasestore: applications cannot reach it, and
// production code never sets a hook, so Check is one atomic load.
package faults

import "sync/atomic"

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

var hook atomic.Pointer[func(point, consumer string) error]

// Set makes f decide, at every point, whether the step fails: a non-nil
// error from f is returned as the failure of the write that would follow.
// consumer is the consumer the step works on (for a dead letter: its
// origin). The returned function removes f. Hooks are process-wide, so a
// test filters on its own consumer ids.
func Set(f func(point, consumer string) error) (restore func()) {
	hook.Store(&f)
	return func() { hook.Store(nil) }
}

// Check returns the hook's verdict at point for consumer, or nil when no
// hook is set.
func Check(point, consumer string) error {
	if f := hook.Load(); f != nil {
		return (*f)(point, consumer)
	}
	return nil
}
