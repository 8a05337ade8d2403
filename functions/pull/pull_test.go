package pull_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/functions/pull"
	"github.com/heraldevents/herald/leasestore"
)

// TestAppendLease checks the durable-consumer API's 200 body as pull writes it by
// appending: valid JSON, the documented keys, and each event's sequence
// its position.
func TestAppendLease(t *testing.T) {
	t.Parallel()
	l := &leasestore.Lease{
		ID: "3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40", Generation: 2, Attempt: 3, Start: 41,
		ExpiresAt: time.Date(2024, 10, 16, 14, 30, 0, 500_000_000, time.FixedZone("X", 3600)),
		Events: [][]byte{
			[]byte(`{"specversion":"1.0","id":"a","data":{"k":"<&>"}}`),
			[]byte(`{"specversion":"1.0","id":"b"}`),
		},
	}
	b := pull.AppendLease(nil, l)
	require.True(t, json.Valid(b), "%s", b)

	var got struct {
		LeaseID    string                       `json:"leaseId"`
		Generation int64                        `json:"generation"`
		Attempt    int64                        `json:"attempt"`
		ExpiresAt  string                       `json:"expiresAt"`
		Events     []map[string]json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, l.ID, got.LeaseID)
	require.EqualValues(t, 2, got.Generation)
	require.EqualValues(t, 3, got.Attempt)
	require.Equal(t, "2024-10-16T13:30:00.5Z", got.ExpiresAt, "UTC, RFC 3339")
	require.Len(t, got.Events, 2)
	require.Equal(t, `"`+cloudevent.FormatSequence(41)+`"`, string(got.Events[0]["sequence"]))
	require.Equal(t, `"`+cloudevent.FormatSequence(42)+`"`, string(got.Events[1]["sequence"]))
	require.Equal(t, `{"k":"<&>"}`, string(got.Events[0]["data"]), "events are passed through byte for byte")

	// Appending to a buffer keeps what it holds.
	b = pull.AppendLease([]byte("prefix:"), l)
	require.Equal(t, "prefix:", string(b[:7]))
	require.True(t, json.Valid(b[7:]))

	// A lease without events still has an events array.
	b = pull.AppendLease(nil, &leasestore.Lease{ID: "x", ExpiresAt: time.Unix(0, 0)})
	require.Contains(t, string(b), `"events":[]`)
	require.True(t, json.Valid(b))
}

// TestAppendLeaseWithheld checks that withheld events (nil entries) are
// left out and the others keep the sequence of their position.
func TestAppendLeaseWithheld(t *testing.T) {
	t.Parallel()
	l := &leasestore.Lease{
		ID: "x", Start: 7, ExpiresAt: time.Unix(0, 0),
		Events: [][]byte{nil, []byte(`{"id":"b"}`), nil, []byte(`{"id":"d"}`)},
	}
	b := pull.AppendLease(nil, l)
	require.True(t, json.Valid(b), "%s", b)
	var got struct {
		Events []struct {
			ID       string `json:"id"`
			Sequence string `json:"sequence"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Len(t, got.Events, 2)
	require.Equal(t, "b", got.Events[0].ID)
	require.Equal(t, cloudevent.FormatSequence(8), got.Events[0].Sequence)
	require.Equal(t, "d", got.Events[1].ID)
	require.Equal(t, cloudevent.FormatSequence(10), got.Events[1].Sequence)
}
