package local_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/local"
)

// TestPullParametersE2E covers the durable-consumer API's pull parameter ranges and
// defaults.
func TestPullParametersE2E(t *testing.T) {
	t.Parallel()

	t.Run("out-of-range or non-integer parameters are 400", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		for _, kv := range [][]string{
			{"limit", "0"}, {"limit", "101"}, {"limit", "-1"}, {"limit", "abc"}, {"limit", "1.5"},
			{"visibility", "0"}, {"visibility", "601"}, {"visibility", "-5"}, {"visibility", "abc"},
			{"workerId", strings.Repeat("w", 201)},
			{"workerId", strings.Repeat("é", 201)},
		} {
			r := c.pull(t, id, kv...)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s=%s: %s", kv[0], kv[1], r.Body)
			var e errorBody
			r.decode(t, &e)
			require.Equal(t, "out_of_range", e.Code)
		}
	})

	t.Run("limit defaults to 20 and accepts 1 and 100", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 100)...)
		c.publish(t, eventsOf("a.b", 100)...)
		require.Len(t, c.pullLease(t, id, "workerId", "default").Events, 20)
		require.Len(t, c.pullLease(t, id, "workerId", "one", "limit", "1").Events, 1)
		require.Len(t, c.pullLease(t, id, "workerId", "hundred", "limit", "100").Events, 100)
	})

	t.Run("visibility defaults to 60 s and accepts 1 and 600", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 3)...)
		l := c.pullLease(t, id, "workerId", "default", "limit", "1")
		require.True(t, clk.Now().Add(60*time.Second).Equal(l.ExpiresAt), "expiresAt %s", l.ExpiresAt)
		l = c.pullLease(t, id, "workerId", "short", "limit", "1", "visibility", "1")
		require.True(t, clk.Now().Add(time.Second).Equal(l.ExpiresAt), "expiresAt %s", l.ExpiresAt)
		l = c.pullLease(t, id, "workerId", "long", "limit", "1", "visibility", "600")
		require.True(t, clk.Now().Add(600*time.Second).Equal(l.ExpiresAt), "expiresAt %s", l.ExpiresAt)
	})

	t.Run("workerId of 200 characters is accepted", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		require.Equal(t, http.StatusNoContent, c.pull(t, id, "workerId", strings.Repeat("w", 200)).Status)
		require.Equal(t, http.StatusNoContent, c.pull(t, id, "workerId", strings.Repeat("é", 200)).Status)
	})
}

