package local_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/local"
)

// extendResult is the extend answer.
type extendResult struct {
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

func (c *client) extend(t testing.TB, id string, l lease, visibility int) extendResult {
	t.Helper()
	var r extendResult
	c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/extend",
		map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "visibility": visibility}).decode(t, &r)
	return r
}

func (c *client) ackWith(t testing.TB, id string, body map[string]any) ackResult {
	t.Helper()
	var a ackResult
	c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/acknowledge", body).decode(t, &a)
	return a
}

// TestDeliveryControlsE2E covers extend, failed with retryAfter, rejected,
// and the per-consumer policies over REST.
func TestDeliveryControlsE2E(t *testing.T) {
	t.Parallel()

	t.Run("a worker keeps its lease for an hour by extending it", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 1)...)
		l := c.pullLease(t, id, "workerId", "w1", "visibility", "60")
		for range 12 {
			clk.Advance(5 * time.Minute)
			r := c.extend(t, id, l, 600)
			require.Equal(t, "extended", r.Status)
			require.NotNil(t, r.ExpiresAt)
			require.True(t, r.ExpiresAt.Equal(clk.Now().Add(600*time.Second)), "expiresAt %v", r.ExpiresAt)
			require.Equal(t, http.StatusNoContent, c.pull(t, id, "workerId", "w2").Status, "nobody else gets it")
		}
		require.Equal(t, "committed", c.ack(t, id, l.LeaseID, l.Generation, "ok").Status)
		r := c.extend(t, id, l, 60)
		require.Equal(t, "stale", r.Status, "an acknowledged lease")
		require.Nil(t, r.ExpiresAt)

		// The cap: 12 hours from the hand-out.
		c.publish(t, eventsOf("a.b", 1)...)
		l = c.pullLease(t, id, "workerId", "w1")
		clk.Advance(12 * time.Hour)
		e := c.expectError(t, http.StatusBadRequest, "POST", "/v1/event-destinations/"+id+"/extend",
			map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "visibility": 1})
		require.Contains(t, e.Message, "12 hours")
	})

	t.Run("extend checks its body like acknowledge", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		path := "/v1/event-destinations/" + id + "/extend"
		for _, body := range []map[string]any{
			{"leaseId": "x", "generation": 0},
			{"leaseId": "x", "generation": 0, "visibility": 0},
			{"leaseId": "x", "generation": 0, "visibility": 601},
			{"generation": 0, "visibility": 60},
			{"leaseId": "x", "visibility": 60},
			{"leaseId": "x", "generation": 0, "visibility": 60, "delay": 5},
		} {
			c.expectError(t, http.StatusBadRequest, "POST", path, body)
		}
		c.expectError(t, http.StatusNotFound, "POST", "/v1/event-destinations/00000000-0000-4000-8000-000000000000/extend",
			map[string]any{"leaseId": "x", "generation": 0, "visibility": 60})
		var r extendResult
		c.expect(t, http.StatusOK, "POST", path, map[string]any{"leaseId": "x", "generation": 0, "visibility": 60}).decode(t, &r)
		require.Equal(t, "stale", r.Status, "an unknown lease")
		// Allowed while paused.
		c.publish(t, eventsOf("a.b", 1)...)
		l := c.pullLease(t, id)
		c.must(t, "POST", "/v1/event-destinations/"+id+"/pause", nil)
		require.Equal(t, "extended", c.extend(t, id, l, 30).Status)
	})

	t.Run("a lease failed with retryAfter waits while new work flows", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 1)...)
		l := c.pullLease(t, id, "workerId", "w1", "limit", "1")
		a := c.ackWith(t, id, map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": "failed", "retryAfter": 30})
		require.Equal(t, "requeued", a.Status)
		c.publish(t, eventsOf("c.d", 1)...)
		next := c.pullLease(t, id, "workerId", "w2")
		require.NotEqual(t, l.LeaseID, next.LeaseID, "new work flows meanwhile")
		require.Equal(t, "c.d", next.heads(t)[0].Type)
		clk.Advance(29 * time.Second)
		require.Equal(t, http.StatusNoContent, c.pull(t, id, "workerId", "w3").Status, "not before 30 s")
		clk.Advance(time.Second)
		again := c.pullLease(t, id, "workerId", "w3")
		require.Equal(t, l.LeaseID, again.LeaseID)
		require.EqualValues(t, 1, again.Generation)
		require.EqualValues(t, 2, again.Attempt)
	})

	t.Run("acknowledge bodies are strict", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		path := "/v1/event-destinations/" + id + "/acknowledge"
		e := c.expectError(t, http.StatusBadRequest, "POST", path, map[string]any{"leaseId": "x", "generation": 0, "status": "failed", "delay": 30})
		require.Contains(t, e.Message, `unknown field "delay"`)
		for _, body := range []map[string]any{
			{"leaseId": "x", "generation": 0, "status": "ok", "retryAfter": 5},
			{"leaseId": "x", "generation": 0, "status": "failed", "retryAfter": -1},
			{"leaseId": "x", "generation": 0, "status": "failed", "retryAfter": 43201},
			{"leaseId": "x", "generation": 0, "status": "failed", "retryAfter": 1.5},
			{"leaseId": "x", "generation": 0, "status": "deferred"},
		} {
			c.expectError(t, http.StatusBadRequest, "POST", path, body)
		}
		a := c.ackWith(t, id, map[string]any{"leaseId": "x", "generation": 0, "status": "failed", "retryAfter": 43200})
		require.Equal(t, "stale", a.Status)
	})

	t.Run("a rejected lease is dead-lettered at once and the cursor passes it", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("poison.x", 1)...)
		l := c.pullLease(t, id)
		a := c.ack(t, id, l.LeaseID, l.Generation, "rejected")
		require.Equal(t, "dead_lettered", a.Status)
		require.Equal(t, l.heads(t)[0].Sequence, a.Committed)
		var page struct {
			DeadLetters []struct {
				Reason        string `json:"reason"`
				OriginQueue   string `json:"origin_queue"`
				DeliveryCount int64  `json:"delivery_count"`
			} `json:"dead_letters"`
		}
		c.expect(t, http.StatusOK, "GET", "/api/v1beta/dead-letters", nil).decode(t, &page)
		require.Len(t, page.DeadLetters, 1)
		require.Equal(t, "REJECTED", page.DeadLetters[0].Reason)
		require.Equal(t, id, page.DeadLetters[0].OriginQueue)
		require.EqualValues(t, 1, page.DeadLetters[0].DeliveryCount)
		require.Equal(t, "stale", c.ack(t, id, l.LeaseID, l.Generation, "ok").Status)
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status)
	})

	t.Run("per-consumer policies: backoff and max_delivery_attempts", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		var d destination
		c.expect(t, http.StatusCreated, "POST", "/v1/event-destinations", map[string]any{
			"type":               "DURABLE_CONSUMER",
			"retry_policy":       map[string]any{"minimum_backoff": 10, "maximum_backoff": 20},
			"dead_letter_policy": map[string]any{"max_delivery_attempts": 3},
		}).decode(t, &d)
		id := d.ID
		var raw map[string]any
		c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id, nil).decode(t, &raw)
		require.Equal(t, map[string]any{"minimum_backoff": 10.0, "maximum_backoff": 20.0}, raw["retry_policy"])
		require.Equal(t, map[string]any{"max_delivery_attempts": 3.0}, raw["dead_letter_policy"])

		c.publish(t, eventsOf("a.b", 1)...)
		l := c.pullLease(t, id)
		for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
			require.Equal(t, "requeued", c.ack(t, id, l.LeaseID, l.Generation, "failed").Status)
			clk.Advance(wait - time.Second)
			require.Equal(t, http.StatusNoContent, c.pull(t, id).Status, "backing off %v", wait)
			clk.Advance(time.Second)
			l = c.pullLease(t, id)
		}
		require.EqualValues(t, 3, l.Attempt)
		require.Equal(t, "requeued", c.ack(t, id, l.LeaseID, l.Generation, "failed").Status)
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status, "the third failure dead-letters")
		var page struct {
			DeadLetters []struct {
				Reason        string `json:"reason"`
				DeliveryCount int64  `json:"delivery_count"`
			} `json:"dead_letters"`
		}
		c.expect(t, http.StatusOK, "GET", "/api/v1beta/dead-letters", nil).decode(t, &page)
		require.Len(t, page.DeadLetters, 1)
		require.Equal(t, "DELIVERY_LIMIT", page.DeadLetters[0].Reason)
		require.EqualValues(t, 3, page.DeadLetters[0].DeliveryCount)

		// PATCH: an absent member stays, null removes, out of range is 422.
		raw = nil
		c.expect(t, http.StatusOK, "PATCH", "/v1/event-destinations/"+id, map[string]any{"retry_policy": nil}).decode(t, &raw)
		require.Nil(t, raw["retry_policy"])
		require.Equal(t, map[string]any{"max_delivery_attempts": 3.0}, raw["dead_letter_policy"])
		c.expectError(t, http.StatusUnprocessableEntity, "PATCH", "/v1/event-destinations/"+id, map[string]any{"dead_letter_policy": map[string]any{"max_delivery_attempts": 1001}})
		c.expectError(t, http.StatusUnprocessableEntity, "PATCH", "/v1/event-destinations/"+id, map[string]any{"retry_policy": map[string]any{"minimum_backoff": 601}})
		c.expectError(t, http.StatusBadRequest, "PATCH", "/v1/event-destinations/"+id, map[string]any{"retry_policy": map[string]any{"minimum": 1}})
		c.expectError(t, http.StatusBadRequest, "PATCH", "/v1/event-destinations/"+id, map[string]any{"ack_timeout": 60})
		c.expectError(t, http.StatusNotFound, "PATCH", "/v1/event-destinations/00000000-0000-4000-8000-000000000000", map[string]any{"retry_policy": nil})
	})

	t.Run("durable queues take the policies and an ack timeout", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		c.expect(t, http.StatusCreated, "POST", "/api/v1beta/queues/durable", map[string]any{
			"queue_id": "controls-q", "ack_timeout": 60, "dead_letter_policy": map[string]any{"max_delivery_attempts": 5},
		})
		var raw map[string]any
		c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/controls-q", nil).decode(t, &raw)
		require.Equal(t, 60.0, raw["ack_timeout"])
		require.Equal(t, map[string]any{"max_delivery_attempts": 5.0}, raw["dead_letter_policy"])
		c.expect(t, http.StatusOK, "PATCH", "/api/v1beta/queues/durable", map[string]any{
			"queue_id": "controls-q", "retry_policy": map[string]any{"minimum_backoff": 1}, "ack_timeout": nil,
		})
		raw = nil
		c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/controls-q", nil).decode(t, &raw)
		require.Nil(t, raw["ack_timeout"])
		require.Equal(t, map[string]any{"minimum_backoff": 1.0, "maximum_backoff": 600.0}, raw["retry_policy"])
		c.expectError(t, http.StatusUnprocessableEntity, "PATCH", "/api/v1beta/queues/durable", map[string]any{
			"queue_id": "controls-q", "ack_timeout": 0,
		})
	})
}
