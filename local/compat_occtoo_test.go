package local_test

// The compatibility suite (files compat_*_test.go) holds Herald to the
// clients people already have: the Occtoo .NET SDK for the durable-consumer
// API, and clients generated from NVIDIA's published OpenAPI documents and
// protos for the notifications API. It lives in local/ because it is an
// end-to-end suite like the others here: it talks to a real local.Start
// instance over loopback, and needs no server outside the process. What
// Herald still does differently, and why, is in docs/compatibility.md.
//
// This file replays the Occtoo .NET SDK's durable-consumer client
// (Occtoo.Sdk.Events.EventBatchClient, release 0.4.0): its request shapes,
// and what it requires of each answer to read it without an error.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/local"
)

// sdk sends requests as the SDK builds them.
type sdk struct{ c *client }

// pull is EventBatchClient.Pull: POST with no body, the query in the
// SDK's order, the worker id escaped as .NET's Uri.EscapeDataString does
// (url.PathEscape leaves '/' alone; QueryEscape writes ' ' as '+').
func (s sdk) pull(t *testing.T, destination, worker string, limit, leaseSeconds int) *response {
	t.Helper()
	escaped := strings.ReplaceAll(url.QueryEscape(worker), "+", "%20")
	path := fmt.Sprintf("/v1/event-destinations/%s/pull?limit=%d&visibility=%d&workerId=%s", destination, limit, leaseSeconds, escaped)
	r, err := s.c.raw("POST", path, s.c.token, nil)
	require.NoError(t, err)
	return r
}

// acknowledge is EventBatchClient.Acknowledge: the body the SDK's
// AcknowledgeEventBatchDto serializes to (camelCase, a GUID lease id, an
// int generation, the outcome in camelCase).
func (s sdk) acknowledge(t *testing.T, destination string, lease sdkBatch, status string) *response {
	t.Helper()
	body := fmt.Sprintf(`{"leaseId":%q,"generation":%d,"status":%q}`, lease.LeaseID.String(), lease.Generation, status)
	r, err := s.c.raw("POST", "/v1/event-destinations/"+destination+"/acknowledge", s.c.token, []byte(body))
	require.NoError(t, err)
	return r
}

// sdkBatch is what the SDK reads from a 200 pull (EventBatchDto and
// EventParser).
type sdkBatch struct {
	LeaseID    uuid.UUID
	Generation int
	Attempt    int
	Events     []sdkEvent
}

type sdkEvent struct {
	ID       uuid.UUID
	Type     string
	Sequence string
}

// sdkInt reads an int as the SDK's JSON context does: a number, or a
// number sent as a string (JsonSerializerDefaults.Web).
func sdkInt(t *testing.T, raw json.RawMessage, field string) int {
	t.Helper()
	require.NotEmpty(t, raw, "%s is required", field)
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n
	}
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), "%s must be a number", field)
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "%s must be a number", field)
	return n
}

// readBatch holds a 200 pull to the SDK's contract: every required member
// present and of its type, leaseId a GUID, events a non-null array whose
// envelopes each carry a string type and sequence.
func readBatch(t *testing.T, r *response) sdkBatch {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "pull: %s", r.Body)
	var dto struct {
		LeaseID    *string           `json:"leaseId"`
		Generation json.RawMessage   `json:"generation"`
		Attempt    json.RawMessage   `json:"attempt"`
		Events     []json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &dto), "%s", r.Body)
	require.NotNil(t, dto.LeaseID, "leaseId is required")
	id, err := uuid.Parse(*dto.LeaseID)
	require.NoError(t, err, "leaseId %q must be a GUID", *dto.LeaseID)
	require.NotNil(t, dto.Events, "events is required and must not be null")
	b := sdkBatch{LeaseID: id, Generation: sdkInt(t, dto.Generation, "generation"), Attempt: sdkInt(t, dto.Attempt, "attempt")}
	for _, raw := range dto.Events {
		var env struct {
			ID       string  `json:"id"`
			Type     *string `json:"type"`
			Sequence *string `json:"sequence"`
		}
		require.NoError(t, json.Unmarshal(raw, &env))
		require.NotNil(t, env.Type, "an envelope without a type is skipped by the SDK: %s", raw)
		require.NotNil(t, env.Sequence, "an envelope without a sequence is skipped by the SDK: %s", raw)
		eid, err := uuid.Parse(env.ID)
		require.NoError(t, err, "the SDK reads id as a GUID (else Guid.Empty): %s", raw)
		b.Events = append(b.Events, sdkEvent{ID: eid, Type: *env.Type, Sequence: *env.Sequence})
	}
	return b
}

