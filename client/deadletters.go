package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxDeadLetterPage is the most dead letters one listing returns, and the
// most actions one call takes; Act splits longer lists.
const MaxDeadLetterPage = 100

// DeadLetter is an event moved to the dead-letter queue.
type DeadLetter struct {
	// ID names the dead letter for Act.
	ID string `json:"id"`
	// Reason is DELIVERY_LIMIT, EXPIRED, MAXLEN, or REJECTED (a durable
	// consumer's worker acknowledged the lease rejected).
	Reason string `json:"reason"`
	// OriginQueue is the queue or durable consumer it came from; a replay
	// returns it there.
	OriginQueue    string        `json:"origin_queue"`
	DeliveryCount  int64         `json:"delivery_count"`
	DeadLetteredAt time.Time     `json:"dead_lettered_at"`
	Event          ConsumerEvent `json:"event"`
	// ResourceID is the event's resource id ("" for none).
	ResourceID string `json:"resource_id"`
}

// DeadLetterPage is one page of a listing.
type DeadLetterPage struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	// NextPageToken is "" after the last page.
	NextPageToken string `json:"next_page_token"`
}

// ListDeadLetters reads one page of the dead-letter queue
// (GET /api/v1beta/dead-letters; needs inspect-and-replay-all-dlq). limit
// is 1–100 (0: Herald's default, 20); pageToken is "" for the first page,
// then the previous page's NextPageToken.
func (c *Client) ListDeadLetters(ctx context.Context, limit int, pageToken string) (*DeadLetterPage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("page_token", pageToken)
	}
	var p DeadLetterPage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1beta/dead-letters", query: q}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// AllDeadLetters lists the whole dead-letter queue, page by page.
func (c *Client) AllDeadLetters(ctx context.Context) ([]DeadLetter, error) {
	var all []DeadLetter
	token := ""
	for {
		p, err := c.ListDeadLetters(ctx, MaxDeadLetterPage, token)
		if err != nil {
			return all, err
		}
		all = append(all, p.DeadLetters...)
		if p.NextPageToken == "" || len(p.DeadLetters) == 0 {
			return all, nil
		}
		token = p.NextPageToken
	}
}

// Dead-letter actions.
const (
	ActionReplay  = "REPLAY"  // back on the exact origin queue, with a fresh delivery budget
	ActionDiscard = "DISCARD" // dropped for good
	ActionLeave   = "LEAVE"   // left as it is
)

// Dead-letter outcomes.
const (
	OutcomeReplayed           = "REPLAYED"
	OutcomeDiscarded          = "DISCARDED"
	OutcomeLeft               = "LEFT"
	OutcomeOriginQueueDeleted = "ORIGIN_QUEUE_DELETED" // the dead letter stays: re-create the queue to replay it
	OutcomeReplayFailed       = "REPLAY_FAILED"        // not confirmed; the dead letter stays
)

// DeadLetterAction asks for one action on one dead letter.
type DeadLetterAction struct {
	ID     string `json:"id"`
	Action string `json:"action"` // ActionReplay, ActionDiscard or ActionLeave
}

// DeadLetterOutcome is the result of one action.
type DeadLetterOutcome struct {
	ID      string `json:"id"`
	Action  string `json:"action"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// ActOnDeadLetters runs actions (POST /api/v1beta/dead-letters/actions),
// MaxDeadLetterPage per call, and returns one outcome per action, in
// order. progress, if non-nil, is called after each call with the number
// of actions done so far. When a call fails the outcomes so far are
// returned with the error; the later actions were not sent.
func (c *Client) ActOnDeadLetters(ctx context.Context, actions []DeadLetterAction, progress func(done int)) ([]DeadLetterOutcome, error) {
	out := make([]DeadLetterOutcome, 0, len(actions))
	for start := 0; start < len(actions); start += MaxDeadLetterPage {
		chunk := actions[start:min(start+MaxDeadLetterPage, len(actions))]
		var res struct {
			Outcomes []DeadLetterOutcome `json:"outcomes"`
		}
		if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1beta/dead-letters/actions",
			body: map[string]any{"actions": chunk}}, &res); err != nil {
			return out, err
		}
		if len(res.Outcomes) != len(chunk) {
			return out, fmt.Errorf("herald client: dead-letter actions answered %d outcomes for %d actions", len(res.Outcomes), len(chunk))
		}
		out = append(out, res.Outcomes...)
		if progress != nil {
			progress(len(out))
		}
	}
	return out, nil
}

// ReplayDeadLetters replays the dead letters ids (see ActOnDeadLetters).
func (c *Client) ReplayDeadLetters(ctx context.Context, ids ...string) ([]DeadLetterOutcome, error) {
	return c.ActOnDeadLetters(ctx, actionsFor(ids, ActionReplay), nil)
}

// DiscardDeadLetters discards the dead letters ids (see ActOnDeadLetters).
func (c *Client) DiscardDeadLetters(ctx context.Context, ids ...string) ([]DeadLetterOutcome, error) {
	return c.ActOnDeadLetters(ctx, actionsFor(ids, ActionDiscard), nil)
}

func actionsFor(ids []string, action string) []DeadLetterAction {
	out := make([]DeadLetterAction, len(ids))
	for i, id := range ids {
		out[i] = DeadLetterAction{ID: id, Action: action}
	}
	return out
}