// TestPullResponsesE2E covers the durable-consumer API's pull answers: 200, 204, 409, 429.
func TestPullResponsesE2E(t *testing.T) {
	t.Parallel()

	t.Run("200 carries leaseId, generation 0, attempt 1 and events", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, ev("a.b", "", map[string]int{"n": 1}))
		r := c.pull(t, id)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var raw map[string]json.RawMessage
		r.decode(t, &raw)
		for _, k := range []string{"leaseId", "generation", "attempt", "events"} {
			require.Contains(t, raw, k)
		}
		require.Equal(t, "0", string(raw["generation"]))
		require.Equal(t, "1", string(raw["attempt"]))
		var l lease
		r.decode(t, &l)
		require.NotEmpty(t, l.LeaseID)
		require.Len(t, l.Events, 1)
	})

	t.Run("204 with no body when caught up", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		r := c.pull(t, id)
		require.Equal(t, http.StatusNoContent, r.Status)
		require.Empty(t, r.Body)
		c.publish(t, eventsOf("a.b", 2)...)
		c.drain(t, id)
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status)
	})

	t.Run("409 when paused", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/pause", nil)
		require.Equal(t, http.StatusConflict, c.pull(t, id).Status)
	})

	t.Run("429 with in_flight and Retry-After when 1,000 events are leased", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		id := c.create(t, nil)
		for range 11 {
			c.publish(t, eventsOf("a.b", 100)...)
		}
		leases := map[string]lease{}
		for w := range 10 {
			worker := "w" + strconv.Itoa(w)
			leases[worker] = c.pullLease(t, id, "workerId", worker, "limit", "100")
			require.Len(t, leases[worker].Events, 100)
		}
		require.EqualValues(t, 1000, c.getDest(t, id).InFlight)

		r := c.pull(t, id, "workerId", "late", "limit", "1")
		require.Equal(t, http.StatusTooManyRequests, r.Status, "body %s", r.Body)
		var e errorBody
		r.decode(t, &e)
		require.Equal(t, "resource_exhausted", e.Code)
		require.NotNil(t, e.InFlight, "body %s", r.Body)
		require.EqualValues(t, 1000, *e.InFlight)
		require.NotEmpty(t, e.Message)
		require.Equal(t, e.Message, e.Detail)
		require.Equal(t, zeroSequence, e.Committed, "nothing committed yet")
		require.Equal(t, cloudevent.FormatSequence(1000), e.Dispatched, "the last sequence handed out")
		// The earliest lease expires in 60 s on the frozen clock.
		require.Equal(t, "60", r.Header.Get("Retry-After"))

		// A worker holding a lease still gets it back while the window is full.
		again := c.pullLease(t, id, "workerId", "w3", "limit", "100")
		require.Equal(t, leases["w3"].LeaseID, again.LeaseID)

		// Acknowledging frees the window.
		c.ack(t, id, leases["w0"].LeaseID, 0, "ok")
		require.EqualValues(t, 900, c.getDest(t, id).InFlight)
		require.Len(t, c.pullLease(t, id, "workerId", "late", "limit", "100").Events, 100)
		require.Equal(t, http.StatusTooManyRequests, c.pull(t, id, "workerId", "later").Status)
	})
}

