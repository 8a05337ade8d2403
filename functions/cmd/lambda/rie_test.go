package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/internal/testkit"
)

// The runtime interface emulator the tests run the bootstrap under, and
// where they install it when it is not on PATH (.ci/run installs it).
const (
	rieModule  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"
)

// rieToken is the bearer token the emulated function accepts.
const rieToken = "rie-test-token-0123456789"

// missing skips the test with the reason, or fails it under
// HERALD_REQUIRE_SERVERS=1 or in CI (CI=true), where .ci/run installs the
// emulator.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("HERALD_REQUIRE_SERVERS") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("%s (HERALD_REQUIRE_SERVERS=1 or CI=true: the emulator is required)", msg)
	}
	t.Skipf("%s; install it to run this test", msg)
}

// rieBinary returns aws-lambda-rie from PATH, or installs it with go
// install into a GOBIN under the temp directory (kept for later runs).
func rieBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	gobin := filepath.Join(os.TempDir(), "herald-aws-lambda-rie-"+rieVersion)
	bin := filepath.Join(gobin, "aws-lambda-rie")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command(goTool(), "install", rieModule+"@"+rieVersion)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		missing(t, "aws-lambda-rie is not on PATH and go install failed: %v\n%s", err, out)
	}
	return bin
}

// goTool returns the go command: the one running this test's build
// (GOROOT is set by go test), else go on PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// lambdaTags reads LAMBDA_TAGS from the Makefile, the build tags `make
// lambda` and `sam build` use (lambda.norpc and herald_aws: the AWS build
// links only the mem, awssnssqs and dynamodb schemes).
func lambdaTags(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile("../../../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^LAMBDA_TAGS\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
	require.NotNil(t, m, "the Makefile sets LAMBDA_TAGS")
	return string(m[1])
}

// buildBootstrap builds this command as a Lambda bootstrap for the host
// architecture, the way `make lambda` does (same tags and flags), so the
// tests run what ships.
func buildBootstrap(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command(goTool(), "build", "-tags", lambdaTags(t), "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build bootstrap: %s", b)
	return out
}

// rie is a running emulator with the bootstrap as its function.
type rie struct {
	t      *testing.T
	url    string
	output *testkit.SyncBuffer
}

// startRIE runs the bootstrap under aws-lambda-rie with env (plus the
// process environment minus other HERALD_* variables).
func startRIE(t *testing.T, bootstrap string, env map[string]string) *rie {
	t.Helper()
	bin := rieBinary(t)
	port, apiPort := emulators.FreePort(t), emulators.FreePort(t)
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(port),
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(apiPort),
		bootstrap)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") && !strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// The emulator and the bootstrap it started share a process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("emulator output:\n%s", out.String())
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		require.Less(t, time.Since(start), 30*time.Second, "aws-lambda-rie did not listen on %s:\n%s", addr, out.String())
	}
	return &rie{t: t, url: "http://" + addr + "/2015-03-31/functions/function/invocations", output: out}
}

// invoke sends payload and returns the function's answer.
func (r *rie) invoke(payload []byte) []byte {
	r.t.Helper()
	res, err := http.Post(r.url, "application/json", bytes.NewReader(payload))
	require.NoError(r.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(r.t, err)
	require.Equal(r.t, http.StatusOK, res.StatusCode, "invoke: %s", b)
	require.Empty(r.t, res.Header.Get("X-Amz-Function-Error"), "function error: %s", b)
	return b
}

// http sends an API Gateway HTTP API (payload 2.0) event and decodes the
// response event.
func (r *rie) http(method, path, query, body string) events.APIGatewayV2HTTPResponse {
	r.t.Helper()
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, RawQueryString: query,
		Headers: map[string]string{"authorization": "Bearer " + rieToken, "content-type": "application/json"},
		Body:    body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "abc123.execute-api.us-east-1.amazonaws.com", Stage: "$default", RequestID: "r",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.7"},
		},
	}
	payload, err := json.Marshal(ev)
	require.NoError(r.t, err)
	var res events.APIGatewayV2HTTPResponse
	require.NoError(r.t, json.Unmarshal(r.invoke(payload), &res))
	return res
}

var initDurationRE = regexp.MustCompile(`Init Duration: ([0-9.]+) ms`)

