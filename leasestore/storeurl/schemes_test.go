package storeurl_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/cloudbuild"
	"github.com/heraldevents/herald/leasestore/storeurl"
)

// TestSchemes checks that this build opens exactly the store schemes it is
// meant to (internal/cloudbuild) and refuses the others as left out of the
// build. It runs in every build; CI runs it with each tag
// (go test -tags herald_aws ./leasestore/storeurl/ -run Schemes).
func TestSchemes(t *testing.T) {
	t.Parallel()
	want := map[cloudbuild.Build][]string{
		cloudbuild.Default: {"dynamodb", "firestore", "mem", "postgres", "postgresql"},
		cloudbuild.AWS:     {"dynamodb", "mem"},
		cloudbuild.GCP:     {"firestore", "mem", "postgres", "postgresql"},
	}[cloudbuild.Current]
	require.NotNil(t, want, "build %q", cloudbuild.Current)
	require.Equal(t, want, storeurl.Schemes())

	// Each URL is refused by its scheme's own checks (a key field other
	// than "key", an unknown parameter) before any server is contacted,
	// which shows the scheme's opener ran; a scheme the build leaves out is
	// refused as such.
	for scheme, tc := range map[string]struct{ url, msg string }{
		"mem":        {"mem://herald/id", `must be "key"`},
		"dynamodb":   {"dynamodb://t?partition_key=id", `must be "key"`},
		"firestore":  {"firestore://projects/p/databases/(default)/documents/c?name_field=id", `must be "key"`},
		"postgres":   {"postgres://h/db?key_field=id", `unknown query parameter "key_field"`},
		"postgresql": {"postgresql://h/db?key_field=id", `unknown query parameter "key_field"`},
	} {
		_, err := storeurl.Open(t.Context(), tc.url)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", scheme, err)
		if slices.Contains(want, scheme) {
			require.Contains(t, herr.MessageOf(err), tc.msg, scheme)
			continue
		}
		require.Equal(t, "store URL scheme "+scheme+" is not in this build (built for "+string(cloudbuild.Current)+"): use the default build, which has every scheme",
			herr.MessageOf(err))
	}

	_, err := storeurl.Open(t.Context(), "redis://h/key")
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Contains(t, herr.MessageOf(err), `scheme "redis" is not supported`)
	for _, s := range want {
		require.Contains(t, herr.MessageOf(err), s, "the message lists what this build opens")
	}
}
