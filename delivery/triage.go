package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

// DeadLetterPoll is how long a triage stream waits before it lists the
// dead-letter queue again for dead letters it has not shown yet.
const DeadLetterPoll = 2 * time.Second

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

// Details of the outcomes a triage session reports without asking the store.
const (
	DetailUnknownTag    = "this session issued no dead letter with this delivery tag, or it was already replayed or discarded; nothing was done"
	DetailUnknownAction = "action must be REPLAY, DISCARD or LEAVE (ACTION_REPLAY, ACTION_DISCARD or ACTION_LEAVE); nothing was done"
)

// TriageState is the bookkeeping of one dead-letter triage session (the
// notifications API, ManageDeadLetteredEvents), as SessionState is for
// event streams: the session-scoped delivery tags (1, 2, 3, …) it issued
// and the dead letters they name. It is JSON-encodable, so a transport
// that keeps nothing in memory between requests (the API Gateway
// WebSocket bridge) stores it in its connection record; Triage wraps one
// for the transports that hold a connection (gRPC, the gorilla WebSocket
// bridge).
//
// The rules, the same for every transport: every dead letter is shown
// once per session, with the next tag; a dead letter counts as shown while
// a tag names it (or Shown holds it); a tag is retired when its dead
// letter is replayed or discarded (Retire). A TriageState is a value the
// caller owns: its methods do not lock it.
type TriageState struct {
	// NextTag is the last tag issued (0 before the first).
	NextTag int64 `json:"next_tag"`
	// Tags maps the live tags to the dead-letter ids they name.
	Tags map[int64]string `json:"tags"`
	// Shown holds dead-letter ids shown without a tag naming them, as
	// records written by older versions hold them; Show adds none.
	Shown map[string]bool `json:"shown"`

	// byID indexes Tags by dead-letter id, built by Show when nil and kept
	// by Show, Prune and Retire; not stored.
	byID map[string]int64
}

// NewTriageState returns the state of a fresh triage session.
func NewTriageState() *TriageState {
	return &TriageState{Tags: map[int64]string{}, Shown: map[string]bool{}}
}

// Held is how many dead letters ts holds as shown: its tags and Shown.
func (ts *TriageState) Held() int { return len(ts.Tags) + len(ts.Shown) }

// ShownIDs returns the set of dead-letter ids ts holds as shown.
func (ts *TriageState) ShownIDs() map[string]bool {
	out := make(map[string]bool, len(ts.Shown)+len(ts.Tags))
	for id := range ts.Shown {
		out[id] = true
	}
	for _, id := range ts.Tags {
		out[id] = true
	}
	return out
}

// Prune drops the tags and Shown ids of dead letters not in listed, a
// complete listing of the dead-letter queue: they were replayed or
// discarded elsewhere, or expired. A bounded state (MaxTags) thus makes
// room again.
func (ts *TriageState) Prune(listed map[string]bool) {
	for id := range ts.Shown {
		if !listed[id] {
			delete(ts.Shown, id)
		}
	}
	for tag, id := range ts.Tags {
		if !listed[id] {
			delete(ts.Tags, tag)
			delete(ts.byID, id)
		}
	}
}

// Show issues the next tags to the dead letters of ds that ts has not
// shown yet, in order, while ts holds fewer than maxTags tags (≤ 0: no
// cap), and returns the tags issued by dead-letter id. A dead letter
// shown already (by an earlier call, or a concurrent writer whose state
// this is) gets none.
func (ts *TriageState) Show(ds []*leasestore.DeadLetter, maxTags int) map[string]int64 {
	if ts.Tags == nil {
		ts.Tags = map[int64]string{}
	}
	if ts.byID == nil {
		ts.byID = make(map[string]int64, len(ts.Tags))
		for tag, id := range ts.Tags {
			ts.byID[id] = tag
		}
	}
	issued := map[string]int64{}
	for _, d := range ds {
		_, tagged := ts.byID[d.ID]
		if tagged || ts.Shown[d.ID] || (maxTags > 0 && len(ts.Tags) >= maxTags) {
			continue
		}
		ts.NextTag++
		ts.Tags[ts.NextTag] = d.ID
		ts.byID[d.ID] = ts.NextTag
		issued[d.ID] = ts.NextTag
	}
	return issued
}

