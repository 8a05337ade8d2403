package local_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/local"
)

// groupsJSON encodes filter groups for a query parameter.
func groupsJSON(t testing.TB, groups any) string {
	t.Helper()
	b, err := json.Marshal(groups)
	require.NoError(t, err)
	return string(b)
}

// TestNonDurableStreamE2E covers GET /api/v1beta/events/stream (the notifications API).
func TestNonDurableStreamE2E(t *testing.T) {
	t.Parallel()

	t.Run("connected frame, then events as the notifications API's Event", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := c.mustStream(t, streamPath("filter_groups", `[{"event_type":"myapp.user.created"}]`), nil)
		require.Equal(t, "text/event-stream", s.header.Get("Content-Type"))
		token := s.connected(t)
		require.NoError(t, delivery.ValidateReconnectToken("t", token), "issued tokens pass the rule")
		c.publish(t, map[string]any{"event_type": "myapp.user.created", "message": map[string]any{"user_id": "123"},
			"occurred_at": "2024-10-16T14:30:00Z", "resource": map[string]any{"resource_id": "/users/123"}})
		f := s.next(t)
		require.Equal(t, "event", f.Event)
		require.False(t, f.HasID)
		var raw map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(f.Data), &raw))
		require.ElementsMatch(t, []string{"event_type", "principal_identity", "occurred_at", "published_at", "message", "id", "resource"}, keys(raw))
		require.JSONEq(t, `{"resource_id":"/users/123"}`, string(raw["resource"]))
		var e consumerEvent
		require.NoError(t, json.Unmarshal([]byte(f.Data), &e))
		require.Equal(t, "myapp.user.created", e.EventType)
		require.Equal(t, "herald:dev", e.PrincipalIdentity)
		require.Equal(t, "2024-10-16T14:30:00Z", e.OccurredAt)
		pub, err := time.Parse(time.RFC3339Nano, e.PublishedAt)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), pub, time.Hour)
		require.JSONEq(t, `{"user_id":"123"}`, string(e.Message))
	})

	t.Run("Last-Event-ID resumes with the backlog, on the queue's own filters", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := c.mustStream(t, streamPath("filter_groups", `[{"event_type":"a.b"}]`), nil)
		token := s.connected(t)
		s.closeAndWait(t, c, token)
		c.publishN(t, "a.b", 1, 2)
		c.publishN(t, "a.c", 3, 1)
		// A browser replays the URL it opened; here the URL even names
		// other filters: without previous_filter_groups they are ignored.
		s = c.mustStream(t, streamPath("filter_groups", `[{"event_type":"a.c"}]`), map[string]string{"Last-Event-ID": token})
		require.Equal(t, token, s.connected(t), "the same queue")
		require.ElementsMatch(t, []int{1, 2}, nValues(t, s.events(t, 2)))
		c.publishN(t, "a.c", 4, 1)
		c.publishN(t, "a.b", 5, 1)
		require.Equal(t, []int{5}, nValues(t, s.events(t, 1)), "a.c was never the queue's")
	})

	t.Run("the deprecated reconnect_token query parameter works; the header wins", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s1 := c.mustStream(t, streamPath(), nil)
		t1 := s1.connected(t)
		s1.close()
		s2 := c.mustStream(t, streamPath(), nil)
		t2 := s2.connected(t)
		s2.close()
		require.NotEqual(t, t1, t2)
		s := c.mustStream(t, streamPath("reconnect_token", t1), nil)
		require.Equal(t, t1, s.connected(t))
		s.close()
		s = c.mustStream(t, streamPath("reconnect_token", t1), map[string]string{"Last-Event-ID": t2})
		require.Equal(t, t2, s.connected(t))
	})

	t.Run("previous_filter_groups makes a reconnect a filter update", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		ab, ac := `[{"event_type":"a.b"}]`, `[{"event_type":"a.c","filters":[]}]`
		s := c.mustStream(t, streamPath("filter_groups", ab), nil)
		token := s.connected(t)
		s.closeAndWait(t, c, token)
		c.publishN(t, "a.b", 1, 1) // held by the queue
		hdr := map[string]string{"Last-Event-ID": token}

		// A previous_filter_groups that is not the queue's: 422.
		_, r := c.openStream(t, streamPath("filter_groups", ac, "previous_filter_groups", `[{"event_type":"x.y"}]`), hdr)
		require.Equal(t, http.StatusUnprocessableEntity, r.Status)
		require.Contains(t, string(r.Body), "previous_filter_groups")

		s = c.mustStream(t, streamPath("filter_groups", ac, "previous_filter_groups", ab), hdr)
		require.Equal(t, token, s.connected(t))
		c.publishN(t, "a.b", 2, 1)
		c.publishN(t, "a.c", 3, 1)
		require.Equal(t, []int{3}, nValues(t, s.events(t, 1)), "the held a.b event no longer passes the filters; new a.b ones are not taken")
		s.closeAndWait(t, c, token)

		// The browser's automatic reconnect replays the update URL: the
		// queue already has the new filters, so it resumes as is.
		s = c.mustStream(t, streamPath("filter_groups", ac, "previous_filter_groups", ab), hdr)
		require.Equal(t, token, s.connected(t))
		c.publishN(t, "a.c", 4, 1)
		require.Equal(t, []int{4}, nValues(t, s.events(t, 1)))
	})

	t.Run("a token that breaks the rule is 422 naming the field, quoting none of it", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		secretish := "s3cr3tish"
		for _, tok := range []string{
			secretish + " with space", secretish + strings.Repeat("x", 200), secretish + "tökén", secretish + "\ttab",
		} {
			_, r := c.openStream(t, streamPath(), map[string]string{"Last-Event-ID": tok})
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%q", tok)
			var e errorBody
			r.decode(t, &e)
			require.Contains(t, e.Message, "Last-Event-ID")
			require.Contains(t, e.Message, "printable ASCII")
			containsNone(t, r.Body, secretish)
		}
		for _, tok := range []string{
			"", secretish + " with space", secretish + strings.Repeat("x", 200), secretish + "\x01", secretish + "\x7f", secretish + "\u00e9", secretish + "\n",
		} {
			_, r := c.openStream(t, streamPath("reconnect_token", tok), nil)
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%q", tok)
			var e errorBody
			r.decode(t, &e)
			require.Contains(t, e.Message, "reconnect_token")
			require.Contains(t, e.Message, "printable ASCII")
			containsNone(t, r.Body, secretish)
		}
		// 200 printable characters, every one from 0x21 to 0x7E, is legal
		// (and names no queue).
		var b strings.Builder
		for i := range 200 {
			b.WriteByte(byte(0x21 + i%94))
		}
		_, r := c.openStream(t, streamPath(), map[string]string{"Last-Event-ID": b.String()})
		require.Equal(t, http.StatusNotFound, r.Status)
	})

	t.Run("a legal token that names no live queue is 404", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for _, hdr := range []map[string]string{{"Last-Event-ID": "no-such-queue"}, nil} {
			path := streamPath()
			if hdr == nil {
				path = streamPath("reconnect_token", "no-such-queue")
			}
			_, r := c.openStream(t, path, hdr)
			require.Equal(t, http.StatusNotFound, r.Status)
			var e errorBody
			r.decode(t, &e)
			require.Equal(t, "not_found", e.Code)
		}
		// A durable queue's id is not a reconnect token.
		status, _ := c.createQueue(t, "durable-one", nil)
		require.Equal(t, http.StatusCreated, status)
		_, r := c.openStream(t, streamPath(), map[string]string{"Last-Event-ID": "durable-one"})
		require.Equal(t, http.StatusNotFound, r.Status)
	})

	t.Run("clients sharing a token split the queue's events", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s1 := c.mustStream(t, streamPath(), nil)
		token := s1.connected(t)
		s2 := c.mustStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
		require.Equal(t, token, s2.connected(t))
		const n = 60
		c.publishN(t, "a.b", 0, n)
		seen := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		got := make(chan int, n)
		for _, s := range []*sseConn{s1, s2} {
			wg.Go(func() {
				for {
					select {
					case f := <-s.frames:
						if f.Event == "event" {
							var e consumerEvent
							if json.Unmarshal([]byte(f.Data), &e) == nil {
								var m struct{ N int }
								_ = json.Unmarshal(e.Message, &m)
								got <- m.N
							}
						}
					case <-s.done:
						return
					}
				}
			})
		}
		for range n {
			select {
			case v := <-got:
				mu.Lock()
				seen[v]++
				mu.Unlock()
			case <-time.After(frameWait):
				require.FailNow(t, "events missing", "got %d of %d", len(seen), n)
			}
		}
		s1.close()
		s2.close()
		wg.Wait()
		require.Len(t, seen, n)
		for v, k := range seen {
			require.Equal(t, 1, k, "event %d delivered once", v)
		}
		require.Empty(t, got, "no event was delivered twice")
	})

	t.Run("keep-alive comments keep an idle stream talking", func(t *testing.T) {
		t.Parallel()
		c := start(t, streamOpts(func(c *local.Config) { c.SSEKeepAlive = 20 * time.Millisecond }))
		s := c.mustStream(t, streamPath(), nil)
		s.connected(t)
		for {
			if f := s.frame(t); f.Comment != "" {
				require.Equal(t, "keep-alive", f.Comment)
				break
			}
		}
		c.publishN(t, "a.b", 7, 1)
		require.Equal(t, []int{7}, nValues(t, s.events(t, 1)))
	})

	t.Run("the reconnect grace window", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now), streamOpts(func(c *local.Config) {
			c.ReapInterval = config.MaxReapInterval
			c.ProcessHeartbeat = 100 * time.Millisecond
		}))
		s := c.mustStream(t, streamPath(), nil)
		token := s.connected(t)
		s.close()
		status := func() int {
			r, err := c.raw("GET", "/v1/event-destinations/"+token, c.token, nil)
			require.NoError(t, err)
			return r.Status
		}
		// Whenever the server sees the client leave (before or after the
		// clock moves), 19 s later the queue is still there, and a minute
		// later it is gone: its home process deletes it (the stream hub,
		// docs/streams-at-scale.md), and the reaper job has nothing to do.
		clk.Advance(19 * time.Second)
		time.Sleep(300 * time.Millisecond) // three of the home's sweeps
		require.Equal(t, http.StatusOK, status(), "inside the grace window")
		require.EqualValues(t, 0, c.runJob(t, "reap-idle-queues")["reaped_queues"])
		clk.Advance(41 * time.Second)
		require.Eventually(t, func() bool { return status() == http.StatusNotFound }, 10*time.Second, 20*time.Millisecond,
			"the queue goes at the home's next sweep past the grace window")
		_, r := c.openStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
		require.Equal(t, http.StatusNotFound, r.Status)
		// A fresh stream with no token starts over.
		s = c.mustStream(t, streamPath(), nil)
		require.NotEqual(t, token, s.connected(t))
	})

	t.Run("the reconnect grace window without a hub", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now), streamOpts(func(c *local.Config) {
			c.ReapInterval = config.MaxReapInterval
			c.ProcessHeartbeat = 0 // a stream is a session in the store, reaped by the job
		}))
		s := c.mustStream(t, streamPath(), nil)
		token := s.connected(t)
		s.close()
		clk.Advance(19 * time.Second)
		require.EqualValues(t, 0, c.runJob(t, "reap-idle-queues")["reaped_queues"])
		clk.Advance(41 * time.Second)
		require.EqualValues(t, 1, c.runJob(t, "reap-idle-queues")["reaped_queues"])
		_, r := c.openStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
		require.Equal(t, http.StatusNotFound, r.Status)
	})
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDurableStreamE2E covers GET /api/v1beta/events/stream-durable.
func TestDurableStreamE2E(t *testing.T) {
	t.Parallel()

	t.Run("events, acknowledged after the delay", func(t *testing.T) {
		t.Parallel()
		c := start(t, streamOpts(func(c *local.Config) { c.SSEAckDelay = 10 * time.Millisecond }))
		status, _ := c.createQueue(t, "q", []map[string]any{{"event_type": "a.b"}})
		require.Equal(t, http.StatusCreated, status)
		s := c.mustStream(t, durablePath("q"), nil)
		require.Equal(t, "q", s.connected(t), "the queue id is the connected frame's id")
		c.publishN(t, "a.b", 0, 3)
		require.ElementsMatch(t, []int{0, 1, 2}, nValues(t, s.events(t, 3)))
		waitSettled(t, c, "q")
		s.closeAndWait(t, c, "q")
		s = c.mustStream(t, durablePath("q"), nil)
		s.connected(t)
		c.publishN(t, "a.b", 3, 1)
		require.Equal(t, []int{3}, nValues(t, s.events(t, 1)), "acknowledged events are not delivered again")
	})

	t.Run("events not yet acknowledged when the client leaves are delivered again", func(t *testing.T) {
		t.Parallel()
		c := start(t, streamOpts(func(c *local.Config) { c.SSEAckDelay = time.Hour }))
		status, _ := c.createQueue(t, "q", nil)
		require.Equal(t, http.StatusCreated, status)
		s := c.mustStream(t, durablePath("q"), nil)
		s.connected(t)
		c.publishN(t, "a.b", 0, 2)
		require.ElementsMatch(t, []int{0, 1}, nValues(t, s.events(t, 2)))
		s.close()
		s = c.mustStream(t, durablePath("q"), nil)
		s.connected(t)
		require.ElementsMatch(t, []int{0, 1}, nValues(t, s.events(t, 2)))
	})

	t.Run("a queue deleted under a running stream ends it with a 404 error event", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		status, _ := c.createQueue(t, "q", nil)
		require.Equal(t, http.StatusCreated, status)
		s := c.mustStream(t, durablePath("q"), nil)
		s.connected(t)
		c.expect(t, http.StatusOK, "DELETE", "/api/v1beta/queues/durable?queue_id=q", nil)
		msg, code := s.streamError(t)
		require.Equal(t, http.StatusNotFound, code)
		require.Contains(t, msg, "q")
	})

	t.Run("unknown queue 404, bad id 422, before the stream opens", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		_, r := c.openStream(t, durablePath("nope"), nil)
		require.Equal(t, http.StatusNotFound, r.Status)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		_, r = c.openStream(t, durablePath("no pe"), nil)
		require.Equal(t, http.StatusUnprocessableEntity, r.Status)
	})
}

