package app_test

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/cloudbuild"
	"github.com/heraldevents/herald/pubsubx"
)

// wantSchemes is what each build opens (docs/deploy.md, "Builds").
var wantSchemes = map[cloudbuild.Build]struct{ topic, store []string }{
	cloudbuild.Default: {[]string{"awssnssqs", "gcppubsub", "mem", "nats", "rabbit"}, []string{"dynamodb", "firestore", "mem", "postgres", "postgresql"}},
	cloudbuild.AWS:     {[]string{"awssnssqs", "mem"}, []string{"dynamodb", "mem"}},
	cloudbuild.GCP:     {[]string{"gcppubsub", "mem", "nats", "rabbit"}, []string{"firestore", "mem", "postgres", "postgresql"}},
}

// driverSchemes finds every driver package under pubsubx/ (a package
// declaring `const Scheme = "..."`) and returns their schemes.
func driverSchemes(t *testing.T) []string {
	t.Helper()
	schemeRE := regexp.MustCompile(`(?m)^const Scheme = "([a-z0-9+.-]+)"`)
	files, err := filepath.Glob("../../pubsubx/*/*.go")
	require.NoError(t, err)
	var found []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if m := schemeRE.FindSubmatch(b); m != nil {
			found = append(found, string(m[1]))
		}
	}
	require.Contains(t, found, "mem")
	require.Greater(t, len(found), 1)
	slices.Sort(found)
	return found
}

// TestSchemes checks that this build links exactly the drivers it is
// meant to, and that a URL of any other driver's scheme is refused as left
// out of the build, naming the scheme. It runs in every build; CI runs it
// with each tag (go test -tags herald_aws ./functions/app/ -run Schemes).
func TestSchemes(t *testing.T) {
	t.Parallel()
	want, ok := wantSchemes[cloudbuild.Current]
	require.True(t, ok, "build %q", cloudbuild.Current)
	topic, store := app.Schemes()
	require.Equal(t, want.topic, topic)
	require.Equal(t, want.store, store)

	quiet := app.Options{Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}
	leftOut := func(kind, scheme string) string {
		return kind + " scheme " + scheme + " is not in this build (built for " + string(cloudbuild.Current) + "): use the default build, which has every scheme"
	}
	// Every driver under pubsubx/ is linked or refused as left out: none
	// is "not supported" in a slim build. A linked driver's own query
	// check refuses ?bogus=1 before it contacts a server.
	for _, s := range driverSchemes(t) {
		_, err := app.Open(t.Context(), cfg(router.Publish, s+"://x?bogus=1", ""), quiet)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", s, err)
		require.ErrorContains(t, err, config.EnvTopicURL)
		if slices.Contains(want.topic, s) {
			require.Contains(t, herr.MessageOf(err), `unknown query parameter "bogus"`, s)
		} else {
			require.Contains(t, herr.MessageOf(err), leftOut("topic URL", s))
		}
	}
	for _, s := range wantSchemes[cloudbuild.Default].store {
		_, err := app.Open(t.Context(), cfg(router.Acknowledge, "", s+"://x?bogus=1"), quiet)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%s: %v", s, err)
		require.ErrorContains(t, err, config.EnvStoreURL)
		if slices.Contains(want.store, s) {
			require.Contains(t, herr.MessageOf(err), `unknown query parameter "bogus"`, s)
		} else {
			require.Contains(t, herr.MessageOf(err), leftOut("store URL", s))
		}
	}
	_, err := pubsubx.Open(t.Context(), "nosuch://x")
	require.Contains(t, herr.MessageOf(err), `scheme "nosuch" is not supported`, "an unknown scheme is not called left out")
}

// TestSlimBuildsLinkNoOtherCloud lists the packages `make lambda` and
// `make cloudrun` link, with the Makefile's tags: the Lambda bootstrap
// carries no Google client, NATS or RabbitMQ, and the Cloud Run server no
// AWS service client or AWS SDK configuration. (The Cloud Run server
// still links aws-lambda-go/events and the SDK's core and SigV4 signer:
// functions/jobs runs wslambda.CloseStale, which imports them.)
// TestSchemes, run with the tags, checks what registers; this checks what
// is linked.
func TestSlimBuildsLinkNoOtherCloud(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	tags := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
		require.NotNil(t, m, "the Makefile sets %s", name)
		return string(m[1])
	}
	for _, tc := range []struct {
		tags, pkg string
		banned    []string
	}{
		{tags("LAMBDA_TAGS"), "./functions/cmd/lambda", []string{"github.com/prometheus/", "go.opentelemetry.io/contrib/exporters/autoexport", "cloud.google.com/", "gocloud.dev/gcp", "github.com/nats-io/", "github.com/rabbitmq/", "/pubsubx/gcppubsub", "/pubsubx/nats", "/pubsubx/rabbit"}},
		{tags("CLOUDRUN_TAGS"), "./functions/cmd/cloudrun", []string{"github.com/aws/aws-sdk-go-v2/service/", "github.com/aws/aws-sdk-go-v2/config", "gocloud.dev/aws", "gocloud.dev/docstore/awsdynamodb", "/pubsubx/awssnssqs"}},
	} {
		cmd := exec.Command(goTool(), "list", "-deps", "-tags", tc.tags, tc.pkg)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		out, err := cmd.Output()
		require.NoError(t, err, "go list %s", tc.pkg)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, "github.com/heraldevents/herald/pubsubx/mem", "%s links mem", tc.pkg)
		for _, d := range deps {
			for _, b := range tc.banned {
				require.NotContains(t, d, b, "%s -tags %s", tc.pkg, tc.tags)
			}
		}
	}
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}
