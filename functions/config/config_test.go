package config_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/telemetry"
)

const longToken = "tok-0123456789abcdef-secret"

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLocalDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Local, env(nil))
	require.NoError(t, err)
	require.Equal(t, config.All, c.Function)
	require.Equal(t, config.DefaultAddr, c.Addr)
	require.Equal(t, config.DefaultDevToken, c.DevToken)
	require.True(t, c.UsesDefaultDevToken())
	require.Equal(t, config.DefaultTopicURL, c.TopicURL)
	require.Equal(t, config.DefaultStoreURL, c.StoreURL)
	require.Equal(t, config.DefaultSource, c.Source)
	require.Equal(t, time.Duration(0), c.ReceiveWait)
	require.Equal(t, config.DefaultMaxLeaseBytes, c.MaxLeaseBytes)
	p, err := c.Authenticator().Authenticate(t.Context(), config.DefaultDevToken)
	require.NoError(t, err)
	require.True(t, p.Can(auth.PermAll))
}

func TestCloudNeedsURLsAndTokens(t *testing.T) {
	t.Parallel()
	_, err := config.Load(config.Lambda, env(nil))
	require.Error(t, err)
	for _, name := range []string{config.EnvTopicURL, config.EnvStoreURL, config.EnvTokens} {
		require.Contains(t, err.Error(), name+":")
	}

	// acknowledge uses only the store; publish only the broker.
	_, err = config.Load(config.Lambda, env(map[string]string{
		config.EnvFunction: "acknowledge", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: longToken,
	}))
	require.NoError(t, err)
	_, err = config.Load(config.Lambda, env(map[string]string{
		config.EnvFunction: "publish", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: longToken,
	}))
	require.ErrorContains(t, err, config.EnvTopicURL+": required for HERALD_FUNCTION=publish")
	require.NotContains(t, err.Error(), config.EnvStoreURL)
}

func TestCloudRunAddress(t *testing.T) {
	t.Parallel()
	base := map[string]string{config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: longToken}
	c, err := config.Load(config.CloudRun, env(base))
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:8080", c.Addr)
	require.Empty(t, c.Source == "", "cloud profiles default the source too")
	require.Equal(t, config.DefaultSource, c.Source)

	base[config.EnvPort] = "9090"
	c, err = config.Load(config.CloudRun, env(base))
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9090", c.Addr)

	base[config.EnvPort] = "http"
	_, err = config.Load(config.CloudRun, env(base))
	require.ErrorContains(t, err, "PORT:")
}

func TestBadValuesNameTheVariable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		config.EnvFunction:       "publsh",
		config.EnvReceiveWait:    "forever",
		config.EnvMaxLeaseBytes:  "10",
		config.EnvTopicURL:       "no-scheme",
		config.EnvStoreURL:       "::bad",
		config.EnvTokens:         "{not json",
		config.EnvTokensFile:     "/nonexistent/tokens.json",
		config.EnvSource:         "has space",
		config.EnvPublishTimeout: "soon",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := map[string]string{config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: longToken}
			m[name] = value
			_, err := config.Load(config.Lambda, env(m))
			require.Error(t, err)
			require.Contains(t, err.Error(), name+":")
		})
	}
	_, err := config.Load(config.Lambda, env(map[string]string{
		config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key", config.EnvReceiveWait: "21s", config.EnvDevToken: longToken,
	}))
	require.ErrorContains(t, err, config.EnvReceiveWait)
}