// readAck holds a 200 acknowledge to the SDK's contract
// (EventBatchAcknowledgementDto): committed a required, non-blank string.
func readAck(t *testing.T, r *response) (status, committed string) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "acknowledge: %s", r.Body)
	var dto struct {
		Status    *string `json:"status"`
		Committed *string `json:"committed"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &dto), "%s", r.Body)
	require.NotNil(t, dto.Committed, "committed is a required string: %s", r.Body)
	require.NotEmpty(t, strings.TrimSpace(*dto.Committed), "committed must not be blank")
	require.NotNil(t, dto.Status)
	return *dto.Status, *dto.Committed
}

// readProblem holds an error body to what the SDK's OcctooApiErrors reads
// (RFC 9457 problem details with Web defaults: title and detail strings,
// status an integer, errors a map of string lists) and returns the text
// its error message carries.
func readProblem(t *testing.T, r *response, status int) string {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r.Body)
	var problem struct {
		Title   *string             `json:"title"`
		Detail  *string             `json:"detail"`
		Message *string             `json:"message"`
		Status  *int                `json:"status"`
		TraceID *string             `json:"traceId"`
		Errors  map[string][]string `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &problem), "the SDK could not read %s", r.Body)
	require.NotNil(t, problem.Detail, "the SDK shows detail: %s", r.Body)
	require.NotNil(t, problem.Message, "and message: %s", r.Body)
	require.Equal(t, *problem.Message, *problem.Detail)
	return *problem.Detail
}