// TriagePlan is what a set of actions asks of the store, resolved against
// a TriageState: Outcomes holds one outcome per action, in order, those
// the state answers itself (an unknown tag or action: OutcomeLeft with
// DetailUnknownTag or DetailUnknownAction) final, the others filled in by
// Service.ActOnTriage.
type TriagePlan struct {
	Outcomes []TriageOutcome
	actions  []DeadLetterAction // as sent, one per outcome (for the metric)
	requests []DeadLetterRequest
	index    []int // requests[k] answers Outcomes[index[k]]
}

// Plan resolves actions against ts without changing it.
func (ts *TriageState) Plan(actions []TriageAction) TriagePlan {
	plan := TriagePlan{Outcomes: make([]TriageOutcome, len(actions)), actions: make([]DeadLetterAction, len(actions))}
	for i, a := range actions {
		plan.Outcomes[i] = TriageOutcome{DeliveryTag: a.DeliveryTag, Outcome: OutcomeLeft}
		plan.actions[i] = a.Action
		id, known := ts.Tags[a.DeliveryTag]
		switch {
		case !known:
			plan.Outcomes[i].Detail = DetailUnknownTag
		case a.Action != ActionReplay && a.Action != ActionDiscard && a.Action != ActionLeave:
			plan.Outcomes[i].Detail = DetailUnknownAction
		default:
			plan.requests = append(plan.requests, DeadLetterRequest{ID: id, Action: a.Action})
			plan.index = append(plan.index, i)
		}
	}
	return plan
}

// Retire retires the tags of outs whose dead letter was replayed or
// discarded, and returns the ids they named: the dead letter is gone, so
// neither its tag nor its id needs keeping.
func (ts *TriageState) Retire(outs []TriageOutcome) []string {
	var ids []string
	for _, o := range outs {
		if o.Outcome != OutcomeReplayed && o.Outcome != OutcomeDiscarded {
			continue
		}
		if id, ok := ts.Tags[o.DeliveryTag]; ok {
			delete(ts.Shown, id)
			delete(ts.byID, id)
			ids = append(ids, id)
		}
		delete(ts.Tags, o.DeliveryTag)
	}
	return ids
}

// ActOnTriage runs plan's requests with ActOnDeadLetters, at most
// MaxDeadLetterActions at a time, and returns one outcome per planned
// action, in order (the notifications API: "Each action the operator sends
// produces exactly one correlated action_outcome"), each counted in the
// herald.dead_letters.triaged metric. It does not change the state: the
// caller retires the tags with TriageState.Retire on the state it keeps.
// The error is ActOnDeadLetters' (the store failed); the outcomes returned
// with it are those of the requests done before, for Retire, and are not
// to be reported.
func (s *Service) ActOnTriage(ctx context.Context, p *auth.Principal, plan TriagePlan) ([]TriageOutcome, error) {
	outs := plan.Outcomes
	reqs, index := plan.requests, plan.index
	for len(reqs) > 0 {
		n := min(len(reqs), MaxDeadLetterActions)
		res, err := s.ActOnDeadLetters(ctx, p, reqs[:n])
		if err != nil {
			return outs, err
		}
		for k, r := range res {
			o := &outs[index[k]]
			o.Outcome, o.Detail = r.Outcome, r.Detail
		}
		reqs, index = reqs[n:], index[n:]
	}
	for i, o := range outs {
		telemetry.Triaged(ctx, string(plan.actions[i]), string(o.Outcome))
	}
	return outs, nil
}

// TriageListing is what ListForTriage found.
type TriageListing struct {
	// Unshown are the dead letters found that were not shown, oldest
	// first as the store orders them.
	Unshown []*leasestore.DeadLetter
	// Listed holds the id of every dead letter listed; Complete says the
	// listing reached the queue's end, so that Listed may prune a state.
	Listed   map[string]bool
	Complete bool
}

// TriageListParams bounds ListForTriage.
type TriageListParams struct {
	// Shown holds the ids to leave out (TriageState.ShownIDs).
	Shown map[string]bool
	// Want is how many unshown dead letters to find; ≤ 0: all.
	Want int
	// Whole lists every page even once Want are found (to prune a state).
	Whole bool
	// Until is when to stop listing (before the next page); zero: never.
	Until time.Time
}