// waitSettled waits until consumer id holds no delivered, unacknowledged
// event (its in_flight count, as GET /v1/event-destinations/{id} shows it).
func waitSettled(t testing.TB, c *client, id string) {
	t.Helper()
	deadline := time.Now().Add(frameWait)
	for {
		if c.getDest(t, id).InFlight == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "events of %s stay unacknowledged", id)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamPermissionsE2E checks per-event authorization on streams and
// durable-consumer pulls, and the access_token query parameter.
func TestStreamPermissionsE2E(t *testing.T) {
	t.Parallel()
	tokens := auth.StaticTokens{
		"orders-reader": {ID: "orders-reader", Permissions: []string{"receive:orders.*", auth.PermReadEvents, auth.PermConsumeDurableQueues}},
		"no-receive":    {ID: "no-receive", Permissions: []string{auth.PermReadEvents, auth.PermConsumeDurableQueues, "publish:*"}},
	}
	admin := start(t, streamOpts(func(c *local.Config) { c.Tokens = tokens; c.SSEAckDelay = 0 }))
	as := func(tok string) *client { return &client{base: admin.base, token: tok, hc: admin.hc} }
	orders, none := as("orders-reader"), as("no-receive")

	t.Run("a non-durable stream needs a receive right", func(t *testing.T) {
		_, r := none.openStream(t, streamPath(), nil)
		require.Equal(t, http.StatusForbidden, r.Status)
		require.Contains(t, string(r.Body), "receive:")
	})

	t.Run("events a principal may not read are skipped, never delivered", func(t *testing.T) {
		s := orders.mustStream(t, streamPath(), nil)
		token := s.connected(t)
		admin.publish(t, ev("users.created", "", map[string]any{"n": 1}))
		admin.publish(t, ev("orders.created", "", map[string]any{"n": 2}))
		e := s.event(t)
		require.Equal(t, "orders.created", e.EventType)
		s.closeAndWait(t, admin, token)
		// The skipped event waits in the queue, never settled by this
		// principal (docs/limits.md); it is not shown on reconnect
		// either.
		s = orders.mustStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
		s.connected(t)
		admin.publish(t, ev("orders.created", "", map[string]any{"n": 3}))
		require.Equal(t, []int{3}, nValues(t, s.events(t, 1)))
	})

	t.Run("durable streams check every event too", func(t *testing.T) {
		status, _ := admin.createQueue(t, "mixed", nil)
		require.Equal(t, http.StatusCreated, status)
		s := orders.mustStream(t, durablePath("mixed"), nil)
		s.connected(t)
		admin.publish(t, ev("users.created", "", map[string]any{"n": 1}))
		admin.publish(t, ev("orders.created", "", map[string]any{"n": 2}))
		require.Equal(t, []int{2}, nValues(t, s.events(t, 1)))
	})

	t.Run("durable-consumer pulls never settle what the caller may not read", func(t *testing.T) {
		id := admin.create(t, nil)
		admin.publish(t, ev("orders.created", "", map[string]any{"n": 1}))
		admin.publish(t, ev("users.created", "", map[string]any{"n": 2}))
		admin.publish(t, ev("orders.created", "", map[string]any{"n": 3}))
		l := orders.pullLease(t, id, "limit", "1")
		heads := l.heads(t)
		require.Len(t, heads, 1)
		require.Equal(t, "orders.created", heads[0].Type)
		orders.ack(t, id, l.LeaseID, l.Generation, "ok")
		// users.created is next: 403 naming it, with a Retry-After, and
		// nothing is settled, leased or counted, however often it is asked
		// for (past the delivery limit).
		var retryAfter []string
		for range 12 {
			for _, c := range []*client{orders, none} {
				r := c.pull(t, id, "limit", "10")
				require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
				require.Contains(t, string(r.Body), "users.created")
				retryAfter = append(retryAfter, r.Header.Get("Retry-After"))
			}
		}
		d := admin.getDest(t, id)
		require.Equal(t, "001.00000000000000000001", d.Committed)
		require.Zero(t, d.InFlight)
		require.Empty(t, admin.listDeadLetters(t, nil).DeadLetters)
		for _, ra := range retryAfter {
			require.Equal(t, "5", ra, "a refused pull says when to ask again")
		}
		// A worker that may read them gets both, in order, as a first
		// delivery.
		l = admin.pullLease(t, id, "limit", "10")
		heads = l.heads(t)
		require.Len(t, heads, 2)
		require.Equal(t, "users.created", heads[0].Type)
		require.Equal(t, "001.00000000000000000002", heads[0].Sequence, "the event keeps its position")
		require.EqualValues(t, 1, l.Attempt, "refused pulls are not deliveries")
		a := admin.ack(t, id, l.LeaseID, l.Generation, "ok")
		require.Equal(t, "001.00000000000000000003", a.Committed)
	})

	t.Run("access_token authenticates the SSE endpoints only, and is never echoed", func(t *testing.T) {
		anon := &client{base: admin.base, hc: admin.hc}
		s := anon.mustStream(t, streamPath("access_token", "orders-reader"), nil)
		s.connected(t)
		s.close()
		s = anon.mustStream(t, "/api/v1beta/events/stream-durable?"+url.Values{"queue_id": {"mixed"}, "access_token": {"orders-reader"}}.Encode(), nil)
		require.Equal(t, "mixed", s.connected(t))
		s.close()
		const wrong = "wrong-access-token-s3cr3t"
		_, r := anon.openStream(t, streamPath("access_token", wrong), nil)
		checkUnauthorized(t, r, wrong)
		// Not accepted elsewhere.
		r2, err := anon.raw("POST", "/api/v1beta/queues/durable?access_token=orders-reader", "", []byte(`{}`))
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, r2.Status)
		// The header wins over the parameter.
		_, r = none.openStream(t, streamPath("access_token", "orders-reader"), nil)
		require.Equal(t, http.StatusForbidden, r.Status)
	})
}

