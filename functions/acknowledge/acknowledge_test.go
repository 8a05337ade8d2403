package acknowledge

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/leasestore"
)

// TestAppendResponseMatchesMarshal: the hand-written answer is what
// json.Marshal writes for every outcome.
func TestAppendResponseMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, o := range []leasestore.Outcome{leasestore.OutcomeCommitted, leasestore.OutcomeRequeued, leasestore.OutcomeStale} {
		for _, pos := range []int64{0, 1, 42, 1<<62 + 7} {
			want, err := json.Marshal(Response{Status: o, Committed: cloudevent.FormatSequence(pos)})
			require.NoError(t, err)
			require.Equal(t, string(want), string(appendResponse(nil, o, pos)))
		}
	}
}
