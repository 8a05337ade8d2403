package wslambda

import (
	"context"
	"errors"
	"time"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Demand answers a demand frame: on an event stream, bounded pulls of up
// to n events (delivery.Service.PollSession), tagged and stored before
// they are posted, then idle for what was not found; on a dead_letters
// stream, demandDeadLetters.
func (c *conn) Demand(ctx context.Context, f *wsframe.ClientFrame) {
	if c.st.Stream == wsframe.StreamDeadLetters {
		c.demandDeadLetters(ctx, f)
		return
	}
	p := c.st.principal()
	deadline := c.budgetEnd
	durable := c.st.Stream == wsframe.StreamDurable
	sent, wait := 0, c.h.cfg.PollWait
	var postErr error // the first failed post (not too large, not gone)
	for sent < f.N && time.Now().Before(deadline) {
		// One pull has at most delivery.MaxPullLimit events (and, on a
		// durable stream, the unsettled room): pull again, without
		// waiting, as long as pulls find events, up to n.
		ds, err := c.h.cfg.Service.PollSession(ctx, delivery.PollParams{
			Principal: p, State: c.st.Session, Limit: f.N - sent,
			Wait: min(wait, time.Until(deadline)), TTL: c.h.cfg.SessionTTL,
		})
		if err != nil {
			if lost(err) {
				c.Fail(ctx, f.ID, err)
			} else {
				c.Refuse(ctx, f.ID, err)
			}
			return
		}
		if len(ds) == 0 {
			break
		}
		// Tag and persist before anything is posted.
		err = c.update(ctx, func(st *State) error {
			if st.Session == nil {
				return herr.New(herr.FailedPrecondition, "the stream was closed")
			}
			st.Session.Tag(ds)
			return nil
		})
		if err != nil {
			// The events stay leased to the session, untagged: they return
			// to the queue when it ends or lapses, or their ack timeout
			// passes.
			c.Refuse(ctx, f.ID, err)
			return
		}
		var posted, unposted []delivery.Delivery
		gone := false
		for i, d := range ds {
			if postErr != nil || !time.Now().Before(deadline) {
				unposted = append(unposted, ds[i:]...)
				break
			}
			tag := d.Tag
			if !durable {
				tag = 0 // acknowledged once posted: nothing to settle
			}
			err := c.postFrame(ctx, wsframe.Event(d, tag), deadline)
			switch {
			case err == nil:
				posted = append(posted, d)
			case errors.Is(err, apigwmgmt.ErrGone):
				// The client left: hand back what it did not get; its
				// $disconnect ends the session.
				gone = true
				unposted = append(unposted, ds[i:]...)
			case durable && tooLarge(err):
				// It never fits: the tag stays for the client to nack
				// (after the delivery limit it is dead-lettered).
				c.Refuse(ctx, f.ID, herr.New(herr.ResourceExhausted, "event with delivery_tag %d could not be posted to this connection (API Gateway messages are at most 128 KB); nack it to return it to the queue", d.Tag))
			default:
				postErr = err
				unposted = append(unposted, d)
			}
			if gone {
				break
			}
		}
		if len(unposted) > 0 {
			c.handBack(ctx, unposted)
		}
		if !durable && len(posted) > 0 {
			if err := c.h.cfg.Service.AckDeliveries(ctx, c.st.Session, posted); err != nil {
				c.Refuse(ctx, f.ID, err)
				return
			}
		}
		if gone {
			return
		}
		sent += len(posted)
		if postErr != nil || len(unposted) > 0 {
			break
		}
		wait = 0 // more may be there: look again at once
	}
	if postErr != nil {
		c.Refuse(ctx, f.ID, herr.New(herr.Unavailable, "events could not be posted to this connection (%s); they were returned to the queue and will be delivered again: send demand again", herr.MessageOf(postErr)))
	}
	if sent < f.N {
		c.send(ctx, wsframe.Idle(f.N-sent))
	}
}

// handBack returns deliveries that were tagged and persisted but not
// posted to the queue at once: a durable stream's tags are taken out of
// the state (the client never saw them) and their events nacked; a
// non-durable stream's events are nacked. Both are delivered again at
// once, rather than after their ack timeout. A failure is logged: the
// events then return when the session ends or their ack timeout passes.
func (c *conn) handBack(ctx context.Context, ds []delivery.Delivery) {
	var nackRefs []leasestore.EventRef
	var rep delivery.SettleReport
	if c.st.Stream == wsframe.StreamDurable {
		tags := make([]int64, len(ds))
		for i, d := range ds {
			tags[i] = d.Tag
		}
		err := c.update(ctx, func(st *State) error {
			if st.Session == nil {
				return herr.New(herr.FailedPrecondition, "the stream was closed")
			}
			_, nackRefs, _, rep = st.Session.Take(nil, tags)
			return nil
		})
		if err != nil {
			c.h.log.WarnContext(ctx, "websocket: cannot take back unposted tags; their events return after their ack timeout or when the session ends", c.errAttrs(err)...)
			return
		}
	} else {
		for _, d := range ds {
			nackRefs = append(nackRefs, d.Ref)
		}
		rep.Nacked = len(nackRefs)
	}
	if _, err := c.h.cfg.Service.SettleRefs(ctx, c.st.Session, nil, nackRefs, rep); err != nil {
		c.h.log.WarnContext(ctx, "websocket: cannot hand back unposted events; they return after their ack timeout or when the session ends", c.errAttrs(err)...)
	}
}