// TestPublishTimeout: HERALD_PUBLISH_TIMEOUT is parsed within its bounds;
// unset is the default, 5s.
func TestPublishTimeout(t *testing.T) {
	t.Parallel()
	base := func(v string) map[string]string {
		m := map[string]string{config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: longToken}
		if v != "" {
			m[config.EnvPublishTimeout] = v
		}
		return m
	}
	c, err := config.Load(config.Lambda, env(base("")))
	require.NoError(t, err)
	require.Equal(t, config.DefaultPublishTimeout, c.PublishTimeout)
	c, err = config.Load(config.Lambda, env(base("750ms")))
	require.NoError(t, err)
	require.Equal(t, 750*time.Millisecond, c.PublishTimeout)
	for _, bad := range []string{"50ms", "26s", "-1s"} {
		_, err = config.Load(config.Lambda, env(base(bad)))
		require.ErrorContains(t, err, config.EnvPublishTimeout+":", bad)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"file-token-0123456789": {"id": "scheduler", "permissions": ["run:jobs"]}}`), 0o600))
	c, err := config.Load(config.CloudRun, env(map[string]string{
		config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key",
		config.EnvTokens:     `{"` + longToken + `": {"id": "billing", "permissions": ["publish:billing.*", "read:events"]}}`,
		config.EnvTokensFile: file,
	}))
	require.NoError(t, err)
	require.Empty(t, c.DevToken, "no development token in the cloud by default")
	a := c.Authenticator()
	p, err := a.Authenticate(t.Context(), longToken)
	require.NoError(t, err)
	require.Equal(t, "billing", p.ID)
	require.True(t, p.CanPublish("billing.invoice.paid"))
	require.False(t, p.CanPublish("shop.order"))
	require.True(t, p.Can(auth.PermReadEvents))
	require.False(t, p.Can(auth.PermRunJobs))
	p, err = a.Authenticate(t.Context(), "file-token-0123456789")
	require.NoError(t, err)
	require.True(t, p.Can(auth.PermRunJobs))
	_, err = a.Authenticate(t.Context(), config.DefaultDevToken)
	require.Error(t, err)
}

// TestTokenErrorsNeverShowTheToken feeds bad token tables whose tokens are
// distinctive and checks no error repeats them.
func TestTokenErrorsNeverShowTheToken(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-TOKEN-abcdefghij"
	bad := []string{
		`{"` + secret + `": {"id": "x", "permissions": ["launch:missiles"]}}`,
		`{"` + secret + `": {"id": "x", "permissions": "read:events"}}`,
		`{"` + secret + `": {"id": "", "permissions": ["read:events"]}}`,
		`{"` + secret + `": {"id": "x", "permissions": []}}`,
		`{"` + secret + `": {"id": "x", "perms": ["read:events"]}}`,
		`{"` + secret + `": "read:events"}`,
		`{"` + secret + `": {"id": "x", "permissions": ["read:events"]}, }`,
		`["` + secret + `"]`,
		`{" ` + secret + `": {"id": "x", "permissions": ["read:events"]}}`,
	}
	for _, b := range bad {
		_, err := config.ParseTokens([]byte(b))
		require.Error(t, err, b)
		require.NotContains(t, err.Error(), "SECRET", b)
	}
	// Short and duplicate tokens in the cloud.
	_, err := config.Load(config.Lambda, env(map[string]string{
		config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key",
		config.EnvTokens: `{"SECRET-short": {"id": "x", "permissions": ["read:events"]}}`,
	}))
	require.ErrorContains(t, err, `principal "x" is shorter than`)
	require.NotContains(t, err.Error(), "SECRET")
	_, err = config.Load(config.Lambda, env(map[string]string{
		config.EnvTopicURL: "mem://t", config.EnvStoreURL: "mem://s/key", config.EnvDevToken: secret,
		config.EnvTokens: `{"` + secret + `": {"id": "x", "permissions": ["read:events"]}}`,
	}))
	require.ErrorContains(t, err, "also given by HERALD_DEV_TOKEN")
	require.NotContains(t, err.Error(), "SECRET")
}

func TestRedact(t *testing.T) {
	t.Parallel()
	require.Equal(t, "amqp://…@host:5672/x", config.Redact("amqp://guest:pw@host:5672/x?q=secret"))
	require.Equal(t, "mem://herald", config.Redact("mem://herald"))
}

// TestReadBy checks which functions read which variables: what the SAM
// template and the Terraform module are checked against.
func TestReadBy(t *testing.T) {
	t.Parallel()
	names := func(p config.Profile, f config.Function) []string {
		var out []string
		for _, v := range config.ReadBy(p, f) {
			out = append(out, v.Name)
		}
		return out
	}
	pub := names(config.Lambda, config.Publish)
	require.Contains(t, pub, config.EnvTopicURL)
	require.Contains(t, pub, config.EnvSource)
	require.Contains(t, pub, config.EnvPublishTimeout)
	require.Contains(t, pub, config.EnvStoreURL, "the claim-check stores big events")
	require.NotContains(t, pub, config.EnvPort)
	ack := names(config.Lambda, config.Acknowledge)
	require.Contains(t, ack, config.EnvStoreURL)
	require.NotContains(t, ack, config.EnvTopicURL)
	run := names(config.CloudRun, config.All)
	require.Contains(t, run, config.EnvPort)
	require.Contains(t, run, config.EnvReceiveWait)
	require.NotContains(t, run, config.EnvAddr)
	local := names(config.Local, config.All)
	require.Contains(t, local, config.EnvAddr)
	require.NotContains(t, local, config.EnvFunction)

	// Every entrypoint honours the OpenTelemetry variables; the
	// Prometheus exporter's only where something can scrape it.
	for _, f := range config.Functions() {
		for _, p := range []config.Profile{config.Local, config.Lambda, config.CloudRun} {
			read := names(p, f)
			for _, v := range []string{config.EnvOTelSDKDisabled, config.EnvOTelServiceName, config.EnvOTelResourceAttributes,
				config.EnvOTelTracesExporter, config.EnvOTelMetricsExporter, config.EnvOTelOTLPEndpoint, config.EnvOTelOTLPProtocol} {
				require.Contains(t, read, v, "%s %s", p, f)
			}
			if p == config.Lambda {
				require.NotContains(t, read, config.EnvOTelPrometheusPort)
			} else {
				require.Contains(t, read, config.EnvOTelPrometheusPort, "%s %s", p, f)
			}
		}
	}
	// The names are the ones package telemetry reads.
	require.Equal(t, telemetry.EnvSDKDisabled, config.EnvOTelSDKDisabled)
	require.Equal(t, telemetry.EnvTracesExporter, config.EnvOTelTracesExporter)
	require.Equal(t, telemetry.EnvMetricsExporter, config.EnvOTelMetricsExporter)
}

// TestDocsListEveryVariable keeps the configuration table of
// docs/configuration.md in step with the code.
func TestDocsListEveryVariable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	section := string(b)
	rows := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\|").FindAllStringSubmatch(section, -1)
	var listed []string
	for _, r := range rows {
		listed = append(listed, r[1])
	}
	var want []string
	for _, v := range config.Vars() {
		want = append(want, v.Name)
	}
	require.ElementsMatch(t, want, listed, "docs/configuration.md table vs config.Vars")
}

// TestStreamVariables checks the notifications API's lifetimes, the delivery limit and
// the SSE settings: defaults, overrides and ranges.
func TestStreamVariables(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Local, env(nil))
	require.NoError(t, err)
	require.Equal(t, config.DefaultReconnectGrace, c.ReconnectGrace)
	require.Equal(t, config.DefaultQueueIdleWindow, c.QueueIdleWindow)
	require.Equal(t, config.DefaultDeliveryLimit, c.DeliveryLimit)
	require.Equal(t, config.DefaultSSEKeepAlive, c.SSEKeepAlive)
	require.Equal(t, config.DefaultSSEAckDelay, c.SSEAckDelay)
	require.Equal(t, config.DefaultReapInterval, c.ReapInterval)
	require.Equal(t, 336*time.Hour, c.ClaimRetention, "SQS's longest retention")

	c, err = config.Load(config.Local, env(map[string]string{
		config.EnvReconnectGrace: "5s", config.EnvQueueIdleWindow: "2h", config.EnvDeliveryLimit: "3",
		config.EnvSSEKeepAlive: "30s", config.EnvSSEAckDelay: "0s", config.EnvReapInterval: "1s",
		config.EnvClaimRetention: "720h",
	}))
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.ReconnectGrace)
	require.Equal(t, 2*time.Hour, c.QueueIdleWindow)
	require.Equal(t, 3, c.DeliveryLimit)
	require.Equal(t, 30*time.Second, c.SSEKeepAlive)
	require.Zero(t, c.SSEAckDelay, "0s means no delay")
	require.Equal(t, time.Second, c.ReapInterval)
	require.Equal(t, 720*time.Hour, c.ClaimRetention)

	for name, bad := range map[string]string{
		config.EnvReconnectGrace: "0s", config.EnvQueueIdleWindow: "forever", config.EnvDeliveryLimit: "0",
		config.EnvSSEKeepAlive: "10m", config.EnvSSEAckDelay: "-1s", config.EnvReapInterval: "1ms",
		config.EnvClaimRetention: "30m",
	} {
		_, err := config.Load(config.Local, env(map[string]string{name: bad}))
		require.ErrorContains(t, err, name+":", "%s=%s", name, bad)
	}
	_, err = config.Load(config.Local, env(map[string]string{config.EnvDeliveryLimit: "1001"}))
	require.ErrorContains(t, err, config.EnvDeliveryLimit)
}

// TestConsumerPermissions checks that HERALD_TOKENS accepts the notifications API's
// permissions, with and without the service prefix, and receive patterns.
func TestConsumerPermissions(t *testing.T) {
	t.Parallel()
	ts, err := config.ParseTokens([]byte(`{"` + longToken + `": {"id": "svc", "permissions": [
		"receive:myapp.*", "consume-durable-queues", "create-durable-queues", "delete-durable-queues",
		"inspect-and-replay-all-dlq", "event-consumer-service:consume-durable-queues"]}}`))
	require.NoError(t, err)
	p := ts[longToken]
	require.True(t, p.CanReceive("myapp.a"))
	require.True(t, p.Can(auth.PermInspectDeadLetters))
	for _, bad := range []string{"receive:", "consume-durable-queue", "event-consumer-service:read:events"} {
		_, err := config.ParseTokens([]byte(`{"` + longToken + `": {"id": "svc", "permissions": ["` + bad + `"]}}`))
		require.ErrorContains(t, err, "unknown permission", bad)
		require.NotContains(t, err.Error(), longToken)
	}
}

func TestLogLevel(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Local, env(nil))
	require.NoError(t, err)
	require.Equal(t, slog.LevelInfo, c.LogLevel)
	c, err = config.Load(config.Local, env(map[string]string{config.EnvLogLevel: "WARN"}))
	require.NoError(t, err)
	require.Equal(t, slog.LevelWarn, c.LogLevel)
	_, err = config.Load(config.Local, env(map[string]string{config.EnvLogLevel: "info+2"}))
	require.ErrorContains(t, err, config.EnvLogLevel+`: "info+2" is not a log level: debug, info, warn or error`)
}
