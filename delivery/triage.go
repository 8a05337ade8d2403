package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/leasestore"
)

// DeadLetterPoll is how long a triage stream waits before it lists the
// dead-letter queue again for dead letters it has not shown yet.
const DeadLetterPoll = 2 * time.Second

// Triage is the transport-neutral bookkeeping of one dead-letter triage
// session (the notifications API, ManageDeadLetteredEvents): the session-scoped
// delivery tags (1, 2, 3, …) it issued, the dead letters it has shown, and
// the mapping of tagged actions to outcomes. The gRPC stream (package
// functions/grpcapi) and the WebSocket bridges (functions/wsbridge,
// functions/wslambda) drive it; they differ only in how they send.
//
// A Triage is safe for concurrent use: one goroutine may show dead letters
// while another acts on them. Tags are not persisted: after a reconnect a
// new Triage shows every remaining dead letter again, with new tags.
type Triage struct {
	svc *Service
	p   *auth.Principal

	mu      sync.Mutex
	nextTag int64
	tags    map[int64]string // tag → dead-letter id, until replayed or discarded
	shown   map[string]bool  // dead letters shown this session
}

// TriageAction is one tagged action of a triage session. An Action that is
// not ActionReplay, ActionDiscard or ActionLeave (e.g. "" for the notifications API's
// ACTION_UNSPECIFIED) changes nothing and is reported OutcomeLeft.
type TriageAction struct {
	DeliveryTag int64
	Action      DeadLetterAction
}

// TriageOutcome is the outcome of one TriageAction (the notifications API,
// ActionOutcome): the tag the client sent, what happened, and a
// human-readable Detail when useful.
type TriageOutcome struct {
	DeliveryTag int64
	Outcome     DeadLetterOutcome
	Detail      string
}

// Details of the outcomes a Triage reports without asking the store.
const (
	DetailUnknownTag    = "this session issued no dead letter with this delivery tag, or it was already replayed or discarded; nothing was done"
	DetailUnknownAction = "action must be REPLAY, DISCARD or LEAVE (ACTION_REPLAY, ACTION_DISCARD or ACTION_LEAVE); nothing was done"
)

// NewTriage starts a triage session for p, which needs
// inspect-and-replay-all-dlq (herr.PermissionDenied without).
func (s *Service) NewTriage(p *auth.Principal) (*Triage, error) {
	if err := p.Require(auth.PermInspectDeadLetters); err != nil {
		return nil, err
	}
	return &Triage{svc: s, p: p, tags: map[int64]string{}, shown: map[string]bool{}}, nil
}

// Unshown lists the whole dead-letter queue (every page, oldest first as
// the store orders it) and returns the dead letters this session has not
// shown yet. Errors are ListDeadLetters'.
func (t *Triage) Unshown(ctx context.Context) ([]*leasestore.DeadLetter, error) {
	var out []*leasestore.DeadLetter
	token := ""
	for {
		page, next, err := t.svc.ListDeadLetters(ctx, t.p, MaxDeadLetterPage, token)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		for _, d := range page {
			if !t.shown[d.ID] {
				out = append(out, d)
			}
		}
		t.mu.Unlock()
		if token = next; token == "" {
			return out, nil
		}
	}
}

// Show issues the next delivery tag for d and marks it shown. ok is false
// (and tag 0) when this session has shown d already: each dead letter is
// shown once per session.
func (t *Triage) Show(d *leasestore.DeadLetter) (tag int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shown[d.ID] {
		return 0, false
	}
	t.shown[d.ID] = true
	t.nextTag++
	t.tags[t.nextTag] = d.ID
	return t.nextTag, true
}

// Act runs actions in order and returns exactly one outcome per action, in
// the same order (the notifications API: "Each action the operator sends produces
// exactly one correlated action_outcome"). Outcomes are those of
// ActOnDeadLetters; an action whose tag this session did not issue, or
// whose dead letter it already replayed or discarded, is OutcomeLeft with
// DetailUnknownTag, and one with an unknown action OutcomeLeft with
// DetailUnknownAction. A replayed or discarded dead letter's tag is
// retired. The error is ActOnDeadLetters' (the store failed); outcomes
// are then not reported.
func (t *Triage) Act(ctx context.Context, actions []TriageAction) ([]TriageOutcome, error) {
	outs := make([]TriageOutcome, len(actions))
	var reqs []DeadLetterRequest
	var index []int // reqs[k] is actions[index[k]]
	t.mu.Lock()
	for i, a := range actions {
		outs[i] = TriageOutcome{DeliveryTag: a.DeliveryTag, Outcome: OutcomeLeft}
		id, known := t.tags[a.DeliveryTag]
		switch {
		case !known:
			outs[i].Detail = DetailUnknownTag
		case a.Action != ActionReplay && a.Action != ActionDiscard && a.Action != ActionLeave:
			outs[i].Detail = DetailUnknownAction
		default:
			reqs = append(reqs, DeadLetterRequest{ID: id, Action: a.Action})
			index = append(index, i)
		}
	}
	t.mu.Unlock()
	for len(reqs) > 0 {
		n := min(len(reqs), MaxDeadLetterActions)
		res, err := t.svc.ActOnDeadLetters(ctx, t.p, reqs[:n])
		if err != nil {
			return nil, err
		}
		for k, r := range res {
			o := &outs[index[k]]
			o.Outcome, o.Detail = r.Outcome, r.Detail
			if r.Outcome == OutcomeReplayed || r.Outcome == OutcomeDiscarded {
				t.mu.Lock()
				delete(t.tags, o.DeliveryTag)
				t.mu.Unlock()
			}
		}
		reqs, index = reqs[n:], index[n:]
	}
	return outs, nil
}
