package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

// TestPublishIdempotencyKey: two invocations with one --idempotency-key
// publish one event; another event under the key fails.
func TestPublishIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := local.Start(t)
	d := jsonOf[client.Destination](t, herald(t, h, "consumers", "create", "--type", "myapp.user.created", "-o", "json"))
	for range 2 {
		r := herald(t, h, "publish", "--type", "myapp.user.created", "--data", `{"user_id":"7"}`, "--idempotency-key", "user-7-created")
		require.Equal(t, 0, r.code, r.stderr)
	}
	r := herald(t, h, "publish", "--type", "myapp.user.created", "--data", `{"user_id":"8"}`, "--idempotency-key", "user-7-created")
	require.NotEqual(t, 0, r.code, "another event under the key: %s", r.stdout)

	type pulled struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	p := jsonOf[pulled](t, herald(t, h, "pull", "--consumer", d.ID, "--limit", "10", "--ack", "-o", "json"))
	require.Len(t, p.Events, 1, "one event for the two invocations")
}
