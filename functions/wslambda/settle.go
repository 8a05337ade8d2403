package wslambda

import (
	"context"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Settle answers an ack or nack frame on a durable stream: the tags are
// taken out of the stored state (delivery.SessionState.Take), then
// settled in the store (delivery.Service.SettleRefsDelayed, with a nack
// frame's delay); a settle that fails
// puts them back, so that the frame may be sent again. A queue that is
// gone is fatal.
func (c *conn) Settle(ctx context.Context, f *wsframe.ClientFrame) {
	acks, nacks := f.Settlement()
	if !c.touch(ctx, f.ID) {
		return
	}
	var ackRefs, nackRefs []leasestore.EventRef
	var taken map[int64]leasestore.EventRef
	var rep delivery.SettleReport
	err := c.update(ctx, func(st *State) error {
		ackRefs, nackRefs, taken, rep = st.Session.Take(acks, nacks)
		return nil
	})
	if err != nil {
		c.Refuse(ctx, f.ID, err)
		return
	}
	final, err := c.h.cfg.Service.SettleRefsDelayed(ctx, c.st.Session, ackRefs, nackRefs, f.NackDelay(), rep)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			c.Fail(ctx, f.ID, err)
			return
		}
		// Put the tags back so that the frame may be sent again.
		if uerr := c.update(ctx, func(st *State) error { st.Session.Untake(taken); return nil }); uerr != nil {
			c.h.log.WarnContext(ctx, "websocket: cannot restore tags after a failed settle; they return to the queue when the session ends", c.errAttrs(uerr)...)
		}
		c.Refuse(ctx, f.ID, err)
		return
	}
	c.send(ctx, wsframe.Settled(f.ID, final))
}

// Extend answers an extend frame on a durable stream: the events of the
// tags the stored state holds stay with the session for the frame's
// seconds (delivery.Service.ExtendTags). The state is read, not written:
// the tags stay unsettled. A queue that is gone is fatal; a store that
// cannot be reached refuses the frame, which may be sent again.
func (c *conn) Extend(ctx context.Context, f *wsframe.ClientFrame) {
	if !c.touch(ctx, f.ID) {
		return
	}
	rep, err := c.h.cfg.Service.ExtendTags(ctx, c.st.Session, f.DeliveryTags, f.ExtendBy())
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			c.Fail(ctx, f.ID, err)
			return
		}
		c.Refuse(ctx, f.ID, err)
		return
	}
	c.send(ctx, wsframe.Extended(f.ID, rep))
}