// TestOcctooSDKFlows runs the SDK's documented flows: pull, process,
// acknowledge ok or failed, stale after expiry, paused, window full, a
// destination that is not a durable consumer, an unknown one.
func TestOcctooSDKFlows(t *testing.T) {
	t.Parallel()

	t.Run("pull, process, acknowledge ok", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		id := c.create(t, nil)
		_, err := uuid.Parse(id)
		require.NoError(t, err, "the SDK's EventDestinationId is a GUID")

		// Caught up: 204, which the SDK reads as no batch.
		require.Equal(t, http.StatusNoContent, s.pull(t, id, "worker-1", 20, 60).Status)

		c.publish(t, eventsOf("source_entry.added", 3)...)
		b := readBatch(t, s.pull(t, id, "worker-1", 20, 60))
		require.Equal(t, 0, b.Generation)
		require.Equal(t, 1, b.Attempt)
		require.Len(t, b.Events, 3)
		for i := 1; i < len(b.Events); i++ {
			require.Less(t, b.Events[i-1].Sequence, b.Events[i].Sequence, "ascending sequence order")
		}
		// A resent pull (the SDK retries it) resumes the same lease.
		again := readBatch(t, s.pull(t, id, "worker-1", 20, 60))
		require.Equal(t, b.LeaseID, again.LeaseID)

		status, committed := readAck(t, s.acknowledge(t, id, b, "ok"))
		require.Equal(t, "committed", status)
		require.Equal(t, b.Events[2].Sequence, committed)
		// A resent ok (the SDK retries a request whose answer it lost)
		// reads committed again, with the position unchanged: stale would
		// say that nothing was committed.
		status, again2 := readAck(t, s.acknowledge(t, id, b, "ok"))
		require.Equal(t, "committed", status)
		require.Equal(t, committed, again2)
	})

	t.Run("a worker id with a slash and a space, the largest limit and lease", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 100)...)
		worker := "pod-7/loop 2"
		b := readBatch(t, s.pull(t, id, worker, 100, 600))
		require.Len(t, b.Events, 100)
		// The same worker, escaped the same way, resumes its lease.
		require.Equal(t, b.LeaseID, readBatch(t, s.pull(t, id, worker, 100, 600)).LeaseID)
		// The SDK's largest worker id (200 characters) is accepted.
		require.Equal(t, http.StatusNoContent, s.pull(t, id, strings.Repeat("w", 200), 1, 1).Status)
	})

	t.Run("acknowledge failed requeues, and a committed position is a string before any commit", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 2)...)
		b := readBatch(t, s.pull(t, id, "w1", 20, 60))
		status, committed := readAck(t, s.acknowledge(t, id, b, "failed"))
		require.Equal(t, "requeued", status)
		require.Equal(t, zeroSequence, committed)
		// Redelivered with a higher generation and attempt.
		re := readBatch(t, s.pull(t, id, "w2", 20, 60))
		require.Equal(t, b.LeaseID, re.LeaseID)
		require.Equal(t, 1, re.Generation)
		require.Equal(t, 2, re.Attempt)
		status, _ = readAck(t, s.acknowledge(t, id, re, "ok"))
		require.Equal(t, "committed", status)
	})

	t.Run("stale after expiry", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		c := start(t, local.WithClock(clk.Now))
		s := sdk{c}
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 1)...)
		first := readBatch(t, s.pull(t, id, "slow", 20, 1))
		clk.Advance(2 * time.Second)
		second := readBatch(t, s.pull(t, id, "fast", 20, 60))
		require.Equal(t, first.LeaseID, second.LeaseID)
		status, committed := readAck(t, s.acknowledge(t, id, first, "ok"))
		require.Equal(t, "stale", status)
		require.Equal(t, zeroSequence, committed, "never null, even before the first commit")
	})

	t.Run("paused is a conflict carrying the message; acknowledging still works", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		id := c.create(t, nil)
		c.publish(t, eventsOf("a.b", 1)...)
		b := readBatch(t, s.pull(t, id, "w", 20, 60))
		c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/pause", nil)
		require.Contains(t, readProblem(t, s.pull(t, id, "w2", 20, 60), http.StatusConflict), "paused")
		status, _ := readAck(t, s.acknowledge(t, id, b, "ok"))
		require.Equal(t, "committed", status)
	})

	t.Run("window full is a rate limit with Retry-After, message, committed and dispatched", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		id := c.create(t, nil)
		for range 10 {
			c.publish(t, eventsOf("a.b", 100)...)
		}
		c.publish(t, eventsOf("a.b", 1)...)
		for w := range 10 {
			require.Len(t, readBatch(t, s.pull(t, id, "w"+strconv.Itoa(w), 100, 60)).Events, 100)
		}
		r := s.pull(t, id, "late", 1, 60)
		readProblem(t, r, http.StatusTooManyRequests)
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After in seconds, which the SDK reads as a delta")
		require.Positive(t, secs)
		var body struct {
			Message    string `json:"message"`
			Committed  string `json:"committed"`
			Dispatched string `json:"dispatched"`
			InFlight   int64  `json:"in_flight"`
		}
		r.decode(t, &body)
		require.NotEmpty(t, body.Message)
		require.Equal(t, zeroSequence, body.Committed)
		require.Equal(t, "001.00000000000000001000", body.Dispatched)
		require.EqualValues(t, 1000, body.InFlight)
	})

	t.Run("a destination that is not a durable consumer is a validation error on pull and acknowledge", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		status, q := c.createQueue(t, "compat-queue", nil)
		require.Equal(t, http.StatusCreated, status)
		require.Contains(t, readProblem(t, s.pull(t, q.QueueID, "w", 20, 60), http.StatusBadRequest), "only supported for durable consumer destinations")
		stale := sdkBatch{LeaseID: uuid.New()}
		require.Contains(t, readProblem(t, s.acknowledge(t, q.QueueID, stale, "ok"), http.StatusBadRequest), "only supported for durable consumer destinations")
	})

	t.Run("an unknown or deleted destination is not found", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		s := sdk{c}
		unknown := uuid.NewString()
		readProblem(t, s.pull(t, unknown, "w", 20, 60), http.StatusNotFound)
		readProblem(t, s.acknowledge(t, unknown, sdkBatch{LeaseID: uuid.New()}, "ok"), http.StatusNotFound)
		id := c.create(t, nil)
		c.expect(t, http.StatusNoContent, "DELETE", "/v1/event-destinations/"+id, nil)
		readProblem(t, s.acknowledge(t, id, sdkBatch{LeaseID: uuid.New()}, "ok"), http.StatusNotFound)
	})

	t.Run("a bad acknowledgement is a validation error the SDK can read", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		id := c.create(t, nil)
		r, err := c.raw("POST", "/v1/event-destinations/"+id+"/acknowledge", c.token, []byte(`{"leaseId":"x","generation":0,"status":"deferred"}`))
		require.NoError(t, err)
		require.Contains(t, readProblem(t, r, http.StatusBadRequest), "status")
	})

	t.Run("no token is an authentication error the SDK can read", func(t *testing.T) {
		t.Parallel()
		c := start(t)
		r, err := c.raw("POST", "/v1/event-destinations/"+uuid.NewString()+"/pull?limit=20&visibility=60&workerId=w", "", nil)
		require.NoError(t, err)
		readProblem(t, r, http.StatusUnauthorized)
	})
}
