package storetest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/leasestore"
)

var sizeCases = []conformanceCase{
	{"Size/ConsumerRecordFitsAnItem", testConsumerRecordSize},
}

// maxConsumerRecordBytes bounds the JSON form of a consumer record: below
// DynamoDB's 400 KB item limit with room to spare (JSON spends more bytes
// than DynamoDB's own size rule on the same record).
const maxConsumerRecordBytes = 350_000

// longWorker returns a distinct worker id of 200 characters (seed 000's
// maximum), each 4 bytes in UTF-8: the largest id a caller can send.
func longWorker(i int) string {
	prefix := strconv.Itoa(i) + "-"
	return prefix + strings.Repeat("𝄞", 200-len(prefix))
}

func testConsumerRecordSize(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	const pulls = 2*leasestore.MaxInFlight - 1
	src := NewScriptedSource(bodies("z", pulls)...)
	// Single-event leases at every position; every even one acknowledged,
	// so 1,000 leases stay in flight with 999 acked ranges between them
	// that cannot merge, and the cursor stays at 0: the largest lease
	// table a consumer can have.
	for i := 1; i <= pulls; i++ {
		l := b.pull(t, longWorker(i), 1, src)
		require.Equal(t, int64(i), l.Start)
		if i%2 == 0 {
			require.Equal(t, leasestore.OutcomeCommitted, b.ack(t, l, leasestore.StatusOK).Outcome)
		}
	}
	c := b.get(t)
	require.Equal(t, int64(leasestore.MaxInFlight), c.InFlight)
	require.Zero(t, c.Committed)

	doc := map[string]any{"key": consumerKey(b.consumer)}
	require.NoError(t, b.colls[0].Get(b.ctx, doc))
	enc, err := json.Marshal(doc)
	require.NoError(t, err)
	t.Logf("consumer record with %d leases in flight and %d acked ranges: %d bytes as JSON", leasestore.MaxInFlight, leasestore.MaxInFlight-1, len(enc))
	require.Less(t, len(enc), maxConsumerRecordBytes, "the consumer record must fit one DynamoDB item")
}
