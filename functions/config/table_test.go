package config_test

import (
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
)

// profiles are the three entrypoints.
var profiles = []config.Profile{config.Local, config.Lambda, config.CloudRun}

// TestDefaultsAreValid: every profile's defaults pass Validate, and Load
// with an empty environment lands on the same values (the cloud profiles
// then complain only of what is required).
func TestDefaultsAreValid(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		d := config.Defaults(p)
		require.NoError(t, d.Validate(), p)
		l, _ := config.Load(p, env(nil))
		require.Empty(t, l.Tokens, p)
		l.Tokens = nil
		require.Equal(t, d, l, "%s: Defaults and Load of an empty environment", p)
	}
	l := config.Defaults(config.Local)
	require.Equal(t, config.DefaultSSEAckDelay, l.SSEAckDelay)
	require.Equal(t, config.DefaultMaxInflightBytes, int(l.MaxInflightBytes))
	require.Equal(t, int64(config.DefaultMaxConcurrentPublishes), l.MaxConcurrentPublishes)
	require.Equal(t, config.DefaultReapInterval, l.ReapInterval)
	require.Equal(t, config.DefaultWSPollWait, config.Defaults(config.Lambda).WSPollWait)
	require.Equal(t, config.DefaultWSSessionTTL, config.Defaults(config.Lambda).WSSessionTTL)
}

// TestValidateNamesTheField: a value out of range is refused with the
// field, its variable and the accepted range; a zero Config, which has
// none of the defaults, names every field that needs one.
func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	c := config.Defaults(config.Local)
	c.SSEKeepAlive = 0
	c.DeliveryLimit = -1
	err := c.Validate()
	require.ErrorContains(t, err, "SSEKeepAlive (HERALD_SSE_KEEPALIVE): 0s is not a positive Go duration (the variable's range is 1s–5m)")
	require.ErrorContains(t, err, "DeliveryLimit (HERALD_DELIVERY_LIMIT): -1 is negative (the variable's range is 1–1000)")

	// Code may go past the environment's operational ranges (tests).
	c = config.Defaults(config.Local)
	c.SSEKeepAlive, c.ReapInterval, c.SSEAckDelay = 20*time.Millisecond, 20*time.Millisecond, time.Hour
	require.NoError(t, c.Validate())

	// 0 is a value, not "unset": where the table allows it, it stands.
	c = config.Defaults(config.CloudRun)
	c.SSEAckDelay, c.HTTP2PingInterval, c.MaxInflightBytes, c.MaxConcurrentPublishes = 0, 0, 0, 0
	require.NoError(t, c.Validate())
	c.HTTP2PingInterval = -time.Second
	require.ErrorContains(t, c.Validate(), "HTTP2PingInterval (HERALD_HTTP2_PING_INTERVAL): -1s is negative (the variable's range is 0s, or 1s–10m)")

	err = config.Config{Profile: config.Local}.Validate()
	for _, field := range []string{"PublishTimeout", "MaxLeaseBytes", "ReconnectGrace", "QueueIdleWindow",
		"ClaimRetention", "DeliveryLimit", "SSEKeepAlive", "WSPingInterval", "ReapInterval"} {
		require.ErrorContains(t, err, field+" (", "a zero Config lacks %s", field)
	}
	require.ErrorContains(t, err, "start from config.Defaults(local)")
	require.ErrorContains(t, config.Config{Profile: config.Lambda}.Validate(), `Function (HERALD_FUNCTION): unknown function ""`)
}

// TestEveryFieldHasARow holds Config to the table: each field is where
// some row lands (but those Load fills by hand: the profile, tokens,
// identity provider, console sign-in, CORS origins and webhook allow-list), and each row's Field is a field.
func TestEveryFieldHasARow(t *testing.T) {
	t.Parallel()
	byHand := map[string]bool{"Profile": true, "Tokens": true, "JWT": true, "ConsoleOIDC": true, "CORSOrigins": true, "WebhookAllow": true}
	landed := map[string]bool{}
	typ := reflect.TypeFor[config.Config]()
	for _, v := range config.Vars() {
		if v.Field == "" {
			require.Empty(t, v.Range, v.Name)
			continue
		}
		_, ok := typ.FieldByName(v.Field)
		require.True(t, ok, "%s lands in Config.%s, which does not exist", v.Name, v.Field)
		landed[v.Field] = true
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		require.True(t, landed[f.Name] || byHand[f.Name], "Config.%s has no row in the table", f.Name)
	}
}

// TestMeaningStatesTheRange: the one-line meaning of a row with a range
// ends with the range Load enforces, so the two cannot drift.
func TestMeaningStatesTheRange(t *testing.T) {
	t.Parallel()
	n := 0
	for _, v := range config.Vars() {
		if v.Range == "" {
			continue
		}
		n++
		require.Contains(t, v.Meaning, "("+v.Range, "%s: the meaning states the range %s", v.Name, v.Range)
	}
	require.GreaterOrEqual(t, n, 15)
}

// TestDocsStateTheDefaults: docs/configuration.md's default column shows
// each default of the table, and no default where the table has none.
func TestDocsStateTheDefaults(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	column := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\| ([^|]*) \\|").FindAllStringSubmatch(string(b), -1) {
		column[m[1]] = m[2]
	}
	for _, v := range config.Vars() {
		col, ok := column[v.Name]
		require.True(t, ok, v.Name)
		if v.LocalDefault == "" && v.CloudDefault == "" {
			require.NotContains(t, col, "`", "%s has no default", v.Name)
		}
		for _, d := range []string{v.LocalDefault, v.CloudDefault} {
			if d != "" {
				require.Contains(t, col, "`"+d+"`", "%s: docs/configuration.md states the default %s", v.Name, d)
			}
		}
	}
}

// TestFormatDuration: the table's durations read as people write them.
func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 100 * time.Millisecond: "100ms", time.Second: "1s", 90 * time.Second: "1m30s",
		10 * time.Minute: "10m", 24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 8760 * time.Hour: "8760h",
	} {
		require.Equal(t, want, config.FormatDuration(d), d.String())
	}
}

// TestFunctions: HERALD_FUNCTION's names, and which routes each serves.
func TestFunctions(t *testing.T) {
	t.Parallel()
	for _, f := range append(config.Functions(), config.All) {
		got, err := config.ParseFunction(string(f))
		require.NoError(t, err)
		require.Equal(t, f, got)
		require.True(t, config.All.Serves(f))
		require.True(t, f.Serves(config.All), "every function serves the health routes (All)")
	}
	_, err := config.ParseFunction("publsh")
	require.ErrorContains(t, err, `unknown function "publsh" (known: publish, pull, acknowledge, destinations, jobs, websocket, all)`)
	require.False(t, config.Publish.Serves(config.Pull))
	require.False(t, config.Acknowledge.UsesBroker())
	require.True(t, config.Publish.UsesStore(), "the claim-check")
}
