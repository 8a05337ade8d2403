//go:build !herald_aws && !herald_gcp

package storeurl_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/leasestore/storeurl"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
)

// TestOpenRefuses checks that every malformed or unsupported store URL is
// refused with herr.InvalidArgument and a message naming what is wrong,
// before any server is contacted.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want string // a part of the message
	}{
		{"redis://localhost/key", `scheme "redis"`},
		{"herald", "has no scheme"},
		{"::not a url", "not a URL"},
		{"mem://herald/key?revision_field=rev", `unknown query parameter "revision_field"`},
		{"mem://herald/key?filename=/tmp/herald.db", "filename is not supported: the in-memory store is not crash-safe"},
		{"mem://herald/key?filename=a&filename=b", "use postgres://"},
		{"mem://herald/id", `must be "key"`},
		{"mem://herald", `must be "key"`},
		{"mem:///key", "collection name"},
		{"dynamodb://t?partition_key=key&sort_key=s", `unknown query parameter "sort_key"`},
		{"dynamodb://t?partition_key=key&allow_scans=true", `unknown query parameter "allow_scans"`},
		{"dynamodb://t?partition_key=key&consistent_read=false", `unknown query parameter "consistent_read"`},
		{"dynamodb://t?partition_key=id", `partition_key must be "key"`},
		{"dynamodb://t", `partition_key must be "key"`},
		{"dynamodb://?partition_key=key", "table name"},
		{"dynamodb://t/extra?partition_key=key", "table name"},
		{"dynamodb://t?partition_key=key&region=", "region is empty"},
		{"dynamodb://t?partition_key=key&region=us-east-1&endpoint=127.0.0.1:8000", "endpoint must be an http or https URL"},
		{"firestore://projects/p/databases/(default)/documents/c?name_field=key&revision_field=r", `unknown query parameter "revision_field"`},
		{"firestore://projects/p/databases/(default)/documents/c?name_field=id", `name_field must be "key"`},
		{"firestore://projects/p/databases/(default)/documents/c", `name_field must be "key"`},
		{"firestore://projects/p/documents/c?name_field=key", "projects/PROJECT/databases/DATABASE/documents/COLLECTION"},
		{"firestore://projects/p/databases/(default)/documents/c/d?name_field=key", "projects/PROJECT/databases/DATABASE/documents/COLLECTION"},
		{"postgres://u@h/db?table=t&tabel=x", `unknown query parameter "tabel"`},
		{"postgresql://u@h/db?search_path=x", `unknown query parameter "search_path"`},
		{"postgres://u@h/db?table=a&table=b", `"table" is given 2 times`},
		{"postgres://u@h/db?table=bad-name", `table "bad-name"`},
		{"postgres://u@h/db?table=" + strings.Repeat("t", 49), "up to 47"},
		{"postgres://u@h?table=t", "give the server and database"},
		{"postgres:///db", "give the server and database"},
		{"postgres://u@h/db?connect_timeout=soon", "a connection or pool setting is malformed"},
		{"postgres://u@h/db?pool_max_conns=-1", "a connection or pool setting is malformed"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			coll, err := storeurl.Open(t.Context(), tc.url)
			require.Error(t, err)
			require.Nil(t, coll)
			require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%v", err)
			require.Contains(t, herr.MessageOf(err), tc.want)
		})
	}
}

// TestOpenerWithClientRefusesClientSettings checks that a URL cannot set
// region, endpoint or profile when the Opener already has a DynamoDB
// client, since they would be silently ignored.
func TestOpenerWithClientRefusesClientSettings(t *testing.T) {
	t.Parallel()
	h := &storeurltest.DynamoDB{Endpoint: "http://127.0.0.1:1"}
	o := storeurl.Opener{DynamoDB: h.Client()}
	for _, p := range []string{"region=us-east-1", "endpoint=http://127.0.0.1:1", "profile=p"} {
		_, err := o.Open(t.Context(), "dynamodb://t?partition_key=key&"+p)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", p, err)
	}
}

// TestMemSameNameSameCollection checks that two opens of one mem:// name in
// a process see the same records: the local adapter and a test may share a
// store by URL.
func TestMemSameNameSameCollection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := "mem://" + storeurltest.UniqueName("herald-shared") + "/key"
	a, err := storeurl.Open(ctx, u)
	require.NoError(t, err)
	b, err := storeurl.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	id := uuid.NewString()
	_, err = leasestore.New(a, leasestore.Options{}).CreateConsumer(ctx, leasestore.Consumer{ID: id, Type: leasestore.TypeDurableConsumer, Subscription: "s"})
	require.NoError(t, err)
	c, err := leasestore.New(b, leasestore.Options{}).GetConsumer(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, c.ID)
}
