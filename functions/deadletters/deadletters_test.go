package deadletters_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/deadletters"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/internal/testkit/inmem"
	"github.com/heraldevents/herald/leasestore"
)

const (
	listPath = "/api/v1beta/dead-letters"
	actPath  = "/api/v1beta/dead-letters/actions"
)

// admin acts on the service directly, to make dead letters.
var admin = &auth.Principal{ID: "admin", Permissions: []string{auth.PermAll}}

// fixture is the two endpoints over a fresh in-memory service whose
// events are dead-lettered after their first delivery, behind bearer
// tokens: "ops" holds inspect-and-replay-all-dlq alone, "reader" may read
// events and manage destinations but not triage.
type fixture struct {
	t   *testing.T
	svc *inmem.Service
	srv http.Handler
}

func serve(t *testing.T) *fixture {
	t.Helper()
	svc := inmem.New(t, inmem.Options{Store: leasestore.Options{DeliveryLimit: 1}})
	h := &deadletters.Handler{Service: svc.Service}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+listPath, h.List)
	mux.HandleFunc("POST "+actPath, h.Act)
	srv := httpx.Authenticate(auth.StaticTokens{
		"ops":    {ID: "ops", Permissions: []string{auth.PermInspectDeadLetters}},
		"reader": {ID: "reader", Permissions: []string{auth.PermReadEvents, auth.PermManageDestinations, auth.PermReceivePrefix + "*"}},
	}, mux)
	return &fixture{t: t, svc: svc, srv: srv}
}

func (f *fixture) do(method, target, token, body string) testkit.Answer {
	f.t.Helper()
	return testkit.Do(f.t, f.srv, method, target, token, body)
}

// page is a decoded listing.
type page struct {
	DeadLetters   []deadletters.DeadLetter `json:"dead_letters"`
	NextPageToken string                   `json:"next_page_token"`
}

// list fetches one page as "ops" and requires a 200.
func (f *fixture) list(q url.Values) page {
	f.t.Helper()
	req := httptest.NewRequest("GET", listPath+"?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer ops")
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	require.Equal(f.t, http.StatusOK, rec.Code, rec.Body.String())
	var p page
	require.NoError(f.t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.NotNil(f.t, p.DeadLetters, "[] rather than null: %s", rec.Body.String())
	return p
}

// ids lists every dead letter's id, in listing order.
func (f *fixture) ids() []string {
	f.t.Helper()
	var out []string
	for _, d := range f.list(url.Values{"limit": {"100"}}).DeadLetters {
		out = append(out, d.ID)
	}
	return out
}

// act posts actions as "ops", requires a 200 and returns the outcomes.
func (f *fixture) act(actions ...deadletters.Outcome) []deadletters.Outcome {
	f.t.Helper()
	var req struct {
		Actions []map[string]string `json:"actions"`
	}
	for _, a := range actions {
		req.Actions = append(req.Actions, map[string]string{"id": a.ID, "action": a.Action})
	}
	b, err := json.Marshal(req)
	require.NoError(f.t, err)
	httpReq := httptest.NewRequest("POST", actPath, strings.NewReader(string(b)))
	httpReq.Header.Set("Authorization", "Bearer ops")
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, httpReq)
	require.Equal(f.t, http.StatusOK, rec.Code, rec.Body.String())
	var out struct {
		Outcomes []deadletters.Outcome `json:"outcomes"`
	}
	require.NoError(f.t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Len(f.t, out.Outcomes, len(actions), "one outcome per action")
	return out.Outcomes
}

// deadLetter creates a durable consumer, publishes n events of type
// "orders.created" with messages {"n":i} and resource ids "/orders/i",
// fails each lease once and pulls again, so that the delivery limit of 1
// dead-letters every event. It returns the consumer's id.
func (f *fixture) deadLetter(n int) string {
	f.t.Helper()
	ctx := f.t.Context()
	c, err := f.svc.CreateDestination(ctx, admin, delivery.CreateDestinationParams{Type: leasestore.TypeDurableConsumer})
	require.NoError(f.t, err)
	for i := range n {
		_, err := f.svc.Publish(ctx, admin, delivery.Event{
			EventType: "orders.created", Message: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), ResourceID: fmt.Sprintf("/orders/%d", i),
		})
		require.NoError(f.t, err)
	}
	for {
		l := f.pull(c.ID)
		if l == nil {
			break
		}
		res, err := f.svc.Acknowledge(ctx, admin, leasestore.AckParams{Consumer: c.ID, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusFailed})
		require.NoError(f.t, err)
		require.Equal(f.t, leasestore.OutcomeRequeued, res.Outcome)
	}
	return c.ID
}

