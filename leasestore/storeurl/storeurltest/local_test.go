//go:build !herald_aws && !herald_gcp

package storeurltest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
	"github.com/heraldevents/herald/local"
)

// TestLocalOnDynamoDB runs two local Heralds whose HERALD_STORE_URL is one
// DynamoDB table on moto, and goes through publish → pull → acknowledge
// over HTTP: a destination created on one instance is seen by the other,
// and a lease pulled from one is acknowledged on the other, because every
// state change lives in the table.
func TestLocalOnDynamoDB(t *testing.T) {
	dh := storeurltest.NewDynamoDB(t)
	storeurltest.IsolateAWS(t)
	table, err := dh.NewTable(t.Context(), t)
	require.NoError(t, err)

	cfg := local.DefaultConfig()
	cfg.DevToken = "test-token"
	// The in-memory broker is shared by name within the process.
	cfg.TopicURL = "mem://" + storeurltest.UniqueName("herald-local")
	cfg.StoreURL = dh.StoreURL(table)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a := local.Start(t, local.WithConfig(cfg))
	b := local.Start(t, local.WithConfig(cfg))

	res := call(t, a, "POST", "/v1/event-destinations", `{"type":"DURABLE_CONSUMER"}`, http.StatusCreated)
	var dest struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(res, &dest))
	require.NotEmpty(t, dest.ID)
	call(t, b, "GET", "/v1/event-destinations/"+dest.ID, "", http.StatusOK)

	res = call(t, a, "POST", "/api/v1beta/events/batch",
		`{"events":[{"event_type":"order.created","message":{"n":1}},{"event_type":"order.created","message":{"n":2}}]}`, http.StatusOK)
	var pub struct {
		Results []struct {
			Success bool `json:"success"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res, &pub))
	require.Len(t, pub.Results, 2)
	for _, r := range pub.Results {
		require.True(t, r.Success, "publish: %s", res)
	}

	res = call(t, a, "POST", "/v1/event-destinations/"+dest.ID+"/pull?workerId=w1&limit=10", "", http.StatusOK)
	var lease struct {
		LeaseID    string `json:"leaseId"`
		Generation int64  `json:"generation"`
		Attempt    int64  `json:"attempt"`
		Events     []struct {
			Type     string          `json:"type"`
			Sequence string          `json:"sequence"`
			Data     json.RawMessage `json:"data"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(res, &lease))
	require.NotEmpty(t, lease.LeaseID)
	require.Equal(t, int64(0), lease.Generation)
	require.Equal(t, int64(1), lease.Attempt)
	require.Len(t, lease.Events, 2)
	var data []string
	for i, e := range lease.Events {
		require.Equal(t, "order.created", e.Type)
		require.Equal(t, cloudevent.FormatSequence(int64(i+1)), e.Sequence)
		data = append(data, string(e.Data))
	}
	// One batch's events may reach the broker in either order.
	require.ElementsMatch(t, []string{`{"n":1}`, `{"n":2}`}, data)

	body, err := json.Marshal(map[string]any{"leaseId": lease.LeaseID, "generation": lease.Generation, "status": "ok"})
	require.NoError(t, err)
	res = call(t, b, "POST", "/v1/event-destinations/"+dest.ID+"/acknowledge", string(body), http.StatusOK)
	require.JSONEq(t, `{"status":"committed","committed":"`+cloudevent.FormatSequence(2)+`"}`, string(res))

	call(t, a, "POST", "/v1/event-destinations/"+dest.ID+"/pull?workerId=w1", "", http.StatusNoContent)
	call(t, b, "POST", "/v1/event-destinations/"+dest.ID+"/pull?workerId=w2", "", http.StatusNoContent)
}

// call sends body ("" for none) to instance h with its token, requires
// status and returns the response body.
func call(t *testing.T, h *local.Instance, method, path, body string, status int) []byte {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, h.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, status, res.StatusCode, "%s %s: %s", method, path, out)
	return out
}
