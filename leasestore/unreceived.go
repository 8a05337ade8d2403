package leasestore

import (
	"context"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Unreceived is an event that was published for a consumer but never
// reached it: the consumer's broker subscription had no room for it (see
// DeadLetterUnreceived).
type Unreceived struct {
	// ID is the event's CloudEvents id. The dead letter's id is derived
	// from it, so writing the same event again does not make a second
	// copy.
	ID string
	// Body is the encoded CloudEvent, as the consumer would have received
	// it.
	Body []byte
}

// unreceivedKey is the key of the dead letter of event id, unreceived by
// consumer in incarnation: "d:<consumer>:<incarnation>:u<event id>". Its
// last part is not a position (those are 20 digits), so it never names
// the dead letter of an event the consumer held.
func unreceivedKey(consumer, incarnation, id string) string {
	return deadLetterPrefix + consumer + ":" + incarnation + ":u" + id
}

// DeadLetterUnreceived puts events that consumer's broker subscription
// could not take straight into the dead-letter queue, with reason
// (ReasonMaxLen for a subscription at its broker's bound), so that a
// consumer that is slow or absent costs its own events a detour through
// the dead-letter queue instead of failing the publish for everyone. The
// events never reached the consumer: they have no position in its
// delivery order and do not move its cursor, their DeliveryCount is 0,
// and their DeadLetter.ID is "<consumer>:<incarnation>:u<event id>".
// They are listed, replayed and discarded like any other dead letter: a
// replay appends the event to the consumer's queue.
//
// One write per event, each an upsert under its deterministic key, so a
// call that fails may be repeated. Errors: herr.InvalidArgument for an
// unknown reason or an event without an id; herr.NotFound when the
// consumer does not exist (nothing is written: no one can receive its
// events any more); the store's errors.
func (s *Store) DeadLetterUnreceived(ctx context.Context, consumer string, events []Unreceived, reason string) error {
	ctx, op := telemetry.StartStore(ctx, "dead_letter_unreceived")
	err := s.deadLetterUnreceived(ctx, consumer, events, reason)
	op.End(ctx, err)
	return err
}

func (s *Store) deadLetterUnreceived(ctx context.Context, consumer string, events []Unreceived, reason string) error {
	if reasonCode(reason) == 0 {
		return herr.New(herr.InvalidArgument, "unknown dead-letter reason %q", reason)
	}
	for _, e := range events {
		if e.ID == "" {
			return herr.New(herr.InvalidArgument, "an unreceived event needs its id")
		}
	}
	if len(events) == 0 {
		return nil
	}
	d, err := s.get(ctx, consumer)
	if err != nil {
		return err
	}
	nowMs := s.nowMs()
	acts := s.coll.Actions()
	for _, e := range events {
		a := readAttrs(e.Body)
		acts.Put(&deadLetterDoc{
			Key: unreceivedKey(d.ID, d.Incarnation, e.ID), Kind: kindDeadLetter,
			Reason: reason, Origin: d.ID, Incarnation: d.Incarnation,
			EventType: a.Type, ResourceID: a.Subject, At: nowMs, Body: e.Body,
		})
	}
	if err := acts.Do(ctx); err != nil {
		return storeErr(err)
	}
	telemetry.DeadLettered(ctx, reason, len(events))
	return nil
}
