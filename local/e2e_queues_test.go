package local_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/local"
)

// badQueueIDs break the notifications API's rule ^[A-Za-z0-9._-]{1,200}$.
var badQueueIDs = []string{
	"has space", strings.Repeat("q", 201), "a/b", "émoji", "tab\there", "new\nline", "q?x", "q#1", "q%20",
}

// TestDurableQueuesE2E covers POST, PATCH and DELETE
// /api/v1beta/queues/durable (the notifications API).
func TestDurableQueuesE2E(t *testing.T) {
	t.Parallel()

	t.Run("ensure-exists: 201 created, then 200 with the existing filters", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		status, q := c.createQueue(t, "myapp-uploads-queue", []map[string]any{{"event_type": "myapp.file.uploaded",
			"filters": []map[string]any{{"filter_type": "starts_with_greedy", "resource_id": "/uploads/"}}}})
		require.Equal(t, http.StatusCreated, status)
		require.Equal(t, "myapp-uploads-queue", q.QueueID)
		require.True(t, q.Created)
		want := `[{"event_type":"myapp.file.uploaded","filters":[{"filter_type":"starts_with_greedy","resource_id":"/uploads/"}]}]`
		require.JSONEq(t, want, string(q.FilterGroups))

		// Whatever filters are sent, the existing queue comes back unchanged.
		for _, groups := range []any{nil, []map[string]any{{"event_type": "other.type"}}} {
			status, q = c.createQueue(t, "myapp-uploads-queue", groups)
			require.Equal(t, http.StatusOK, status)
			require.False(t, q.Created)
			require.Equal(t, "myapp-uploads-queue", q.QueueID)
			require.JSONEq(t, want, string(q.FilterGroups))
		}
	})

	t.Run("an omitted or empty queue_id is generated: 200 created", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		seen := map[string]bool{}
		for _, body := range []string{`{}`, `{"queue_id":""}`, `{"queue_id":"","filter_groups":[{"event_type":"a.b"}]}`} {
			r := c.expect(t, http.StatusOK, "POST", "/api/v1beta/queues/durable", body)
			var q queueAnswer
			r.decode(t, &q)
			require.True(t, q.Created)
			require.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`), q.QueueID)
			require.False(t, seen[q.QueueID], "every generated id is new")
			seen[q.QueueID] = true
			// The generated id names a real queue.
			status, again := c.createQueue(t, q.QueueID, nil)
			require.Equal(t, http.StatusOK, status)
			require.False(t, again.Created)
		}
	})

	t.Run("a bad queue_id is 422 on every endpoint, naming the field", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		for _, id := range badQueueIDs {
			e := c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/queues/durable", map[string]any{"queue_id": id})
			require.Contains(t, e.Message, "queue_id")
			require.Contains(t, e.Message, "^[A-Za-z0-9._-]{1,200}$")
			c.expectError(t, http.StatusUnprocessableEntity, "PATCH", "/api/v1beta/queues/durable",
				map[string]any{"queue_id": id, "current_filter_groups": []any{}, "new_filter_groups": []any{}})
			c.expectError(t, http.StatusUnprocessableEntity, "DELETE", "/api/v1beta/queues/durable?"+url.Values{"queue_id": {id}}.Encode(), nil)
			_, r := c.openStream(t, durablePath(id), nil)
			require.NotNil(t, r)
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
		}
		// A missing queue_id on DELETE and on the durable stream is 422 too.
		c.expectError(t, http.StatusUnprocessableEntity, "DELETE", "/api/v1beta/queues/durable", nil)
		_, r := c.openStream(t, "/api/v1beta/events/stream-durable", nil)
		require.Equal(t, http.StatusUnprocessableEntity, r.Status)
		// The longest legal id is fine.
		status, _ := c.createQueue(t, strings.Repeat("Az0._-", 33)+"xy", nil)
		require.Equal(t, http.StatusCreated, status)
	})

	t.Run("invalid filter groups are 422, malformed JSON 400", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/queues/durable",
			`{"queue_id":"q","filter_groups":[{"event_type":""}]}`)
		c.expectError(t, http.StatusUnprocessableEntity, "POST", "/api/v1beta/queues/durable",
			`{"queue_id":"q","filter_groups":[{"event_type":"a.b","filters":[{"filter_type":"eq","resource_id":""}]}]}`)
		c.expectError(t, http.StatusBadRequest, "POST", "/api/v1beta/queues/durable", `{"queue_id":`)
		c.expectError(t, http.StatusBadRequest, "POST", "/api/v1beta/queues/durable", `{"queue_id":7}`)
		status, _ := c.createQueue(t, "q", nil)
		require.Equal(t, http.StatusCreated, status, "nothing was created by the refused calls")
	})

	t.Run("concurrent creates of one id: one creates, the others attach", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		const n = 12
		statuses := make([]int, n)
		answers := make([]queueAnswer, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r, err := c.call("POST", "/api/v1beta/queues/durable", map[string]any{
					"queue_id": "shared-q", "filter_groups": []map[string]any{{"event_type": fmt.Sprintf("t%d.x", i)}}})
				if err == nil {
					statuses[i] = r.Status
					err = json.Unmarshal(r.Body, &answers[i])
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		created := -1
		for i := range n {
			if statuses[i] == http.StatusCreated {
				require.Equal(t, -1, created, "only one call creates")
				require.True(t, answers[i].Created)
				created = i
			} else {
				require.Equal(t, http.StatusOK, statuses[i])
				require.False(t, answers[i].Created)
			}
		}
		require.NotEqual(t, -1, created)
		for i := range n {
			require.JSONEq(t, string(answers[created].FilterGroups), string(answers[i].FilterGroups), "every caller sees the winner's filters")
		}
		// The queue works: it has exactly one subscription, which delivers.
		s := c.mustStream(t, durablePath("shared-q"), nil)
		s.connected(t)
		c.publish(t, ev(fmt.Sprintf("t%d.x", created), "", map[string]any{"n": 1}))
		require.Equal(t, []int{1}, nValues(t, s.events(t, 1)))
	})

	t.Run("PATCH re-filters the queue without losing its backlog", func(t *testing.T) {
		t.Parallel()
		c := start(t, streamOpts(func(c *local.Config) { c.SSEAckDelay = 0 }))
		one := []map[string]any{{"event_type": "a.one"}}
		both := []map[string]any{{"event_type": "a.two"}, {"event_type": "a.one", "filters": []any{}}}
		status, _ := c.createQueue(t, "q", one)
		require.Equal(t, http.StatusCreated, status)
		c.publishN(t, "a.one", 0, 3)   // the backlog
		c.publishN(t, "a.two", 100, 1) // never the queue's
		patch := func(current, next any) *response {
			return c.must(t, "PATCH", "/api/v1beta/queues/durable",
				map[string]any{"queue_id": "q", "current_filter_groups": current, "new_filter_groups": next})
		}
		r := patch(one, both)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.JSONEq(t, `{"success":true}`, string(r.Body))
		_, q := c.createQueue(t, "q", nil)
		require.JSONEq(t, `[{"event_type":"a.two","filters":[]},{"event_type":"a.one","filters":[]}]`, string(q.FilterGroups))

		// Retrying the applied update succeeds (groups in any order); a
		// stale current is 422 and changes nothing.
		require.Equal(t, http.StatusOK, patch(one, []map[string]any{both[1], both[0]}).Status)
		r = patch([]map[string]any{{"event_type": "a.zero"}}, []map[string]any{{"event_type": "a.three"}})
		require.Equal(t, http.StatusUnprocessableEntity, r.Status)
		require.Contains(t, string(r.Body), "current_filter_groups")

		c.publishN(t, "a.two", 200, 1)
		c.publishN(t, "a.three", 300, 1)
		s := c.mustStream(t, durablePath("q"), nil)
		s.connected(t)
		// The backlog is intact, and the new filter selects a.two from now on.
		require.ElementsMatch(t, []int{0, 1, 2, 200}, nValues(t, s.events(t, 4)))

		r = c.must(t, "PATCH", "/api/v1beta/queues/durable", map[string]any{"queue_id": "nope", "current_filter_groups": []any{}, "new_filter_groups": []any{}})
		require.Equal(t, http.StatusNotFound, r.Status)
		r = patch(both, []map[string]any{{"event_type": ""}})
		require.Equal(t, http.StatusUnprocessableEntity, r.Status)
	})

	t.Run("DELETE: 200, then 404, and the id can be created again", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		status, _ := c.createQueue(t, "gone", nil)
		require.Equal(t, http.StatusCreated, status)
		r := c.expect(t, http.StatusOK, "DELETE", "/api/v1beta/queues/durable?queue_id=gone", nil)
		require.JSONEq(t, `{"success":true}`, string(r.Body))
		c.expectError(t, http.StatusNotFound, "DELETE", "/api/v1beta/queues/durable?queue_id=gone", nil)
		_, sr := c.openStream(t, durablePath("gone"), nil)
		require.Equal(t, http.StatusNotFound, sr.Status)
		status, q := c.createQueue(t, "gone", []map[string]any{{"event_type": "a.b"}})
		require.Equal(t, http.StatusCreated, status)
		require.True(t, q.Created)
	})

	t.Run("a queue_id taken by a durable consumer is not a queue", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil) // a durable consumer (durable-consumer API)
		c.expectError(t, http.StatusConflict, "POST", "/api/v1beta/queues/durable", map[string]any{"queue_id": id})
		c.expectError(t, http.StatusNotFound, "DELETE", "/api/v1beta/queues/durable?queue_id="+id, nil)
		c.getDest(t, id) // untouched
	})
}

// TestQueueIdleExpiryE2E covers the notifications API's "Durable Queue Lifetime": a
// queue without an attached consumer for the idle window is deleted with
// what it holds, every call then answers 404, and creating it again with
// the same id and filters works.
func TestQueueIdleExpiryE2E(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := start(t, local.WithClock(clk.Now), streamOpts(func(c *local.Config) {
		c.ReapInterval = config.MaxReapInterval // the test runs the job itself
		c.QueueIdleWindow = time.Hour
		c.SSEAckDelay = 0
		c.SessionTTL = 48 * time.Hour // the attached session outlives the clock's jumps
	}))
	groups := []map[string]any{{"event_type": "a.b"}}
	status, _ := c.createQueue(t, "idle-q", groups)
	require.Equal(t, http.StatusCreated, status)
	status, _ = c.createQueue(t, "busy-q", groups)
	require.Equal(t, http.StatusCreated, status)

	// busy-q has a consumer attached; idle-q holds events nobody reads.
	s := c.mustStream(t, durablePath("busy-q"), nil)
	s.connected(t)
	c.publishN(t, "a.b", 0, 2)
	require.ElementsMatch(t, []int{0, 1}, nValues(t, s.events(t, 2)))

	clk.Advance(59 * time.Minute)
	require.EqualValues(t, 0, c.runJob(t, "reap-idle-queues")["reaped_queues"], "inside the window nothing is reaped")
	status, _ = c.createQueue(t, "idle-q", nil)
	require.Equal(t, http.StatusOK, status, "re-declaring does not keep a queue alive, but it is still there")

	clk.Advance(2 * time.Minute)
	res := c.runJob(t, "reap-idle-queues")
	require.EqualValues(t, 1, res["reaped_queues"], "%v", res)
	require.EqualValues(t, 0, res["failed"])

	c.expectError(t, http.StatusNotFound, "DELETE", "/api/v1beta/queues/durable?queue_id=idle-q", nil)
	c.expectError(t, http.StatusNotFound, "PATCH", "/api/v1beta/queues/durable",
		map[string]any{"queue_id": "idle-q", "current_filter_groups": groups, "new_filter_groups": groups})
	_, r := c.openStream(t, durablePath("idle-q"), nil)
	require.Equal(t, http.StatusNotFound, r.Status)

	// The attached queue lives on and still delivers.
	c.publishN(t, "a.b", 2, 1)
	require.Equal(t, []int{2}, nValues(t, s.events(t, 1)))

	// Re-created with the same id and filters, the queue starts empty at
	// the head of the stream.
	status, q := c.createQueue(t, "idle-q", groups)
	require.Equal(t, http.StatusCreated, status)
	require.True(t, q.Created)
	s2 := c.mustStream(t, durablePath("idle-q"), nil)
	s2.connected(t)
	c.publishN(t, "a.b", 3, 1)
	require.Equal(t, []int{3}, nValues(t, s2.events(t, 1)))
}

// TestLocalReaperE2E checks that the local adapter runs the reaper by
// itself.
func TestLocalReaperE2E(t *testing.T) {
	t.Parallel()
	clk := newClock()
	c := start(t, local.WithClock(clk.Now), streamOpts(func(c *local.Config) {
		c.ReapInterval = 20 * time.Millisecond
		c.QueueIdleWindow = time.Minute
	}))
	status, _ := c.createQueue(t, "q", nil)
	require.Equal(t, http.StatusCreated, status)
	clk.Advance(2 * time.Minute)
	// Re-declaring does not keep the queue alive: once the reaper has run,
	// the same call creates it anew.
	deadline := time.Now().Add(frameWait)
	for {
		status, q := c.createQueue(t, "q", nil)
		if status == http.StatusCreated {
			require.True(t, q.Created)
			break
		}
		require.Equal(t, http.StatusOK, status)
		require.True(t, time.Now().Before(deadline), "the reaper never ran")
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQueuePermissionsE2E checks the three deployment-wide durable-queue
// permissions: each allows its own call only.
func TestQueuePermissionsE2E(t *testing.T) {
	t.Parallel()
	tokens := auth.StaticTokens{
		"creator":  {ID: "creator", Permissions: []string{auth.PermCreateDurableQueues}},
		"deleter":  {ID: "deleter", Permissions: []string{"event-consumer-service:" + auth.PermDeleteDurableQueues}},
		"consumer": {ID: "consumer", Permissions: []string{auth.PermConsumeDurableQueues, "receive:*"}},
		"reader":   {ID: "reader", Permissions: []string{auth.PermReadEvents, "receive:*"}},
	}
	admin := start(t, streamOpts(func(c *local.Config) { c.Tokens = tokens }))
	as := func(tok string) *client { return &client{base: admin.base, token: tok, hc: admin.hc} }
	creator, deleter, consumer, reader := as("creator"), as("deleter"), as("consumer"), as("reader")

	for _, who := range []*client{deleter, consumer, reader} {
		e := who.expectError(t, http.StatusForbidden, "POST", "/api/v1beta/queues/durable", `{"queue_id":"q"}`)
		require.Equal(t, "permission_denied", e.Code)
		who.expectError(t, http.StatusForbidden, "PATCH", "/api/v1beta/queues/durable",
			`{"queue_id":"q","current_filter_groups":[],"new_filter_groups":[]}`)
	}
	status, _ := creator.createQueue(t, "q", nil)
	require.Equal(t, http.StatusCreated, status)
	creator.expect(t, http.StatusOK, "PATCH", "/api/v1beta/queues/durable",
		`{"queue_id":"q","current_filter_groups":[],"new_filter_groups":[{"event_type":"a.b"}]}`)

	for _, who := range []*client{creator, deleter, reader} {
		_, r := who.openStream(t, durablePath("q"), nil)
		require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	}
	s := consumer.mustStream(t, durablePath("q"), nil)
	require.Equal(t, "q", s.connected(t))
	s.close()

	for _, who := range []*client{creator, consumer, reader} {
		who.expectError(t, http.StatusForbidden, "DELETE", "/api/v1beta/queues/durable?queue_id=q", nil)
	}
	deleter.expect(t, http.StatusOK, "DELETE", "/api/v1beta/queues/durable?queue_id=q", nil)
}