// TestSSEEventsCarryIDAndResource: an SSE event frame carries the
// event's id — the id of its CloudEvent, the same whichever consumer or
// transport delivers it, so a consumer can drop duplicates — and its
// resource, as members the published EventData schema allows; an event
// published without a resource has none.
func TestSSEEventsCarryIDAndResource(t *testing.T) {
	t.Parallel()
	c := start(t)
	const typ = "sse.ids"
	dest := c.create(t, []map[string]any{{"event_type": typ}})
	s := c.mustStream(t, streamPath("filter_groups", `[{"event_type":"`+typ+`","filters":[]}]`), nil)
	s.connected(t)
	c.publish(t, ev(typ, "/orders/1", map[string]any{"n": 1}), ev(typ, "", map[string]any{"n": 2}))
	got := s.events(t, 2)
	l := c.pullLease(t, dest, "limit", "2")
	heads := l.heads(t)
	require.Len(t, heads, 2)
	require.Equal(t, heads[0].ID, got[0].ID, "the id is the event's CloudEvent id")
	require.Equal(t, heads[1].ID, got[1].ID)
	require.NotEqual(t, got[0].ID, got[1].ID)
	require.NotNil(t, got[0].Resource)
	require.Equal(t, "/orders/1", got[0].Resource.ResourceID)
	require.Nil(t, got[1].Resource, "an event published without a resource has none")
}
