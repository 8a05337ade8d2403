package auth_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
)

// TestStaticTokens checks lookup and that refusals are Unauthenticated
// without the token in the message.
func TestStaticTokens(t *testing.T) {
	t.Parallel()
	alice := &auth.Principal{ID: "alice", Permissions: []string{auth.PermReadEvents}}
	bob := &auth.Principal{ID: "bob", Permissions: []string{"publish:bob.*"}}
	tokens := auth.StaticTokens{"alice-token": alice, "bob-token": bob}
	ctx := context.Background()

	p, err := tokens.Authenticate(ctx, "alice-token")
	require.NoError(t, err)
	require.Same(t, alice, p)
	p, err = tokens.Authenticate(ctx, "bob-token")
	require.NoError(t, err)
	require.Same(t, bob, p)

	for _, bad := range []string{"", "alice", "alice-token ", "ALICE-TOKEN", "alice-tokenx", "bob-token\x00"} {
		p, err := tokens.Authenticate(ctx, bad)
		require.Nil(t, p, "%q", bad)
		require.Equal(t, herr.Unauthenticated, herr.CodeOf(err), "%q", bad)
		if bad != "" {
			require.NotContains(t, err.Error(), bad)
			require.NotContains(t, herr.MessageOf(err), bad)
		}
	}

	// An empty table knows nobody, not even the empty token.
	_, err = auth.StaticTokens{}.Authenticate(ctx, "")
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err))
	_, err = auth.StaticTokens{"": alice}.Authenticate(ctx, "")
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err), "an empty token never authenticates")
}

// TestDevToken checks the local adapter's all-powerful principal.
func TestDevToken(t *testing.T) {
	t.Parallel()
	p, err := auth.DevToken("dev-token").Authenticate(context.Background(), "dev-token")
	require.NoError(t, err)
	require.Equal(t, auth.DevPrincipalID, p.ID)
	require.True(t, auth.Reserved(p.ID), "no JWT or HERALD_TOKENS entry can name it")
	require.True(t, p.Can(auth.PermReadEvents))
	require.True(t, p.Can(auth.PermManageDestinations))
	require.True(t, p.CanPublish("any.type"))
	_, err = auth.DevToken("dev-token").Authenticate(context.Background(), "other")
	require.Error(t, err)
	require.Empty(t, auth.DevToken(""), "no token, no entry")
}

// TestCanPublish is the table of publish:PATTERN permissions.
func TestCanPublish(t *testing.T) {
	t.Parallel()
	tests := []struct {
		perms []string
		yes   []string
		no    []string
	}{
		{[]string{"publish:myapp.user.created"}, []string{"myapp.user.created"}, []string{"myapp.user.created2", "myapp.user", "other"}},
		{[]string{"publish:myapp.*"}, []string{"myapp.a", "myapp.user.created", "myapp."}, []string{"myapp", "myappx.a", "other.myapp.a"}},
		{[]string{"publish:myapp*"}, []string{"myapp", "myappx", "myapp.a"}, []string{"myap", "xmyapp"}},
		{[]string{"publish:*"}, []string{"a", "anything.at.all"}, nil},
		{[]string{"*"}, []string{"a", "b.c"}, nil},
		{[]string{"publish:a.*", "publish:b.exact"}, []string{"a.1", "b.exact"}, []string{"b.other", "c.1"}},
		// Other permissions and malformed ones grant nothing.
		{[]string{auth.PermReadEvents, auth.PermManageDestinations, "publish", "publish:", "PUBLISH:*", "publisher:*"}, nil, []string{"a", "read:events"}},
		{nil, nil, []string{"a"}},
		// A "*" in the middle is literal, not a wildcard.
		{[]string{"publish:a.*.b"}, []string{"a.*.b"}, []string{"a.x.b"}},
	}
	for _, tc := range tests {
		p := &auth.Principal{ID: "p", Permissions: tc.perms}
		for _, typ := range tc.yes {
			require.True(t, p.CanPublish(typ), "%v should publish %q", tc.perms, typ)
		}
		for _, typ := range tc.no {
			require.False(t, p.CanPublish(typ), "%v should not publish %q", tc.perms, typ)
		}
	}
}

