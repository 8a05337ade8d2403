package cloudbuild_test

// The per-build dependency checks: what each build links, listed with
// `go list -deps` and the Makefile's tags. make test runs them, and so CI.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSlimBuildsLinkNoOtherCloud lists the packages `make lambda` and
// `make cloudrun` link, with the Makefile's tags: the Lambda bootstrap
// carries no Google client (Pub/Sub, Firestore or any other), NATS or
// RabbitMQ, and the Cloud Run server no AWS package at all: no AWS Lambda
// runtime or event type (github.com/aws/aws-lambda-go), no AWS SDK.
// (functions/jobs takes the API Gateway WebSocket function's connection
// closer as an option rather than importing functions/wslambda, and
// httpx reads a retry-after detail from herr rather than a leasestore
// type, which is what keeps these out.) TestSchemes, run with the tags,
// checks what registers; this checks what is linked. The Lambda
// bootstrap also links no Prometheus package (internal/telemetry's AWS
// build chooses its exporters without autoexport: nothing scrapes a
// frozen function, and their initialisers would run on every cold start).
// make test runs it, and so CI.
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
		{tags("LAMBDA_TAGS"), "./functions/cmd/lambda", []string{"github.com/prometheus/", "go.opentelemetry.io/contrib/exporters/autoexport", "cloud.google.com/", "gocloud.dev/gcp", "gocloud.dev/docstore/gcpfirestore", "google.golang.org/genproto/googleapis/pubsub", "google.golang.org/genproto/googleapis/firestore", "github.com/nats-io/", "github.com/rabbitmq/", "/pubsubx/gcppubsub", "/pubsubx/nats", "/pubsubx/rabbit"}},
		{tags("CLOUDRUN_TAGS"), "./functions/cmd/cloudrun", []string{"github.com/aws/", "gocloud.dev/aws", "gocloud.dev/docstore/awsdynamodb", "/pubsubx/awssnssqs", "/functions/wslambda", "/functions/lambdafn"}},
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

// TestConfigImportsNothingAboveIt lists what package config links: of
// Herald's packages only those below the functions (the core, the store
// and broker seams, auth, herr, …), never another function package, the
// local adapter, a command, a broker driver or a cloud runtime. The
// parser is read by every entrypoint and by tools; it must stay cheap to
// link and must not make the layers above it import each other through
// it. make test runs it, and so CI.
func TestConfigImportsNothingAboveIt(t *testing.T) {
	t.Parallel()
	const herald = "github.com/heraldevents/herald/"
	for _, tags := range []string{"", "herald_aws", "herald_gcp"} {
		cmd := exec.Command(goTool(), "list", "-deps", "-tags", tags, "./functions/config")
		cmd.Dir = "../.."
		out, err := cmd.Output()
		require.NoError(t, err, "go list -tags %q", tags)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, herald+"functions/config")
		for _, d := range deps {
			require.NotContains(t, d, "github.com/aws/aws-lambda-go", "-tags %q", tags)
			require.NotContains(t, d, "cloud.google.com/", "-tags %q", tags)
			rest, ours := strings.CutPrefix(d, herald)
			// pubsubx/driver is the broker seam's interface, not a driver.
			if !ours || rest == "functions/config" || rest == "pubsubx/driver" {
				continue
			}
			for _, above := range []string{"functions/", "local", "cmd/", "client", "internal/cli", "pubsubx/", "leasestore/storeurl", "bench"} {
				require.False(t, strings.HasPrefix(rest, above), "functions/config links %s (-tags %q): it may import only packages below the functions", d, tags)
			}
		}
	}
}