// TestBootstrapUnderRIE runs the real bootstrap under the Lambda runtime
// interface emulator and drives a durable consumer end to end with API
// Gateway events: create, publish, pull, acknowledge, read the cursor, and
// the scheduled job. One emulator process keeps one instance alive, so the
// in-memory broker and store are shared across invocations, as the
// cloud's would be across instances.
func TestBootstrapUnderRIE(t *testing.T) {
	bootstrap := buildBootstrap(t)
	st, err := os.Stat(bootstrap)
	require.NoError(t, err)
	t.Logf("bootstrap (%s/%s): %.1f MB", "linux", runtime.GOARCH, float64(st.Size())/1e6)

	r := startRIE(t, bootstrap, map[string]string{
		"HERALD_FUNCTION":  "all",
		"HERALD_TOPIC_URL": "mem://rie",
		"HERALD_STORE_URL": "mem://rie/key",
		"HERALD_TOKENS":    `{"` + rieToken + `": {"id": "rie-test", "permissions": ["*"]}}`,
		"HERALD_SOURCE":    "/herald/rie",
	})

	// 1. Create a durable consumer.
	start := time.Now()
	res := r.http("POST", "/v1/event-destinations", "", `{"type":"DURABLE_CONSUMER","filter_groups":[{"event_type":"shop.order.placed"}]}`)
	firstInvoke := time.Since(start)
	require.Equal(t, http.StatusCreated, res.StatusCode, res.Body)
	var dest struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Committed string `json:"committed"`
		InFlight  int64  `json:"in_flight"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &dest))
	require.NotEmpty(t, dest.ID)
	require.Equal(t, "DURABLE_CONSUMER", dest.Type)
	require.Equal(t, "001.00000000000000000000", dest.Committed, "the zero position before the first commit")
	require.Equal(t, "/v1/event-destinations/"+dest.ID, res.Headers["Location"])

	// The emulator prints its REPORT line after it has answered.
	var m []string
	require.Eventually(t, func() bool {
		m = initDurationRE.FindStringSubmatch(r.output.String())
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "the emulator reports an init duration")
	initMs, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	// The emulator's figure covers only its own bookkeeping (it does not
	// wait for the runtime's init), so also time the first invoke against
	// the fastest warm one: the difference is process start plus init.
	warm := time.Hour
	for range 5 {
		s := time.Now()
		require.Equal(t, http.StatusOK, r.http("GET", "/health", "", "").StatusCode)
		warm = min(warm, time.Since(s))
	}
	t.Logf("init: RIE REPORT Init Duration %.2f ms; first invoke %s, warm invoke %s, so start+init ≈ %s",
		initMs, firstInvoke.Round(100*time.Microsecond), warm.Round(100*time.Microsecond), (firstInvoke - warm).Round(100*time.Microsecond))

	// 2. Publish one event and a batch of two (one filtered out).
	res = r.http("POST", "/api/v1beta/events", "", `{"event":{"event_type":"shop.order.placed","message":{"order":1},"resource":{"resource_id":"/orders/1"}}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	var single struct {
		Result struct {
			Event         map[string]any `json:"event"`
			Success       bool           `json:"success"`
			FailureReason *string        `json:"failure_reason"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &single))
	require.True(t, single.Result.Success, res.Body)
	res = r.http("POST", "/api/v1beta/events/batch", "", `{"events":[
		{"event_type":"shop.order.placed","message":{"order":2}},
		{"event_type":"shop.order.shipped","message":{"order":1}}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	var batch struct {
		Results []struct {
			Success bool `json:"success"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &batch))
	require.Len(t, batch.Results, 2)
	require.True(t, batch.Results[0].Success && batch.Results[1].Success, res.Body)

	// 3. Pull: the two matching events, in publish order, as CloudEvents.
	res = r.http("POST", "/v1/event-destinations/"+dest.ID+"/pull", "limit=10&visibility=60&workerId=w1", "")
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	var lease struct {
		LeaseID    string `json:"leaseId"`
		Generation *int64 `json:"generation"`
		Attempt    int64  `json:"attempt"`
		ExpiresAt  string `json:"expiresAt"`
		Events     []struct {
			SpecVersion string         `json:"specversion"`
			Type        string         `json:"type"`
			Source      string         `json:"source"`
			Subject     string         `json:"subject"`
			Sequence    string         `json:"sequence"`
			Data        map[string]any `json:"data"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &lease))
	require.NotEmpty(t, lease.LeaseID)
	require.NotNil(t, lease.Generation)
	require.Zero(t, *lease.Generation)
	require.Equal(t, int64(1), lease.Attempt)
	_, err = time.Parse(time.RFC3339Nano, lease.ExpiresAt)
	require.NoError(t, err)
	require.Len(t, lease.Events, 2)
	require.Equal(t, "1.0", lease.Events[0].SpecVersion)
	require.Equal(t, "shop.order.placed", lease.Events[0].Type)
	require.Equal(t, "/herald/rie", lease.Events[0].Source)
	require.Equal(t, "/orders/1", lease.Events[0].Subject)
	require.Equal(t, 1.0, lease.Events[0].Data["order"])
	require.Equal(t, 2.0, lease.Events[1].Data["order"])
	require.Equal(t, "001.00000000000000000001", lease.Events[0].Sequence)
	require.Equal(t, "001.00000000000000000002", lease.Events[1].Sequence)

	// The same worker pulling again gets the same lease; caught up
	// elsewhere is 204.
	res = r.http("POST", "/v1/event-destinations/"+dest.ID+"/pull", "workerId=w1", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Body, lease.LeaseID)
	res = r.http("POST", "/v1/event-destinations/"+dest.ID+"/pull", "workerId=w2", "")
	require.Equal(t, http.StatusNoContent, res.StatusCode, res.Body)

	// 4. Acknowledge: committed, with the cursor at the last event.
	res = r.http("POST", "/v1/event-destinations/"+dest.ID+"/acknowledge", "",
		fmt.Sprintf(`{"leaseId":%q,"generation":0,"status":"ok"}`, lease.LeaseID))
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	require.JSONEq(t, `{"status":"committed","committed":"001.00000000000000000002"}`, res.Body)
	res = r.http("POST", "/v1/event-destinations/"+dest.ID+"/acknowledge", "",
		fmt.Sprintf(`{"leaseId":%q,"generation":0,"status":"ok"}`, lease.LeaseID))
	require.JSONEq(t, `{"status":"committed","committed":"001.00000000000000000002"}`, res.Body, "a repeat answers as the first did")
	res = r.http("POST", "/v1/event-destinations/"+dest.ID+"/acknowledge", "", `{"leaseId":"x"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode, res.Body)

	// 5. The destination shows the committed cursor.
	res = r.http("GET", "/v1/event-destinations/"+dest.ID, "", "")
	require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	require.NoError(t, json.Unmarshal([]byte(res.Body), &dest))
	require.Equal(t, "001.00000000000000000002", dest.Committed)
	require.Zero(t, dest.InFlight)

	// 6. The scheduled job, as EventBridge Scheduler invokes it.
	var job map[string]any
	require.NoError(t, json.Unmarshal(r.invoke([]byte(`{"job":"lease-expiry"}`)), &job))
	require.Equal(t, map[string]any{"job": "lease-expiry", "consumers": 1.0, "requeued_leases": 0.0, "requeued_events": 0.0, "failed": 0.0}, job)

	// Errors keep their status and JSON body; unknown routes are 404.
	res = r.http("POST", "/v1/event-destinations/nope/pull", "", "")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Contains(t, res.Body, `"code":"not_found"`)
	require.NotContains(t, r.output.String(), rieToken, "the token is never logged")
}

// TestBootstrapRefusesBadConfiguration checks that an init failure names
// the variable and surfaces as a function error.
func TestBootstrapRefusesBadConfiguration(t *testing.T) {
	bootstrap := buildBootstrap(t)
	r := startRIE(t, bootstrap, map[string]string{
		"HERALD_FUNCTION": "publish",
		"HERALD_TOKENS":   `{"` + rieToken + `": {"id": "x", "permissions": ["*"]}}`,
	})
	res, err := http.Post(r.url, "application/json", strings.NewReader(`{"job":"lease-expiry"}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.True(t, res.Header.Get("X-Amz-Function-Error") != "" || res.StatusCode != http.StatusOK, "init failed, so the invoke fails: %d %s", res.StatusCode, b)
	require.Eventually(t, func() bool {
		return strings.Contains(r.output.String(), "HERALD_TOPIC_URL: required for HERALD_FUNCTION=publish")
	}, 10*time.Second, 50*time.Millisecond, "the log names the variable")
	require.NotContains(t, r.output.String(), rieToken)
}

// TestBootstrapRefusesSchemeNotInBuild checks that the shipped bootstrap
// (the AWS build) refuses a Google Cloud topic URL at init, saying that
// this build leaves the scheme out.
func TestBootstrapRefusesSchemeNotInBuild(t *testing.T) {
	bootstrap := buildBootstrap(t)
	r := startRIE(t, bootstrap, map[string]string{
		"HERALD_FUNCTION":  "publish",
		"HERALD_TOPIC_URL": "gcppubsub://projects/p/topics/t",
		"HERALD_STORE_URL": "mem://rie-scheme/key",
		"HERALD_TOKENS":    `{"` + rieToken + `": {"id": "x", "permissions": ["*"]}}`,
	})
	res, err := http.Post(r.url, "application/json", strings.NewReader(`{"job":"lease-expiry"}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.True(t, res.Header.Get("X-Amz-Function-Error") != "" || res.StatusCode != http.StatusOK, "init failed, so the invoke fails: %d %s", res.StatusCode, b)
	require.Eventually(t, func() bool {
		return strings.Contains(r.output.String(), "topic URL scheme gcppubsub is not in this build (built for AWS)")
	}, 10*time.Second, 50*time.Millisecond, "the log names the scheme and the build")
}