// pull leases up to 100 events of consumer; nil when it is caught up.
func (f *fixture) pull(consumer string) *leasestore.Lease {
	f.t.Helper()
	l, err := f.svc.Pull(f.t.Context(), admin, delivery.PullRequest{Destination: consumer, Worker: "w", Limit: 100, Visibility: time.Minute})
	require.NoError(f.t, err)
	return l
}

func act(id, action string) deadletters.Outcome {
	return deadletters.Outcome{ID: id, Action: action}
}

// TestPermission: both endpoints need inspect-and-replay-all-dlq: without
// it they are 403 with an insufficient_scope challenge and do nothing;
// that permission alone is enough; an unknown token is 401.
func TestPermission(t *testing.T) {
	t.Parallel()
	f := serve(t)
	f.deadLetter(1)
	id := f.ids()[0]
	for _, r := range []struct{ method, target, body string }{
		{"GET", listPath, ""},
		{"GET", listPath + "?limit=abc", ""},
		{"POST", actPath, fmt.Sprintf(`{"actions":[{"id":%q,"action":"DISCARD"}]}`, id)},
		{"POST", actPath, `{"actions":[]}`},
	} {
		a := f.do(r.method, r.target, "reader", r.body)
		require.Equal(t, http.StatusForbidden, a.Code, "%s %s: %v", r.method, r.target, a.Body)
		require.Equal(t, "permission_denied", a.Body["code"])
		require.Equal(t, `permission "inspect-and-replay-all-dlq" is required`, a.Body["message"])
		require.Contains(t, a.Challenge, `error="insufficient_scope"`)

		a = f.do(r.method, r.target, "nobody", r.body)
		require.Equal(t, http.StatusUnauthorized, a.Code, "%s %s: %v", r.method, r.target, a.Body)
		require.Equal(t, "unauthenticated", a.Body["code"])
	}
	require.Equal(t, []string{id}, f.ids(), "the refused DISCARD did nothing")
}