// TestCanAndRequire checks plain permissions and the error Require gives.
func TestCanAndRequire(t *testing.T) {
	t.Parallel()
	reader := &auth.Principal{ID: "r", Permissions: []string{auth.PermReadEvents}}
	require.True(t, reader.Can(auth.PermReadEvents))
	require.False(t, reader.Can(auth.PermManageDestinations))
	require.False(t, reader.Can("read:event"), "no prefix matching")
	require.NoError(t, reader.Require(auth.PermReadEvents))

	err := reader.Require(auth.PermManageDestinations)
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), auth.PermManageDestinations)

	all := &auth.Principal{ID: "root", Permissions: []string{auth.PermAll}}
	require.True(t, all.Can("anything:at-all"))
	require.NoError(t, all.Require(auth.PermManageDestinations))
}

// TestContext checks that the principal travels in a context.
func TestContext(t *testing.T) {
	t.Parallel()
	_, err := auth.FromContext(context.Background())
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err))

	p := &auth.Principal{ID: "x"}
	got, err := auth.FromContext(auth.WithPrincipal(context.Background(), p))
	require.NoError(t, err)
	require.Same(t, p, got)

	_, err = auth.FromContext(auth.WithPrincipal(context.Background(), nil))
	require.Equal(t, herr.Unauthenticated, herr.CodeOf(err), "a nil principal is no principal")
}

// TestCanReceive checks the per-event-type read right, which takes the
// same patterns as publish and is independent of it.
func TestCanReceive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		perms []string
		yes   []string
		no    []string
		any   bool
	}{
		{[]string{"receive:myapp.*"}, []string{"myapp.a", "myapp.user.created"}, []string{"myapp", "other.a"}, true},
		{[]string{"receive:a.b"}, []string{"a.b"}, []string{"a.bc", "a"}, true},
		{[]string{"receive:*"}, []string{"a", "x.y"}, nil, true},
		{[]string{"*"}, []string{"a"}, nil, true},
		// publish rights grant no receive right, and a bare prefix none.
		{[]string{"publish:*", auth.PermReadEvents, "receive:", "RECEIVE:*"}, nil, []string{"a"}, false},
		{nil, nil, []string{"a"}, false},
	}
	for _, tc := range tests {
		p := &auth.Principal{ID: "p", Permissions: tc.perms}
		for _, typ := range tc.yes {
			require.True(t, p.CanReceive(typ), "%v should receive %q", tc.perms, typ)
		}
		for _, typ := range tc.no {
			require.False(t, p.CanReceive(typ), "%v should not receive %q", tc.perms, typ)
		}
		require.Equal(t, tc.any, p.CanReceiveAny(), "%v", tc.perms)
	}
}

func TestCanReceiveAll(t *testing.T) {
	t.Parallel()
	for perms, want := range map[string]bool{
		"*": true, "receive:*": true, "receive:a.*": false, "receive:": false, "publish:*": false, "RECEIVE:*": false,
	} {
		p := &auth.Principal{ID: "p", Permissions: []string{auth.PermReadEvents, perms}}
		require.Equal(t, want, p.CanReceiveAll(), "%q", perms)
		if want {
			// All means all: every type CanReceive is asked about.
			for _, typ := range []string{"a", "x.y.z", "orders.placed"} {
				require.True(t, p.CanReceive(typ), "%q should receive %q", perms, typ)
			}
		}
	}
}

// TestServicePrefix checks that the notifications API's "event-consumer-service:"
// spelling grants the same permission, and nothing else.
func TestServicePrefix(t *testing.T) {
	t.Parallel()
	p := &auth.Principal{ID: "ops", Permissions: []string{"event-consumer-service:" + auth.PermInspectDeadLetters}}
	require.True(t, p.Can(auth.PermInspectDeadLetters))
	require.False(t, p.Can(auth.PermConsumeDurableQueues))
	require.False(t, p.Can("event-consumer-service:"), "the bare prefix is not a permission")
	q := &auth.Principal{ID: "q", Permissions: []string{auth.PermCreateDurableQueues}}
	require.True(t, q.Can(auth.PermCreateDurableQueues))
	require.False(t, q.Can(auth.PermDeleteDurableQueues))
}
