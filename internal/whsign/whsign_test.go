package whsign_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/whsign"
)

// The Standard Webhooks reference library's signing vector
// (libraries/go/webhook_test.go, TestWebhookSign): a 24-byte secret.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// TestSignVector: Sign gives the specification's expected signature.
func TestSignVector(t *testing.T) {
	t.Parallel()
	s, err := whsign.ParseSecret(vectorSecret)
	require.NoError(t, err)
	require.Equal(t, vectorSignature, s.Sign(vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody)))
	require.Equal(t, vectorSecret, s.Reveal())
}

// TestReferenceVerifies: the reference library verifies what Set signs,
// for fresh secrets and bodies of every kind, and refuses a body changed
// by one byte or signed under another secret.
func TestReferenceVerifies(t *testing.T) {
	t.Parallel()
	for _, body := range [][]byte{[]byte(`{}`), []byte(`[{"id":"a"},{"id":"b"}]`), bytes.Repeat([]byte{0xff, 0, '.'}, 1000), {}} {
		s := whsign.NewSecret()
		h := http.Header{}
		id := "0f6b9c9e-3f70-4a59-9d8e-8a1d6c0b2f10"
		whsign.Set(h, id, time.Now(), body, s)
		wh, err := standardwebhooks.NewWebhook(s.Reveal())
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h))
		require.Equal(t, id, h.Get("webhook-id"))

		other, err := standardwebhooks.NewWebhook(whsign.NewSecret().Reveal())
		require.NoError(t, err)
		require.ErrorIs(t, other.Verify(body, h), standardwebhooks.ErrNoMatchingSignature)
		changed := append(append([]byte{}, body...), ' ')
		require.ErrorIs(t, wh.Verify(changed, h), standardwebhooks.ErrNoMatchingSignature)
	}
}

// TestRotation: with two secrets the header holds two signatures, and a
// receiver holding either one verifies the delivery.
func TestRotation(t *testing.T) {
	t.Parallel()
	current, old := whsign.NewSecret(), whsign.NewSecret()
	body := []byte(`{"specversion":"1.0"}`)
	h := http.Header{}
	whsign.Set(h, "id-1", time.Now(), body, current, old)
	require.Len(t, strings.Split(h.Get("webhook-signature"), " "), 2)
	for _, s := range []whsign.Secret{current, old} {
		wh, err := standardwebhooks.NewWebhook(s.Reveal())
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h))
	}
}

// TestTimestamp: webhook-timestamp is the attempt's Unix seconds, and the
// signature covers it: the same delivery at another second signs
// differently.
func TestTimestamp(t *testing.T) {
	t.Parallel()
	s := whsign.NewSecret()
	at := time.Unix(1_700_000_000, 999_000_000)
	h := http.Header{}
	whsign.Set(h, "id", at, []byte("x"), s)
	require.Equal(t, "1700000000", h.Get("webhook-timestamp"))
	require.NotEqual(t, s.Sign("id", at, []byte("x")), s.Sign("id", at.Add(time.Second), []byte("x")))
	require.Equal(t, s.Sign("id", at, []byte("x")), s.Sign("id", at.Truncate(time.Second), []byte("x")))
}

// TestParseSecret: the prefix, standard base64 and the 24–64 byte range
// are required; errors wrap ErrSecret and never quote the input.
func TestParseSecret(t *testing.T) {
	t.Parallel()
	key := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)) }
	for _, ok := range []string{"whsec_" + key(24), "whsec_" + key(64), whsign.NewSecret().Reveal()} {
		_, err := whsign.ParseSecret(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{
		key(32),                  // no prefix
		"whsec_" + key(23),       // too short
		"whsec_" + key(65),       // too long
		"whsec_" + key(32) + "!", // not base64
		"whsec_" + strings.TrimRight(key(32), "="), // unpadded
		"WHSEC_" + key(32),
		"",
	} {
		_, err := whsign.ParseSecret(bad)
		require.ErrorIs(t, err, whsign.ErrSecret, bad)
		if len(bad) > 8 {
			require.NotContains(t, err.Error(), bad[6:14], "the error quotes the secret")
		}
	}
}

// TestSecretNeverPrints: every way a Secret is commonly printed, logged or
// encoded shows the prefix only.
func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := whsign.NewSecret()
	full := s.Reveal()
	b64 := strings.TrimPrefix(full, "whsec_")
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("m", "secret", s, "in", struct{ S whsign.Secret }{s})
	slog.New(slog.NewTextHandler(&logs, nil)).Info("m", "secret", s)
	js, err := json.Marshal(map[string]any{"s": s, "p": &s})
	require.NoError(t, err)
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q", s, s, s, s, s), fmt.Sprintf("%+v", struct{ S whsign.Secret }{s}),
		fmt.Errorf("wrapped: %v", s).Error(), logs.String(), string(js),
	} {
		require.NotContains(t, out, b64)
		require.Contains(t, out, "whsec_")
	}
}

// TestEqual compares keys.
func TestEqual(t *testing.T) {
	t.Parallel()
	a := whsign.NewSecret()
	b, err := whsign.ParseSecret(a.Reveal())
	require.NoError(t, err)
	require.True(t, a.Equal(b))
	require.False(t, a.Equal(whsign.NewSecret()))
	require.True(t, whsign.Secret{}.IsZero())
	require.False(t, a.IsZero())
	require.Panics(t, func() { whsign.Secret{}.Sign("id", time.Now(), nil) })
	require.Panics(t, func() { whsign.Set(http.Header{}, "id", time.Now(), nil) })
	require.True(t, errors.Is(fmt.Errorf("x: %w", whsign.ErrSecret), whsign.ErrSecret))
}
