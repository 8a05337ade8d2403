package storetest

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The record layout that leasestore's package doc documents. The suite
// reads records directly only to check what the API cannot show: that
// nothing is left behind and that records stay small.
func consumerKey(id string) string      { return "c:" + id }
func payloadKeyPrefix(id string) string { return "p:" + id + ":" }

// allRecords returns every record in the bundle's collection, as maps.
func allRecords(t testing.TB, b *bundle) []map[string]any {
	t.Helper()
	it := b.colls[0].Query().Get(b.ctx)
	defer it.Stop()
	var out []map[string]any
	for {
		m := map[string]any{}
		err := it.Next(b.ctx, m)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "query the collection")
		out = append(out, m)
	}
}

// countRecords counts the records whose key starts with prefix.
func countRecords(t testing.TB, b *bundle, prefix string) int {
	t.Helper()
	n := 0
	for _, m := range allRecords(t, b) {
		if k, _ := m["key"].(string); strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
