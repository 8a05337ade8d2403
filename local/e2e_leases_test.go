package local_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/local"
)

// leaseList is the answer of GET /v1/event-destinations/{id}/leases.
type leaseList struct {
	Leases []struct {
		First     string     `json:"first"`
		Count     int64      `json:"count"`
		Attempt   int64      `json:"attempt"`
		State     string     `json:"state"`
		ExpiresAt *time.Time `json:"expires_at"`
		Session   bool       `json:"session"`
	} `json:"leases"`
}

// TestDestinationLeases: the operator's view of what a consumer has in
// flight follows a lease through its life (held, failed and waiting,
// held again at attempt 2, failed with a delay and due later), shows no
// lease id, and needs manage:destinations.
func TestDestinationLeases(t *testing.T) {
	t.Parallel()
	c := start(t, func(cfg *local.Config) {
		cfg.Tokens = auth.StaticTokens{"leases-reader-token": {ID: "leases-reader", Permissions: []string{auth.PermReadEvents, "receive:*"}}}
	})
	id := c.create(t, nil)
	leases := func() leaseList {
		t.Helper()
		r := c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id+"/leases", nil)
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		var l leaseList
		r.decode(t, &l)
		return l
	}
	require.Empty(t, leases().Leases, "nothing pulled, nothing in flight")

	c.publishN(t, "leases.test", 0, 3)
	l := c.pullLease(t, id, "limit", "2")
	got := leases()
	require.Len(t, got.Leases, 1)
	first := got.Leases[0]
	require.Equal(t, int64(2), first.Count)
	require.Equal(t, int64(1), first.Attempt)
	require.Equal(t, "held", first.State)
	require.False(t, first.Session)
	require.NotNil(t, first.ExpiresAt)
	require.WithinDuration(t, l.ExpiresAt, *first.ExpiresAt, time.Second, "the lease's own expiry")
	var head struct {
		Sequence string `json:"sequence"`
	}
	require.NoError(t, json.Unmarshal(l.Events[0], &head))
	require.Equal(t, head.Sequence, first.First, "first is the sequence a pull reports")
	r := c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id+"/leases", nil)
	require.NotContains(t, string(r.Body), l.LeaseID, "no lease id in the listing")

	// Failed: waiting for redelivery, at once (no retry policy).
	c.ack(t, id, l.LeaseID, l.Generation, "failed")
	got = leases()
	require.Len(t, got.Leases, 1)
	require.Equal(t, "waiting", got.Leases[0].State)
	require.Nil(t, got.Leases[0].ExpiresAt)

	// Pulled again: held, attempt 2.
	again := c.pullLease(t, id, "limit", "2")
	require.Equal(t, int64(2), again.Attempt)
	got = leases()
	require.Len(t, got.Leases, 1)
	require.Equal(t, "held", got.Leases[0].State)
	require.Equal(t, int64(2), got.Leases[0].Attempt)
	// Failed with a delay: waiting, due when the delay ends.
	before := time.Now()
	c.expect(t, http.StatusOK, "POST", "/v1/event-destinations/"+id+"/acknowledge",
		map[string]any{"leaseId": again.LeaseID, "generation": again.Generation, "status": "failed", "retryAfter": 600})
	got = leases()
	require.Len(t, got.Leases, 1)
	require.Equal(t, "waiting", got.Leases[0].State)
	require.NotNil(t, got.Leases[0].ExpiresAt)
	require.False(t, got.Leases[0].ExpiresAt.Before(before.Add(599*time.Second)), "due after the delay: %v", got.Leases[0].ExpiresAt)
	require.Equal(t, int64(2), got.Leases[0].Attempt)

	c.as("leases-reader-token").expect(t, http.StatusForbidden, "GET", "/v1/event-destinations/"+id+"/leases", nil)
	c.expect(t, http.StatusNotFound, "GET", "/v1/event-destinations/no-such-consumer/leases", nil)
}
