package local_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/local"
)

// deadLetterItem is one item of GET /api/v1beta/dead-letters.
type deadLetterItem struct {
	ID             string        `json:"id"`
	Reason         string        `json:"reason"`
	OriginQueue    string        `json:"origin_queue"`
	DeliveryCount  int64         `json:"delivery_count"`
	DeadLetteredAt time.Time     `json:"dead_lettered_at"`
	Event          consumerEvent `json:"event"`
	ResourceID     string        `json:"resource_id"`
}

type deadLetterPage struct {
	DeadLetters   []deadLetterItem `json:"dead_letters"`
	NextPageToken string           `json:"next_page_token"`
}

type actionOutcome struct {
	ID      string `json:"id"`
	Action  string `json:"action"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// listDeadLetters fetches one page.
func (c *client) listDeadLetters(t testing.TB, q url.Values) deadLetterPage {
	t.Helper()
	var p deadLetterPage
	c.expect(t, http.StatusOK, "GET", "/api/v1beta/dead-letters?"+q.Encode(), nil).decode(t, &p)
	return p
}

// act posts actions and returns the outcomes.
func (c *client) act(t testing.TB, actions ...map[string]string) []actionOutcome {
	t.Helper()
	var out struct {
		Outcomes []actionOutcome `json:"outcomes"`
	}
	c.expect(t, http.StatusOK, "POST", "/api/v1beta/dead-letters/actions", map[string]any{"actions": actions}).decode(t, &out)
	require.Len(t, out.Outcomes, len(actions), "one outcome per action")
	return out.Outcomes
}

// exhaust delivers the n events queue holds on limit successive
// connections, none of which acknowledges them, then keeps a connection
// open until the dead-letter queue holds want dead letters, and returns
// them.
func (c *client) exhaust(t testing.TB, queue string, n, limit, want int) []deadLetterItem {
	t.Helper()
	for range limit {
		s := c.mustStream(t, durablePath(queue), nil)
		s.connected(t)
		s.events(t, n)
		s.close()
	}
	s := c.mustStream(t, durablePath(queue), nil)
	s.connected(t)
	defer s.close()
	deadline := time.Now().Add(frameWait)
	for {
		p := c.listDeadLetters(t, url.Values{"limit": {"100"}})
		if len(p.DeadLetters) >= want {
			return p.DeadLetters
		}
		require.True(t, time.Now().Before(deadline), "no dead letter appeared")
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeadLettersE2E covers bounded redelivery into the dead-letter queue
// and the REST triage endpoints.
func TestDeadLettersE2E(t *testing.T) {
	t.Parallel()
	const limit = 2
	c := start(t, streamOpts(func(c *local.Config) {
		c.DeliveryLimit = limit
		c.SSEAckDelay = time.Hour // nothing is acknowledged: every reconnect redelivers
	}))
	status, _ := c.createQueue(t, "orders-q", nil)
	require.Equal(t, http.StatusCreated, status)
	c.publish(t, ev("orders.created", "/orders/1", map[string]any{"n": 1}))

	dls := c.exhaust(t, "orders-q", 1, limit, 1)
	require.Len(t, dls, 1)
	d := dls[0]
	require.NotEmpty(t, d.ID)
	require.Equal(t, "DELIVERY_LIMIT", d.Reason)
	require.Equal(t, "orders-q", d.OriginQueue)
	require.EqualValues(t, limit, d.DeliveryCount)
	require.False(t, d.DeadLetteredAt.IsZero())
	require.Equal(t, "orders.created", d.Event.EventType)
	require.Equal(t, "herald:dev", d.Event.PrincipalIdentity)
	require.JSONEq(t, `{"n":1}`, string(d.Event.Message))
	require.Equal(t, "/orders/1", d.ResourceID)

	// LEAVE changes nothing.
	out := c.act(t, map[string]string{"id": d.ID, "action": "LEAVE"})
	require.Equal(t, actionOutcome{ID: d.ID, Action: "LEAVE", Outcome: "LEFT"}, out[0])
	require.Len(t, c.listDeadLetters(t, nil).DeadLetters, 1)

	// REPLAY puts it back on its queue with a fresh budget.
	out = c.act(t, map[string]string{"id": d.ID, "action": "ACTION_REPLAY"})
	require.Equal(t, "REPLAYED", out[0].Outcome)
	require.Equal(t, "REPLAY", out[0].Action)
	require.Empty(t, c.listDeadLetters(t, nil).DeadLetters)
	s := c.mustStream(t, durablePath("orders-q"), nil)
	s.connected(t)
	e := s.event(t)
	require.Equal(t, "orders.created", e.EventType)
	require.JSONEq(t, `{"n":1}`, string(e.Message))
	s.close()

	// Replaying or discarding what is not there.
	out = c.act(t, map[string]string{"id": d.ID, "action": "REPLAY"}, map[string]string{"id": d.ID, "action": "DISCARD"})
	require.Equal(t, "REPLAY_FAILED", out[0].Outcome)
	require.NotEmpty(t, out[0].Detail)
	require.Equal(t, "DISCARDED", out[1].Outcome)
	require.NotEmpty(t, out[1].Detail)

	// Dead letters whose origin queue is gone stay put on REPLAY; DISCARD
	// drops them.
	status, _ = c.createQueue(t, "doomed-q", nil)
	require.Equal(t, http.StatusCreated, status)
	c.publish(t, ev("doomed.created", "", map[string]any{"n": 2}))
	c.publish(t, ev("doomed.created", "", map[string]any{"n": 3}))
	doomed := c.exhaust(t, "doomed-q", 2, limit, 2)
	require.Len(t, doomed, 2)
	c.expect(t, http.StatusOK, "DELETE", "/api/v1beta/queues/durable?queue_id=doomed-q", nil)
	out = c.act(t, map[string]string{"id": doomed[0].ID, "action": "REPLAY"}, map[string]string{"id": doomed[1].ID, "action": "REPLAY"})
	for _, o := range out {
		require.Equal(t, "ORIGIN_QUEUE_DELETED", o.Outcome)
		require.Contains(t, o.Detail, "queue")
	}
	require.Len(t, c.listDeadLetters(t, nil).DeadLetters, 2, "no loss: the copies stay")

	// Pagination.
	p := c.listDeadLetters(t, url.Values{"limit": {"1"}})
	require.Len(t, p.DeadLetters, 1)
	require.NotEmpty(t, p.NextPageToken)
	p2 := c.listDeadLetters(t, url.Values{"limit": {"1"}, "page_token": {p.NextPageToken}})
	require.Len(t, p2.DeadLetters, 1)
	require.NotEqual(t, p.DeadLetters[0].ID, p2.DeadLetters[0].ID)
	if p2.NextPageToken != "" {
		require.Empty(t, c.listDeadLetters(t, url.Values{"limit": {"1"}, "page_token": {p2.NextPageToken}}).DeadLetters)
	}

	out = c.act(t, map[string]string{"id": doomed[0].ID, "action": "discard"}, map[string]string{"id": doomed[1].ID, "action": "LEAVE"})
	require.Equal(t, "DISCARDED", out[0].Outcome)
	require.Equal(t, "LEFT", out[1].Outcome)
	left := c.listDeadLetters(t, nil).DeadLetters
	require.Len(t, left, 1)
	require.Equal(t, doomed[1].ID, left[0].ID)

	// Validation: nothing is done.
	for _, body := range []string{`{"actions":[]}`, `{}`, `{"actions":[{"id":"x","action":"EXPLODE"}]}`, `{"actions":[{"id":"","action":"LEAVE"}]}`} {
		c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/dead-letters/actions", body)
	}
	bad := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/dead-letters/actions",
		`{"actions":[{"id":"x","action":"LEAVE"},{"id":"y","action":"EXPLODE"}]}`)
	require.Equal(t, []any{map[string]any{"loc": []any{"body", "actions", float64(1), "action"}, "msg": bad.Message, "type": "value_error"}}, bad.Detail)
	c.expectError(t, http.StatusBadRequest, "POST", "/api/v1beta/dead-letters/actions", `{"actions":`)
	for _, l := range []string{"0", "101", "-1"} {
		c.expectError(t, http.StatusUnprocessableEntity, "GET", "/api/v1beta/dead-letters?limit="+l, nil)
	}
	c.expectError(t, http.StatusBadRequest, "GET", "/api/v1beta/dead-letters?limit=abc", nil)
	require.Len(t, c.listDeadLetters(t, nil).DeadLetters, 1)
}

// TestDeadLetterPermissionsE2E: both endpoints need
// inspect-and-replay-all-dlq.
func TestDeadLetterPermissionsE2E(t *testing.T) {
	t.Parallel()
	tokens := auth.StaticTokens{
		"ops":    {ID: "ops", Permissions: []string{"event-consumer-service:" + auth.PermInspectDeadLetters}},
		"reader": {ID: "reader", Permissions: []string{auth.PermReadEvents, auth.PermConsumeDurableQueues, "receive:*"}},
	}
	admin := start(t, streamOpts(func(c *local.Config) { c.Tokens = tokens }))
	ops := &client{base: admin.base, token: "ops", hc: admin.hc}
	reader := &client{base: admin.base, token: "reader", hc: admin.hc}
	reader.expectError(t, http.StatusForbidden, "GET", "/api/v1beta/dead-letters", nil)
	reader.expectError(t, http.StatusForbidden, "POST", "/api/v1beta/dead-letters/actions", `{"actions":[{"id":"x","action":"BOGUS"}]}`)
	require.Empty(t, ops.listDeadLetters(t, nil).DeadLetters)
	out := ops.act(t, map[string]string{"id": "x", "action": "LEAVE"})
	require.Equal(t, "LEFT", out[0].Outcome)
}

// TestWithheldEventWaitsForAReader (issue: a principal that may not read
// a durable queue's events could dead-letter them in under a second): a
// durable SSE stream whose principal may not read an event pulls more
// often than the delivery limit while the events after it flow to it. The
// event is never dead-lettered ("Events a principal may not read" in
// docs/limits.md): a stream that may read it gets it afterwards.
func TestWithheldEventWaitsForAReader(t *testing.T) {
	t.Parallel()
	const limit = 3
	tokens := auth.StaticTokens{
		"orders-reader": {ID: "orders-reader", Permissions: []string{"receive:orders.*", auth.PermConsumeDurableQueues}},
	}
	admin := start(t, streamOpts(func(c *local.Config) { c.Tokens = tokens; c.SSEAckDelay = 0; c.DeliveryLimit = limit }))
	orders := &client{base: admin.base, token: "orders-reader", hc: admin.hc}
	status, _ := admin.createQueue(t, "withheld-sse", nil)
	require.Equal(t, http.StatusCreated, status)
	s := orders.mustStream(t, durablePath("withheld-sse"), nil)
	s.connected(t)

	admin.publish(t, ev("users.created", "/u/1", map[string]any{"n": 1}))
	// One event at a time: each is a pull of its own, and every pull meets
	// the unreadable event first.
	for i := range limit + 3 {
		admin.publish(t, ev("orders.created", "/o/2", map[string]any{"n": 100 + i}))
		require.Equal(t, []int{100 + i}, nValues(t, s.events(t, 1)), "the readable events are not held up")
	}
	s.close()
	require.Empty(t, admin.listDeadLetters(t, nil).DeadLetters, "the reader's pulls dead-lettered nothing")

	a := admin.mustStream(t, durablePath("withheld-sse"), nil)
	a.connected(t)
	e := a.event(t)
	require.Equal(t, "users.created", e.EventType, "a stream that may read it gets it")
	require.Equal(t, []int{1}, nValues(t, []consumerEvent{e}))
	a.close()
	require.Empty(t, admin.listDeadLetters(t, nil).DeadLetters)
}