// TestLeasesE2E covers lease ownership, redelivery and the acknowledge
// outcomes of the durable-consumer API.
func TestLeasesE2E(t *testing.T) {
	t.Parallel()

	t.Run("a worker holding a live lease gets the same lease back", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 10)...)
		a := c.pullLease(t, id, "workerId", "w1", "limit", "3")
		b := c.pullLease(t, id, "workerId", "w1", "limit", "5")
		require.Equal(t, a, b)
		other := c.pullLease(t, id, "workerId", "w2", "limit", "3")
		require.NotEqual(t, a.LeaseID, other.LeaseID)
	})

	t.Run("pulls without workerId share one identity", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 10)...)
		a := c.pullLease(t, id, "limit", "3")
		b := c.pullLease(t, id, "limit", "3")
		require.Equal(t, a.LeaseID, b.LeaseID)
		require.Equal(t, a.heads(t), b.heads(t))
		// An explicit worker is someone else.
		require.NotEqual(t, a.LeaseID, c.pullLease(t, id, "workerId", "w", "limit", "3").LeaseID)
	})

	t.Run("an expired lease is redelivered before new work with higher generation and attempt", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 10)...)
		first := c.pullLease(t, id, "workerId", "w1", "limit", "5", "visibility", "1")
		require.EqualValues(t, 0, first.Generation)
		require.EqualValues(t, 1, first.Attempt)

		clk.Advance(1500 * time.Millisecond)
		again := c.pullLease(t, id, "workerId", "w2", "limit", "5")
		require.Equal(t, first.LeaseID, again.LeaseID)
		require.EqualValues(t, 1, again.Generation)
		require.EqualValues(t, 2, again.Attempt)
		require.Equal(t, first.heads(t), again.heads(t), "same events, same sequences")
		require.True(t, again.ExpiresAt.After(first.ExpiresAt))

		// The first worker's acknowledgement is now stale and commits nothing.
		a := c.ack(t, id, first.LeaseID, first.Generation, "ok")
		require.Equal(t, "stale", a.Status)
		require.Equal(t, zeroSequence, a.Committed)
		// The original worker, pulling again, gets new work (its lease
		// moved on), not the reclaimed one.
		next := c.pullLease(t, id, "workerId", "w1", "limit", "5")
		require.NotEqual(t, first.LeaseID, next.LeaseID)
		require.Equal(t, cloudevent.FormatSequence(6), next.heads(t)[0].Sequence)

		a = c.ack(t, id, again.LeaseID, again.Generation, "ok")
		require.Equal(t, "committed", a.Status)
		require.Equal(t, cloudevent.FormatSequence(5), a.Committed)
	})

	t.Run("an expired lease is redelivered again and again", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 2)...)
		l := c.pullLease(t, id, "visibility", "1")
		for want := int64(1); want <= 3; want++ {
			clk.Advance(2 * time.Second)
			l2 := c.pullLease(t, id, "visibility", "1")
			require.Equal(t, l.LeaseID, l2.LeaseID)
			require.Equal(t, want, l2.Generation)
			require.Equal(t, want+1, l2.Attempt)
		}
	})

	t.Run("a failed lease is requeued and redelivered before new work", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 6)...)
		l := c.pullLease(t, id, "workerId", "w1", "limit", "3")
		a := c.ack(t, id, l.LeaseID, 0, "failed")
		require.Equal(t, "requeued", a.Status)
		require.Equal(t, zeroSequence, a.Committed)
		// failed again is still requeued.
		require.Equal(t, "requeued", c.ack(t, id, l.LeaseID, 0, "failed").Status)

		again := c.pullLease(t, id, "workerId", "w2", "limit", "3")
		require.Equal(t, l.LeaseID, again.LeaseID)
		require.EqualValues(t, 1, again.Generation)
		require.EqualValues(t, 2, again.Attempt)
		require.Equal(t, l.heads(t), again.heads(t))

		require.Equal(t, "stale", c.ack(t, id, l.LeaseID, 0, "failed").Status, "older generation")
		require.Equal(t, "stale", c.ack(t, id, l.LeaseID, 0, "ok").Status, "older generation")
		a = c.ack(t, id, again.LeaseID, 1, "ok")
		require.Equal(t, "committed", a.Status)
		require.Equal(t, cloudevent.FormatSequence(3), a.Committed)
	})

	t.Run("committed advances only over a contiguous run and never backward", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 30)...)
		l1 := c.pullLease(t, id, "workerId", "w1", "limit", "10")
		l2 := c.pullLease(t, id, "workerId", "w2", "limit", "10")
		l3 := c.pullLease(t, id, "workerId", "w3", "limit", "10")

		a := c.ack(t, id, l2.LeaseID, 0, "ok")
		require.Equal(t, "committed", a.Status)
		require.Equal(t, zeroSequence, a.Committed, "lease 1 holds the cursor back")
		a = c.ack(t, id, l3.LeaseID, 0, "ok")
		require.Equal(t, "committed", a.Status)
		require.Equal(t, zeroSequence, a.Committed)
		require.Equal(t, zeroSequence, c.getDest(t, id).Committed)

		a = c.ack(t, id, l1.LeaseID, 0, "ok")
		require.Equal(t, "committed", a.Status)
		last := l3.heads(t)[9].Sequence
		require.Equal(t, cloudevent.FormatSequence(30), last)
		require.Equal(t, last, a.Committed, "the sequence of the last event of the run")
		require.Equal(t, last, c.getDest(t, id).Committed)

		// ok again (a retry whose answer was lost): committed, as the
		// first, with the cursor unchanged.
		a = c.ack(t, id, l1.LeaseID, 0, "ok")
		require.Equal(t, "committed", a.Status)
		require.Equal(t, last, a.Committed)
		// failed after commit: stale too; nothing is redelivered.
		require.Equal(t, "stale", c.ack(t, id, l2.LeaseID, 0, "failed").Status)
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status)
		require.Zero(t, c.getDest(t, id).InFlight)
	})

	t.Run("a requeued lease holds the cursor back until it is committed", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 4)...)
		l1 := c.pullLease(t, id, "workerId", "w1", "limit", "2")
		l2 := c.pullLease(t, id, "workerId", "w2", "limit", "2")
		require.Equal(t, "requeued", c.ack(t, id, l1.LeaseID, 0, "failed").Status)
		a := c.ack(t, id, l2.LeaseID, 0, "ok")
		require.Equal(t, zeroSequence, a.Committed)
		re := c.pullLease(t, id, "workerId", "w3")
		require.Equal(t, l1.LeaseID, re.LeaseID)
		a = c.ack(t, id, re.LeaseID, re.Generation, "ok")
		require.Equal(t, cloudevent.FormatSequence(4), a.Committed)
	})

	t.Run("acknowledging works while paused", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 2)...)
		l := c.pullLease(t, id)
		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/pause", nil)
		a := c.ack(t, id, l.LeaseID, l.Generation, "ok")
		require.Equal(t, "committed", a.Status)
		require.Equal(t, cloudevent.FormatSequence(2), a.Committed)
		require.Equal(t, http.StatusConflict, c.pull(t, id).Status)
	})

	t.Run("an unknown lease is stale", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		a := c.ack(t, id, "no-such-lease", 0, "ok")
		require.Equal(t, "stale", a.Status)
		require.Equal(t, zeroSequence, a.Committed)
	})

	t.Run("bad acknowledge bodies are 400", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		path := "/v1/event-destinations/" + id + "/acknowledge"
		for _, body := range []string{
			`{"generation": 0, "status": "ok"}`,
			`{"leaseId": "", "generation": 0, "status": "ok"}`,
			`{"leaseId": "x", "status": "ok"}`,
			`{"leaseId": "x", "generation": null, "status": "ok"}`,
			`{"leaseId": "x", "generation": -1, "status": "ok"}`,
			`{"leaseId": "x", "generation": "0", "status": "ok"}`,
			`{"leaseId": "x", "generation": 0, "status": "maybe"}`,
			`{"leaseId": "x", "generation": 0, "status": "OK"}`,
			`{"leaseId": "x", "generation": 0}`,
			`{"leaseId": "x", "generation": 0, "status": "ok"`,
			``,
		} {
			r := c.must(t, "POST", path, body)
			require.Equal(t, http.StatusBadRequest, r.Status, "body %s: %s", body, r.Body)
			var e errorBody
			r.decode(t, &e)
			require.Equal(t, "malformed", e.Code, "body %s", body)
		}
	})
}

