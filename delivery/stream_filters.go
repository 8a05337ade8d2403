package delivery

import (
	"context"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// UpdateFilters moves the filters of the stream's non-durable queue from
// previous to next while the stream stays open: the notifications API's filter update
// (ConsumeNonDurableEvents' previous_filter_groups, "Required when
// updating filters"), sent on the open stream instead of by reconnecting.
// The rule is the one OpenStream applies to a reconnect with
// previous_filter_groups: a compare-and-set on the queue's filters
// (groups and filters in any order); a queue that already has next
// succeeds at once, so a retry is safe.
//
// Once it returns nil, the queue's broker subscription and the record
// carry next, and this stream judges every event it takes from the
// broker by next. Events leased before the update are not re-judged:
// those this session holds unsettled, and those requeued by a nack or a
// disconnect, are delivered (again) even when next rejects them. Events
// the queue holds at the broker and next rejects are dropped when they
// come up (as UpdateQueueFilters does). Other streams attached to the
// same queue (clients sharing the reconnect token) pick next up when they
// next meet an event their filters reject, as they do after a reconnect
// with previous_filter_groups.
//
// Only the queue's owner or an administrator may update its filters
// (CheckQueueOwner): a stream that resumed a queue someone else created
// gets herr.PermissionDenied, and the queue and the stream are left as
// they were.
//
// Errors, with nothing changed: herr.PermissionDenied (above);
// herr.InvalidArgument for a durable
// stream (its filters change with UpdateQueueFilters, which needs
// create-durable-queues), for invalid groups (naming filter_groups or
// previous_filter_groups), or when previous is not the queue's filters
// (naming previous_filter_groups); herr.NotFound when the queue is gone;
// the session's error (see Stream) once it is lost; herr.Canceled once
// the stream is closed; the broker's or store's errors otherwise.
func (st *Stream) UpdateFilters(ctx context.Context, previous, next filter.Groups) error {
	if st.kind != NonDurable {
		return herr.New(herr.InvalidArgument, "a durable queue's filters are not updated on its stream: use UpdateDurableQueue (PATCH /api/v1beta/queues/durable)")
	}
	if err := st.check(ctx); err != nil {
		return err
	}
	if err := next.Validate("filter_groups"); err != nil {
		return err
	}
	if err := previous.Validate("previous_filter_groups"); err != nil {
		return err
	}
	if st.hq != nil {
		return st.hubUpdateFilters(ctx, previous, next)
	}
	c, err := st.svc.cfg.Store.GetConsumer(ctx, st.queue)
	if err != nil {
		return st.sessionErr(err)
	}
	if err := CheckQueueOwner(st.p, c); err != nil {
		return err
	}
	if err := st.svc.setFilters(ctx, c, "previous_filter_groups", previous, next); err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return st.sessionErr(err)
		}
		return err
	}
	st.src.mu.Lock()
	st.src.groups = next
	st.src.mu.Unlock()
	return nil
}