// ListForTriage lists the dead-letter queue from its start, page by page
// (MaxDeadLetterPage each), for the dead letters a triage session has not
// shown yet. Errors are ListDeadLetters'.
func (s *Service) ListForTriage(ctx context.Context, p *auth.Principal, lp TriageListParams) (TriageListing, error) {
	out := TriageListing{Listed: map[string]bool{}}
	token := ""
	for lp.Until.IsZero() || time.Now().Before(lp.Until) {
		page, next, err := s.ListDeadLetters(ctx, p, MaxDeadLetterPage, token)
		if err != nil {
			return TriageListing{}, err
		}
		for _, d := range page {
			out.Listed[d.ID] = true
			if !lp.Shown[d.ID] && (lp.Want <= 0 || len(out.Unshown) < lp.Want) {
				out.Unshown = append(out.Unshown, d)
			}
		}
		if token = next; token == "" {
			out.Complete = true
			break
		}
		if lp.Want > 0 && len(out.Unshown) >= lp.Want && !lp.Whole {
			break
		}
	}
	return out, nil
}

// Triage is a TriageState held in memory for one connection, safe for
// concurrent use: one goroutine may show dead letters while another acts
// on them. The gRPC stream (package functions/grpcapi) and the gorilla
// WebSocket bridge (functions/wsbridge) drive it; they differ only in how
// they send. Tags are not persisted: after a reconnect a new Triage shows
// every remaining dead letter again, with new tags. Unlike a stored
// state, it remembers the dead letters it replayed or discarded for the
// whole session, and never shows one of them again.
type Triage struct {
	svc *Service
	p   *auth.Principal

	mu      sync.Mutex
	st      *TriageState
	retired map[string]bool // dead letters this session replayed or discarded
}

// NewTriage starts a triage session for p, which needs
// inspect-and-replay-all-dlq (herr.PermissionDenied without).
func (s *Service) NewTriage(p *auth.Principal) (*Triage, error) {
	if err := p.Require(auth.PermInspectDeadLetters); err != nil {
		return nil, err
	}
	return &Triage{svc: s, p: p, st: NewTriageState(), retired: map[string]bool{}}, nil
}

// shown returns the ids this session showed; t.mu held.
func (t *Triage) shown() map[string]bool {
	ids := t.st.ShownIDs()
	for id := range t.retired {
		ids[id] = true
	}
	return ids
}

// Unshown lists the whole dead-letter queue (every page, oldest first as
// the store orders it) and returns the dead letters this session has not
// shown yet. Errors are ListDeadLetters'.
func (t *Triage) Unshown(ctx context.Context) ([]*leasestore.DeadLetter, error) {
	t.mu.Lock()
	shown := t.shown()
	t.mu.Unlock()
	l, err := t.svc.ListForTriage(ctx, t.p, TriageListParams{Shown: shown})
	if err != nil {
		return nil, err
	}
	return l.Unshown, nil
}

// Show issues the next delivery tag for d and marks it shown. ok is false
// (and tag 0) when this session has shown d already: each dead letter is
// shown once per session.
func (t *Triage) Show(d *leasestore.DeadLetter) (tag int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.retired[d.ID] {
		return 0, false
	}
	tag, ok = t.st.Show([]*leasestore.DeadLetter{d}, 0)[d.ID]
	return tag, ok
}

// Act runs actions in order and returns exactly one outcome per action, in
// the same order (TriageState.Plan, Service.ActOnTriage). A replayed or
// discarded dead letter's tag is retired. The error is ActOnDeadLetters'
// (the store failed); outcomes are then not reported.
func (t *Triage) Act(ctx context.Context, actions []TriageAction) ([]TriageOutcome, error) {
	t.mu.Lock()
	plan := t.st.Plan(actions)
	t.mu.Unlock()
	outs, err := t.svc.ActOnTriage(ctx, t.p, plan)
	t.mu.Lock()
	for _, id := range t.st.Retire(outs) {
		t.retired[id] = true
	}
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return outs, nil
}
