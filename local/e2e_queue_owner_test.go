package local_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/local"
)

// TestNonDurableQueueOwnerSSE is the case over SSE: bob presents
// alice's reconnect token with previous_filter_groups [alice.x] and
// filter_groups [bob.x] — in Last-Event-ID and in the reconnect_token
// parameter — and gets 403 before the stream opens, with the token quoted
// nowhere; the token alone resumes the queue. alice then receives all ten
// of her alice.x events, and none was dead-lettered.
func TestNonDurableQueueOwnerSSE(t *testing.T) {
	t.Parallel()
	const aliceToken, bobToken = "alice-token-0123456789", "bob-token-0123456789"
	admin := start(t, local.Option(func(c *local.Config) {
		c.Tokens = auth.StaticTokens{
			aliceToken: {ID: "alice", Permissions: []string{"receive:alice.*"}},
			bobToken:   {ID: "bob", Permissions: []string{"receive:*"}},
		}
	}))
	alice, bob := admin.as(aliceToken), admin.as(bobToken)
	mine, theirs := `[{"event_type":"alice.x"}]`, `[{"event_type":"bob.x"}]`

	s := alice.mustStream(t, streamPath("filter_groups", mine), nil)
	token := s.connected(t)

	for name, try := range map[string]func() (*sseConn, *response){
		"Last-Event-ID": func() (*sseConn, *response) {
			return bob.openStream(t, streamPath("filter_groups", theirs, "previous_filter_groups", mine), map[string]string{"Last-Event-ID": token})
		},
		"reconnect_token": func() (*sseConn, *response) {
			return bob.openStream(t, streamPath("filter_groups", theirs, "previous_filter_groups", mine, "reconnect_token", token), nil)
		},
	} {
		conn, r := try()
		require.Nil(t, conn, "%s: the stream must not open", name)
		require.Equal(t, http.StatusForbidden, r.Status, "%s: %s", name, r.Body)
		require.NotContains(t, string(r.Body), token, name)
		require.NotContains(t, r.Header.Get("WWW-Authenticate"), token, name)
	}

	// The token alone resumes (clients share a queue that way).
	resumed := bob.mustStream(t, streamPath(), map[string]string{"Last-Event-ID": token})
	require.Equal(t, token, resumed.connected(t))
	resumed.close()
	<-resumed.done

	admin.publishN(t, "bob.x", 100, 3)
	admin.publishN(t, "alice.x", 0, 10)
	got := nValues(t, s.events(t, 10))
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
	s.close()

	require.Empty(t, admin.listDeadLetters(t, nil).DeadLetters, "nothing was dead-lettered")
}