// TestListItem: an item carries the stable id, the reason, the origin
// consumer, the delivery count, when, the consumer form of the event and
// its resource id.
func TestListItem(t *testing.T) {
	t.Parallel()
	f := serve(t)
	before := time.Now().Add(-time.Second)
	consumer := f.deadLetter(1)
	a := f.do("GET", listPath, "ops", "")
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	require.Equal(t, "", a.Body["next_page_token"], "one page")
	items := a.Body["dead_letters"].([]any)
	require.Len(t, items, 1)
	item := items[0].(map[string]any)
	require.ElementsMatch(t, []string{"id", "reason", "origin_queue", "delivery_count", "dead_lettered_at", "event", "resource_id"}, keys(item))
	require.NotEmpty(t, item["id"])
	require.Equal(t, leasestore.ReasonDeliveryLimit, item["reason"])
	require.Equal(t, consumer, item["origin_queue"])
	require.Equal(t, 1.0, item["delivery_count"])
	require.Equal(t, "/orders/0", item["resource_id"])
	at, err := time.Parse(time.RFC3339Nano, item["dead_lettered_at"].(string))
	require.NoError(t, err)
	require.True(t, at.After(before) && at.Before(time.Now().Add(time.Second)), at)
	require.True(t, strings.HasSuffix(item["dead_lettered_at"].(string), "Z"), "in UTC: %v", item["dead_lettered_at"])
	ev := item["event"].(map[string]any)
	require.Equal(t, "orders.created", ev["event_type"])
	require.Equal(t, "admin", ev["principal_identity"])
	require.Equal(t, map[string]any{"n": 0.0}, ev["message"])
	require.NotEmpty(t, ev["occurred_at"])
	require.NotEmpty(t, ev["published_at"])
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestListEmpty: an empty dead-letter queue is [] and no next page.
func TestListEmpty(t *testing.T) {
	t.Parallel()
	f := serve(t)
	a := f.do("GET", listPath, "ops", "")
	require.Equal(t, http.StatusOK, a.Code, a.Body)
	require.Equal(t, map[string]any{"dead_letters": []any{}, "next_page_token": ""}, a.Body)
}

// TestListLimit: limit that is not an integer is 400 (malformed); 0, a
// negative one and one over 100 are 422 (invalid_argument, the query's
// field); 1 and 100 are accepted.
func TestListLimit(t *testing.T) {
	t.Parallel()
	f := serve(t)
	for _, l := range []string{"abc", "1.5", "", " 5", "0x10", "99999999999999999999"} {
		if l == "" {
			continue // absent: the default
		}
		a := f.do("GET", listPath+"?limit="+url.QueryEscape(l), "ops", "")
		require.Equal(t, http.StatusBadRequest, a.Code, "limit=%q: %v", l, a.Body)
		require.Equal(t, "malformed", a.Body["code"])
		require.Equal(t, "limit must be an integer between 1 and 100", a.Body["message"])
		require.Equal(t, a.Body["message"], a.Body["detail"], "a 400's detail repeats the message")
	}
	for _, l := range []string{"0", "-1", "101", "1000"} {
		a := f.do("GET", listPath+"?limit="+l, "ops", "")
		require.Equal(t, http.StatusUnprocessableEntity, a.Code, "limit=%s: %v", l, a.Body)
		require.Equal(t, "invalid_argument", a.Body["code"])
		require.Equal(t, "limit must be between 1 and 100", a.Body["message"])
		require.Equal(t, []any{map[string]any{"loc": []any{"query"}, "msg": "limit must be between 1 and 100", "type": "value_error"}}, a.Body["detail"])
	}
	for _, l := range []string{"1", "100"} {
		a := f.do("GET", listPath+"?limit="+l, "ops", "")
		require.Equal(t, http.StatusOK, a.Code, "limit=%s: %v", l, a.Body)
	}
}

// TestListPages: without limit a page holds 20; page_token continues
// after the last page, in a stable order (the dead-letter order), to an
// empty next_page_token on the last page, also when the last page is
// exactly full; a page token the listing did not issue is 422.
func TestListPages(t *testing.T) {
	t.Parallel()
	f := serve(t)
	f.deadLetter(25)
	all := f.ids()
	require.Len(t, all, 25)

	first := f.list(nil)
	require.Len(t, first.DeadLetters, delivery.DefaultDeadLetterPage, "the default page size")
	require.NotEmpty(t, first.NextPageToken)
	second := f.list(url.Values{"page_token": {first.NextPageToken}})
	require.Len(t, second.DeadLetters, 5)
	require.Equal(t, "", second.NextPageToken, "the last page")
	var got []string
	for _, d := range append(first.DeadLetters, second.DeadLetters...) {
		got = append(got, d.ID)
	}
	require.Equal(t, all, got)

	for _, limit := range []int{1, 7, 25} {
		var paged []string
		token, pages := "", 0
		for {
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			if token != "" {
				q.Set("page_token", token)
			}
			p := f.list(q)
			pages++
			require.LessOrEqual(t, len(p.DeadLetters), limit)
			for _, d := range p.DeadLetters {
				paged = append(paged, d.ID)
			}
			if p.NextPageToken == "" {
				break
			}
			require.Len(t, p.DeadLetters, limit, "only the last page is short")
			token = p.NextPageToken
		}
		require.Equal(t, all, paged, "limit %d: every dead letter once, in order", limit)
		require.Equal(t, (25+limit-1)/limit, pages, "limit %d: no empty page after an exactly full last one", limit)
	}

	a := f.do("GET", listPath+"?page_token=bogus", "ops", "")
	require.Equal(t, http.StatusUnprocessableEntity, a.Code, a.Body)
	require.Equal(t, "invalid_argument", a.Body["code"])
}

// TestActions: every action gets one outcome, in request order, with the
// request's id and action (normalized: "discard" and "ACTION_LEAVE" are
// DISCARD and LEAVE). LEAVE is LEFT and changes nothing; DISCARD is
// DISCARDED and the dead letter is gone; REPLAY is REPLAYED, the dead
// letter is gone and its event is back on its consumer, to be delivered
// again with a fresh budget. An id that is not a dead letter is DISCARDED
// for DISCARD and REPLAY_FAILED for REPLAY, each with a detail.
func TestActions(t *testing.T) {
	t.Parallel()
	f := serve(t)
	consumer := f.deadLetter(3)
	ids := f.ids()
	require.Len(t, ids, 3)
	require.Nil(t, f.pull(consumer), "every event is dead-lettered")

	out := f.act(act(ids[2], "LEAVE"), act("no-such-id", "DISCARD"), act(ids[0], "REPLAY"), act("no-such-id", "REPLAY"), act(ids[1], "discard"), act(ids[2], "ACTION_LEAVE"))
	require.Equal(t, []deadletters.Outcome{
		{ID: ids[2], Action: "LEAVE", Outcome: "LEFT"},
		{ID: "no-such-id", Action: "DISCARD", Outcome: "DISCARDED", Detail: "it was not in the dead-letter queue (already discarded or replayed)"},
		{ID: ids[0], Action: "REPLAY", Outcome: "REPLAYED"},
		{ID: "no-such-id", Action: "REPLAY", Outcome: "REPLAY_FAILED", Detail: "no dead letter has this id (already discarded or replayed)"},
		{ID: ids[1], Action: "DISCARD", Outcome: "DISCARDED"},
		{ID: ids[2], Action: "LEAVE", Outcome: "LEFT"},
	}, out)
	require.Equal(t, []string{ids[2]}, f.ids(), "replayed and discarded are gone; left stays")

	// The replayed event is back on its consumer, first delivery again.
	l := f.pull(consumer)
	require.NotNil(t, l, "the replayed event is back")
	require.Len(t, l.Events, 1)
	require.EqualValues(t, 1, l.Attempt, "a fresh delivery budget")
	ev, err := delivery.DecodeConsumerEvent(l.Events[0])
	require.NoError(t, err)
	require.Equal(t, "orders.created", ev.EventType)
	require.JSONEq(t, `{"n":0}`, string(ev.Message))
	res, err := f.svc.Acknowledge(t.Context(), admin, leasestore.AckParams{Consumer: consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK})
	require.NoError(t, err)
	require.Equal(t, leasestore.OutcomeCommitted, res.Outcome)
	require.Nil(t, f.pull(consumer), "nothing else came back")

	// Acting again on what is gone.
	out = f.act(act(ids[0], "REPLAY"), act(ids[1], "DISCARD"))
	require.Equal(t, "REPLAY_FAILED", out[0].Outcome)
	require.NotEmpty(t, out[0].Detail)
	require.Equal(t, "DISCARDED", out[1].Outcome)
	require.NotEmpty(t, out[1].Detail)
	require.Equal(t, []string{ids[2]}, f.ids())
}

// TestReplayToDeletedOrigin: a dead letter whose consumer is gone is
// ORIGIN_QUEUE_DELETED on REPLAY, with a detail, and stays.
func TestReplayToDeletedOrigin(t *testing.T) {
	t.Parallel()
	f := serve(t)
	consumer := f.deadLetter(1)
	id := f.ids()[0]
	require.NoError(t, f.svc.DeleteDestination(t.Context(), admin, consumer))
	out := f.act(act(id, "REPLAY"))
	require.Equal(t, "ORIGIN_QUEUE_DELETED", out[0].Outcome)
	require.Contains(t, out[0].Detail, "re-create the queue")
	require.Equal(t, []string{id}, f.ids(), "no loss: the dead letter stays")
}

// TestActionsRefused: an empty or missing action list, one of more than
// 100 actions, a missing id and an unknown action are 422, and nothing is
// done, not even the valid actions before the bad one; an id with a
// control character, a body that is not JSON and an unknown member (at
// either level) are 400.
func TestActionsRefused(t *testing.T) {
	t.Parallel()
	f := serve(t)
	f.deadLetter(1)
	id := f.ids()[0]
	discard := fmt.Sprintf(`{"id":%q,"action":"DISCARD"}`, id)
	many := make([]string, 0, 101)
	many = append(many, discard)
	for i := range 100 {
		many = append(many, fmt.Sprintf(`{"id":"x%d","action":"LEAVE"}`, i))
	}

	type problem struct {
		body, message string
		loc           []any
		kind          string
	}
	for _, p := range []problem{
		{`{"actions":[]}`, "actions must hold 1 to 100 actions", []any{"body"}, "value_error"},
		{`{}`, "actions must hold 1 to 100 actions", []any{"body"}, "value_error"},
		{`{"actions":null}`, "actions must hold 1 to 100 actions", []any{"body"}, "value_error"},
		{`{"actions":[` + strings.Join(many, ",") + `]}`, "actions must hold 1 to 100 actions", []any{"body"}, "value_error"},
		{`{"actions":[` + discard + `,{"action":"LEAVE"}]}`, "actions[1].id is required", []any{"body"}, "missing"},
		{`{"actions":[` + discard + `,{"id":"","action":"LEAVE"}]}`, "actions[1].id is required", []any{"body"}, "missing"},
		{`{"actions":[` + discard + `,{"id":"y","action":"EXPLODE"}]}`, "actions[1].action must be REPLAY, DISCARD or LEAVE", []any{"body", "actions", 1.0, "action"}, "value_error"},
		{`{"actions":[` + discard + `,{"id":"y"}]}`, "actions[1].action must be REPLAY, DISCARD or LEAVE", []any{"body", "actions", 1.0, "action"}, "value_error"},
	} {
		a := f.do("POST", actPath, "ops", p.body)
		require.Equal(t, http.StatusUnprocessableEntity, a.Code, "%.80s: %v", p.body, a.Body)
		require.Equal(t, "invalid_argument", a.Body["code"], p.body)
		require.Equal(t, p.message, a.Body["message"], p.body)
		require.Equal(t, []any{map[string]any{"loc": p.loc, "msg": p.message, "type": p.kind}}, a.Body["detail"], "%.80s", p.body)
		require.Equal(t, []string{id}, f.ids(), "%.80s: nothing was done", p.body)
	}

	for _, p := range []struct{ body, message string }{
		{`{"actions":[` + discard + `,{"id":"a\u0007b","action":"LEAVE"}]}`, "actions[1].id must be valid UTF-8 without control characters"},
		{`{"actions":`, ""},
		{`not json`, ""},
		{`{"actions":[` + discard + `],"dry_run":true}`, `unknown field "dry_run"`},
		{`{"actions":[{"id":"x","action":"LEAVE","note":"n"}]}`, `unknown field "note"`},
		{`{"actions":[` + discard + `],"actions":[]}`, `"actions"`},
		{`{"actions":{"id":"x"}}`, ""},
	} {
		a := f.do("POST", actPath, "ops", p.body)
		require.Equal(t, http.StatusBadRequest, a.Code, "%s: %v", p.body, a.Body)
		require.Equal(t, "malformed", a.Body["code"], p.body)
		require.Contains(t, a.Body["message"], p.message, p.body)
		require.Equal(t, a.Body["message"], a.Body["detail"], "a 400's detail repeats the message")
		require.Equal(t, []string{id}, f.ids(), "%s: nothing was done", p.body)
	}

	// The limit itself: 100 actions are accepted.
	out := f.act(func() []deadletters.Outcome {
		acts := make([]deadletters.Outcome, 100)
		for i := range acts {
			acts[i] = act(id, "LEAVE")
		}
		return acts
	}()...)
	for _, o := range out {
		require.Equal(t, "LEFT", o.Outcome)
	}
}
