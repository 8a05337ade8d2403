package wslambda

import (
	"context"
	"errors"
	"slices"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
)

// demandDeadLetters answers a demand frame on a dead_letters stream: it
// lists the dead-letter queue for up to n dead letters this connection
// has not shown (delivery.Service.ListForTriage), tags them in the stored
// state (delivery.TriageState.Show, at most Config.MaxTriageTags tags),
// then posts them, and idle for the rest.
func (c *conn) demandDeadLetters(ctx context.Context, f *wsframe.ClientFrame) {
	maxTags := c.h.cfg.MaxTriageTags
	// Once the state holds half the cap, list the whole queue (within the
	// time budget) so that the ids no longer listed (replayed or discarded
	// elsewhere, expired) are pruned from it; a listing cut short prunes
	// nothing. Below that, stop once n unshown dead letters are found (the
	// cap is applied after pruning, in the write).
	listing, err := c.h.cfg.Service.ListForTriage(ctx, c.st.principal(), delivery.TriageListParams{
		Shown: c.st.DeadLetters.ShownIDs(),
		Want:  f.N,
		Whole: c.st.DeadLetters.Held() >= maxTags/2,
		Until: c.budgetEnd,
	})
	if err != nil {
		c.Refuse(ctx, f.ID, err)
		return
	}
	var tags map[string]int64
	err = c.update(ctx, func(st *State) error {
		if listing.Complete {
			st.DeadLetters.Prune(listing.Listed)
		}
		// A dead letter a concurrent frame showed gets no tag here.
		tags = st.DeadLetters.Show(listing.Unshown, maxTags)
		return nil
	})
	if err != nil {
		c.Refuse(ctx, f.ID, err)
		return
	}
	sent := 0
	for _, d := range listing.Unshown {
		if tag, ok := tags[d.ID]; ok {
			if err := c.postFrame(ctx, wsframe.DeadLettered(d, tag), c.hardEnd); errors.Is(err, apigwmgmt.ErrGone) {
				return
			}
			// A dead letter whose post failed keeps its tag: it is shown
			// again on the next connection.
			sent++
		}
	}
	if sent < f.N {
		c.send(ctx, wsframe.Idle(f.N-sent))
	}
}

// Act answers an actions frame: the actions are resolved against the
// stored tags (delivery.TriageState.Plan) and run
// (delivery.Service.ActOnTriage), the tags of replayed and discarded dead
// letters are retired in the stored state, and one outcome frame per
// action is posted, in order.
func (c *conn) Act(ctx context.Context, f *wsframe.ClientFrame) {
	plan := c.st.DeadLetters.Plan(f.TriageActions())
	outs, err := c.h.cfg.Service.ActOnTriage(ctx, c.st.principal(), plan)
	if err != nil {
		c.Refuse(ctx, f.ID, err)
		return
	}
	if retired := slices.ContainsFunc(outs, func(o delivery.TriageOutcome) bool {
		return o.Outcome == delivery.OutcomeReplayed || o.Outcome == delivery.OutcomeDiscarded
	}); retired {
		err := c.update(ctx, func(st *State) error {
			st.DeadLetters.Retire(outs)
			return nil
		})
		if err != nil {
			c.h.log.WarnContext(ctx, "websocket: cannot retire dead-letter tags; acting on them again finds nothing", c.errAttrs(err)...)
		}
	}
	for _, o := range outs {
		// A failed post loses only that outcome (logged); a gone client
		// ends the answer.
		if err := c.postFrame(ctx, wsframe.Outcome(f.ID, o), c.hardEnd); errors.Is(err, apigwmgmt.ErrGone) {
			return
		}
	}
}
