package delivery

import (
	"context"
	"strings"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Dead-letter listing limits.
const (
	DefaultDeadLetterPage = 20
	MaxDeadLetterPage     = 100
	// MaxDeadLetterActions caps the actions of one request.
	MaxDeadLetterActions = 100
)

// DeadLetterAction is what an operator asks for one dead letter (the notifications API,
// ManageDeadLetteredEventsRequest.Action).
type DeadLetterAction string

// The actions.
const (
	ActionReplay  DeadLetterAction = "REPLAY"
	ActionDiscard DeadLetterAction = "DISCARD"
	ActionLeave   DeadLetterAction = "LEAVE"
)

// ParseDeadLetterAction accepts REPLAY, DISCARD and LEAVE, also with the
// proto prefix ACTION_ and in any case. Anything else is
// herr.InvalidArgument.
func ParseDeadLetterAction(s string) (DeadLetterAction, error) {
	a := DeadLetterAction(strings.TrimPrefix(strings.ToUpper(s), "ACTION_"))
	switch a {
	case ActionReplay, ActionDiscard, ActionLeave:
		return a, nil
	}
	return "", herr.New(herr.InvalidArgument, "action must be REPLAY, DISCARD or LEAVE")
}

// DeadLetterOutcome is what one action did (the notifications API, ActionOutcome.Outcome).
type DeadLetterOutcome string

// The outcomes.
const (
	// OutcomeReplayed: the event is back on its origin queue, to be
	// delivered again with a fresh delivery budget; the dead letter is gone.
	OutcomeReplayed DeadLetterOutcome = "REPLAYED"
	// OutcomeDiscarded: the dead letter is gone (or was already).
	OutcomeDiscarded DeadLetterOutcome = "DISCARDED"
	// OutcomeLeft: nothing changed.
	OutcomeLeft DeadLetterOutcome = "LEFT"
	// OutcomeOriginQueueDeleted: the origin queue no longer exists; the
	// dead letter stays (no loss). Re-create the queue to replay.
	OutcomeOriginQueueDeleted DeadLetterOutcome = "ORIGIN_QUEUE_DELETED"
	// OutcomeReplayFailed: the replay could not be confirmed; the dead
	// letter stays (no loss).
	OutcomeReplayFailed DeadLetterOutcome = "REPLAY_FAILED"
)

// DeadLetterRequest is one action on one dead letter.
type DeadLetterRequest struct {
	ID     string
	Action DeadLetterAction
}

// DeadLetterResult is the outcome of one DeadLetterRequest.
type DeadLetterResult struct {
	ID      string
	Action  DeadLetterAction
	Outcome DeadLetterOutcome
	// Detail is human-readable context, e.g. the missing origin queue.
	Detail string
}

// ListDeadLetters returns up to limit dead letters (1–100; 0 means
// DefaultDeadLetterPage) after pageToken ("" for the first page) and the
// token of the next page ("" after the last). Needs
// inspect-and-replay-all-dlq; a limit out of range is
// herr.InvalidArgument.
func (s *Service) ListDeadLetters(ctx context.Context, p *auth.Principal, limit int, pageToken string) ([]*leasestore.DeadLetter, string, error) {
	if err := p.Require(auth.PermInspectDeadLetters); err != nil {
		return nil, "", err
	}
	if limit == 0 {
		limit = DefaultDeadLetterPage
	}
	if limit < 1 || limit > MaxDeadLetterPage {
		return nil, "", herr.New(herr.InvalidArgument, "limit must be between 1 and %d", MaxDeadLetterPage)
	}
	return s.cfg.Store.ListDeadLetters(ctx, limit, pageToken)
}

// ActOnDeadLetters runs the actions in order and returns one result per
// action (the notifications API: "Each action the operator sends produces exactly one
// correlated action_outcome"). REPLAY returns the event to the exact
// origin queue it was dead-lettered from; it is never redirected. A replay
// whose origin queue is gone, or that cannot be confirmed, leaves the dead
// letter in place. Re-consuming a replayed event runs the usual per-event
// authorization. Needs inspect-and-replay-all-dlq; an empty or over-long
// list, or an action without an id, is herr.InvalidArgument and nothing is
// done.
func (s *Service) ActOnDeadLetters(ctx context.Context, p *auth.Principal, reqs []DeadLetterRequest) ([]DeadLetterResult, error) {
	if err := p.Require(auth.PermInspectDeadLetters); err != nil {
		return nil, err
	}
	if len(reqs) == 0 || len(reqs) > MaxDeadLetterActions {
		return nil, herr.New(herr.InvalidArgument, "actions must hold 1 to %d actions", MaxDeadLetterActions)
	}
	for i, r := range reqs {
		if r.ID == "" {
			return nil, herr.New(herr.InvalidArgument, "actions[%d].id is required", i)
		}
		if _, err := ParseDeadLetterAction(string(r.Action)); err != nil {
			return nil, herr.New(herr.InvalidArgument, "actions[%d].action must be REPLAY, DISCARD or LEAVE", i)
		}
	}
	out := make([]DeadLetterResult, len(reqs))
	for i, r := range reqs {
		out[i] = DeadLetterResult{ID: r.ID, Action: r.Action}
		switch r.Action {
		case ActionLeave:
			out[i].Outcome = OutcomeLeft
		case ActionDiscard:
			err := s.cfg.Store.DiscardDeadLetter(ctx, r.ID)
			switch {
			case err == nil:
				out[i].Outcome = OutcomeDiscarded
			case herr.CodeOf(err) == herr.NotFound:
				out[i].Outcome, out[i].Detail = OutcomeDiscarded, "it was not in the dead-letter queue (already discarded or replayed)"
			default:
				// Nothing was removed: report it as left in place.
				s.cfg.Logger.WarnContext(ctx, "discard dead letter failed", "id", r.ID, "err", err)
				out[i].Outcome, out[i].Detail = OutcomeLeft, "the discard failed and the dead letter was left in place: "+herr.MessageOf(err)
			}
		case ActionReplay:
			out[i].Outcome, out[i].Detail = s.replay(ctx, r.ID)
		}
	}
	return out, nil
}

// replay replays one dead letter and describes the outcome.
func (s *Service) replay(ctx context.Context, id string) (DeadLetterOutcome, string) {
	res, err := s.cfg.Store.ReplayDeadLetter(ctx, id)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return OutcomeReplayFailed, "no dead letter has this id (already discarded or replayed)"
		}
		s.cfg.Logger.WarnContext(ctx, "replay dead letter failed", "id", id, "err", err)
		return OutcomeReplayFailed, "the replay could not be confirmed; the dead letter was left in place: " + herr.MessageOf(err)
	}
	return replayOutcome(res)
}

// replayOutcome translates the store's replay outcome.
func replayOutcome(o leasestore.ReplayOutcome) (DeadLetterOutcome, string) {
	switch o {
	case leasestore.ReplayReplayed:
		return OutcomeReplayed, ""
	case leasestore.ReplayOriginQueueDeleted:
		return OutcomeOriginQueueDeleted, "the origin queue no longer exists; the dead letter was left in place: re-create the queue to replay it"
	default:
		return OutcomeReplayFailed, "the replay could not be confirmed; the dead letter was left in place"
	}
}
