package delivery_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/leasestore"
)

func deadLetters(ids ...string) []*leasestore.DeadLetter {
	out := make([]*leasestore.DeadLetter, len(ids))
	for i, id := range ids {
		out[i] = &leasestore.DeadLetter{ID: id}
	}
	return out
}

// TestTriageStateRules: each dead letter is shown once with the next tag,
// up to the cap; the state survives JSON (a stored connection record)
// with its rules; unknown tags and actions are answered by the state;
// retiring frees the tag and the id; pruning drops what a complete
// listing no longer holds.
func TestTriageStateRules(t *testing.T) {
	t.Parallel()
	ts := delivery.NewTriageState()
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, ts.Show(deadLetters("a", "b", "c"), 2), "capped at 2 tags")
	require.Empty(t, ts.Show(deadLetters("a", "c"), 2), "a is shown; the cap holds c back")

	// Through JSON, as the API Gateway bridge stores it.
	b, err := json.Marshal(ts)
	require.NoError(t, err)
	var back delivery.TriageState
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, map[string]int64{"c": 3}, back.Show(deadLetters("b", "c"), 0), "b stays shown after decoding")
	require.Equal(t, 3, back.Held())

	plan := back.Plan([]delivery.TriageAction{
		{DeliveryTag: 1, Action: delivery.ActionDiscard},
		{DeliveryTag: 9, Action: delivery.ActionReplay},
		{DeliveryTag: 2, Action: ""},
	})
	require.Len(t, plan.Outcomes, 3)
	require.Equal(t, delivery.DetailUnknownTag, plan.Outcomes[1].Detail)
	require.Equal(t, delivery.DetailUnknownAction, plan.Outcomes[2].Detail)
	require.Equal(t, delivery.OutcomeLeft, plan.Outcomes[2].Outcome)

	// What the store answered for tag 1: discarded. Its tag and id go.
	outs := []delivery.TriageOutcome{{DeliveryTag: 1, Outcome: delivery.OutcomeDiscarded}, {DeliveryTag: 2, Outcome: delivery.OutcomeLeft}}
	require.Equal(t, []string{"a"}, back.Retire(outs))
	require.Equal(t, map[string]bool{"b": true, "c": true}, back.ShownIDs())

	back.Prune(map[string]bool{"c": true})
	require.Equal(t, map[int64]string{3: "c"}, back.Tags, "b left the queue elsewhere")
	require.Equal(t, map[string]int64{"b": 4}, back.Show(deadLetters("b"), 0), "a pruned dead letter that comes back is shown again")
}

// TestTriageStateReadsOlderRecords: ids in Shown (records of older
// versions) count as shown and are pruned like tags.
func TestTriageStateReadsOlderRecords(t *testing.T) {
	t.Parallel()
	var ts delivery.TriageState
	require.NoError(t, json.Unmarshal([]byte(`{"next_tag":4,"tags":{"4":"d"},"shown":{"a":true}}`), &ts))
	require.Equal(t, map[string]int64{"b": 5}, ts.Show(deadLetters("a", "d", "b"), 0))
	ts.Prune(map[string]bool{"b": true, "d": true})
	require.Empty(t, ts.Shown)
	require.Equal(t, 2, ts.Held())
}
