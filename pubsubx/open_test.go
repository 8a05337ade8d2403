package pubsubx_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
	"github.com/heraldevents/herald/pubsubx/mem" // registers mem://
)

// recordScheme is a scheme whose opener records the URL it was given, to
// check what Open passes to drivers. Registered once per test binary.
const recordScheme = "opentest"

var (
	registerOnce sync.Once
	recordMu     sync.Mutex
	recorded     *url.URL
)

func registerRecorder() {
	registerOnce.Do(func() {
		pubsubx.Register(recordScheme, func(_ context.Context, u *url.URL) (driver.Broker, error) {
			if err := pubsubx.CheckQuery(u, "known", "other"); err != nil {
				return nil, err
			}
			recordMu.Lock()
			recorded = u
			recordMu.Unlock()
			return nil, herr.New(herr.Unimplemented, "recorder opens nothing")
		})
	})
}

func requireInvalid(t *testing.T, err error, names ...string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, herr.InvalidArgument.String(), herr.CodeOf(err).String(), "error: %v", err)
	for _, n := range names {
		require.Contains(t, herr.MessageOf(err), n, "the caller-safe message should name %q", n)
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	_, err := pubsubx.Open(t.Context(), "nosuchbroker://topic")
	requireInvalid(t, err, `"nosuchbroker"`, "mem") // names it and lists the known ones
}

func TestOpenNoScheme(t *testing.T) {
	_, err := pubsubx.Open(t.Context(), "just-a-name")
	requireInvalid(t, err)
}

func TestOpenMalformedURL(t *testing.T) {
	_, err := pubsubx.Open(t.Context(), "mem://%zz")
	requireInvalid(t, err)
}

func TestOpenUnknownQueryParameter(t *testing.T) {
	registerRecorder()
	_, err := pubsubx.Open(t.Context(), "mem://opentest?ackdeadline=1s&bogus=1")
	requireInvalid(t, err, `"bogus"`)
	_, err = pubsubx.Open(t.Context(), recordScheme+"://x?known=1&zeta=2&alpha=3")
	requireInvalid(t, err, `"alpha"`) // the first unknown one, in sorted order
}

func TestOpenPassesTheURL(t *testing.T) {
	registerRecorder()
	_, err := pubsubx.Open(t.Context(), recordScheme+"://host/path?known=1&other=two")
	require.Equal(t, herr.Unimplemented, herr.CodeOf(err), "the opener's own error comes back unchanged: %v", err)
	recordMu.Lock()
	u := recorded
	recordMu.Unlock()
	require.NotNil(t, u)
	require.Equal(t, "host", u.Host)
	require.Equal(t, "/path", u.Path)
	require.Equal(t, "two", u.Query().Get("other"))
}

func TestOpenMem(t *testing.T) {
	b, err := pubsubx.Open(t.Context(), "mem://opentest-mem?ackdeadline=5s")
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

func TestSchemes(t *testing.T) {
	registerRecorder()
	s := pubsubx.Schemes()
	require.Contains(t, s, "mem")
	require.Contains(t, s, recordScheme)
	require.IsNonDecreasing(t, s, "Schemes is sorted")
}

func TestRegisterTwicePanics(t *testing.T) {
	require.Panics(t, func() {
		pubsubx.Register("mem", func(context.Context, *url.URL) (driver.Broker, error) { return nil, nil })
	})
}

func TestLeaveOut(t *testing.T) {
	why := herr.New(herr.InvalidArgument, "left out on purpose")
	pubsubx.LeaveOut("leftouttest", why)
	_, err := pubsubx.Open(t.Context(), "leftouttest://topic")
	require.ErrorIs(t, err, why, "Open says why, not just \"not supported\"")
	require.NotContains(t, pubsubx.Schemes(), "leftouttest")
	require.Panics(t, func() {
		pubsubx.Register("leftouttest", func(context.Context, *url.URL) (driver.Broker, error) { return nil, nil })
	}, "a scheme is left out or registered, not both")
	require.Panics(t, func() { pubsubx.LeaveOut("mem", why) })
}

func TestCheckQuery(t *testing.T) {
	u, err := url.Parse("x://h?a=1&b=2")
	require.NoError(t, err)
	require.NoError(t, pubsubx.CheckQuery(u, "a", "b", "c"))
	requireInvalid(t, pubsubx.CheckQuery(u, "a"), `"b"`)
	requireInvalid(t, pubsubx.CheckQuery(u), `"a"`)
}

// TestClaimReference: a reference keeps the event's attributes, carries
// the claim id in AttrClaim and a small body naming it, and NeedsClaim
// follows the driver's stated limit (0: no limit).
func TestClaimReference(t *testing.T) {
	m := &pubsubx.Message{Body: []byte(`{"big":true}`), Metadata: map[string]string{pubsubx.AttrEventType: "a.b"}}
	require.Empty(t, pubsubx.ClaimOf(m))
	pubsubx.MakeReference(m, "ev-1")
	require.Equal(t, "ev-1", pubsubx.ClaimOf(m))
	require.JSONEq(t, `{"herald_claim":"ev-1"}`, string(m.Body))
	require.Equal(t, "a.b", m.EventType())

	b := mem.New(time.Minute)
	defer b.Close()
	require.False(t, b.NeedsClaim(make([]byte, 10<<20)), "no limit, no claim")
}