// TestDeliveryOrderE2E covers where a consumer starts and how its
// sequences are ordered.
func TestDeliveryOrderE2E(t *testing.T) {
	t.Parallel()

	t.Run("a consumer starts at the head", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		c.publish(t, eventsOf("early", 5)...)
		id := c.create(t, nil)
		require.Equal(t, http.StatusNoContent, c.pull(t, id).Status)
		c.publish(t, ev("late", "", map[string]int{"n": 1}))
		got := c.drain(t, id)
		require.Len(t, got, 1)
		require.Equal(t, "late", got[0].Type)
		require.Equal(t, cloudevent.FormatSequence(1), got[0].Sequence)
	})

	t.Run("sequences compare as strings in delivery order", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		// Sequential single publishes so that publish order is known.
		for i := range 12 {
			c.expect(t, http.StatusOK, "POST", "/api/v1beta/events", map[string]any{"event": ev("a.b", "", map[string]int{"n": i})})
		}
		var got []ceHead
		for {
			r := c.pull(t, id, "limit", "5")
			if r.Status == http.StatusNoContent {
				break
			}
			var l lease
			r.decode(t, &l)
			got = append(got, l.heads(t)...)
			c.ack(t, id, l.LeaseID, l.Generation, "ok")
		}
		require.Len(t, got, 12)
		for i, e := range got {
			var m map[string]int
			require.NoError(t, json.Unmarshal(e.Data, &m))
			require.Equal(t, i, m["n"], "publish order")
			pos, err := cloudevent.ParseSequence(e.Sequence)
			require.NoError(t, err)
			require.EqualValues(t, i+1, pos)
			if i > 0 {
				// Position 9 → 10 is where a numeric order and a naive
				// string order would part.
				require.Less(t, got[i-1].Sequence, e.Sequence)
			}
		}
	})
}
