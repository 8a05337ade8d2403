// Package whsign signs webhook deliveries as the Standard Webhooks
// specification (https://www.standardwebhooks.com, "Signature scheme")
// asks, so that a receiver verifies them with any Standard Webhooks
// library:
//
//   - webhook-id: the delivery's id, the same on every retry of it, which
//     receivers use to drop duplicates;
//   - webhook-timestamp: the attempt's time in Unix seconds;
//   - webhook-signature: a space-separated list of "v1,<base64>", each the
//     HMAC-SHA256, under one signing secret, of "<id>.<timestamp>.<body>".
//     During a secret rotation the list holds one signature per secret.
//
// A signing secret is 24 to 64 random bytes (the specification's range),
// presented as "whsec_" and the bytes in standard base64. NewSecret makes
// 32. A Secret never prints its bytes: its String, GoString, LogValue and
// MarshalText show "whsec_…" only, so that a secret put in a log line or
// an error by mistake stays secret; Reveal is the one way out.
package whsign

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks specification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Prefix starts every serialized signing secret.
const Prefix = "whsec_"

// Secret lengths in bytes, from the specification: "Random. Between 24
// bytes (192 bits) and 64 bytes (512 bits)".
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
	// NewSecretBytes is the length NewSecret draws.
	NewSecretBytes = 32
)

// redacted is what a Secret shows in place of its bytes.
const redacted = Prefix + "…"

// ErrSecret is wrapped by every error of ParseSecret. Its messages never
// quote the text they were given.
var ErrSecret = errors.New("not a signing secret")

// Secret is a signing secret. The zero Secret signs nothing (Sign
// panics); make one with NewSecret or ParseSecret.
type Secret struct {
	key []byte
}

// NewSecret draws a secret of NewSecretBytes from crypto/rand.
func NewSecret() Secret {
	key := make([]byte, NewSecretBytes)
	// crypto/rand.Read never fails (Go 1.24 and later crash the program
	// instead of returning an error from the system's generator).
	_, _ = rand.Read(key)
	return Secret{key: key}
}

// ParseSecret reads a serialized secret: "whsec_" and the base64 of 24 to
// 64 bytes. The prefix is required, so that a value of another kind
// pasted by mistake is refused rather than used. Errors wrap ErrSecret
// and never quote s.
func ParseSecret(s string) (Secret, error) {
	b64, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: it must start with %q", ErrSecret, Prefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: the text after %q is not standard base64", ErrSecret, Prefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: it holds %d bytes; a secret holds %d to %d", ErrSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

// Reveal returns the serialized secret, "whsec_" and base64: the form a
// receiver configures, shown to the user once when it is made and stored
// by Herald to sign with.
func (s Secret) Reveal() string {
	return Prefix + base64.StdEncoding.EncodeToString(s.key)
}

// IsZero reports whether s holds no key.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// Equal reports whether s and o hold the same key, in constant time.
func (s Secret) Equal(o Secret) bool { return hmac.Equal(s.key, o.key) }

// String implements fmt.Stringer without the key.
func (s Secret) String() string { return redacted }

// GoString implements fmt.GoStringer (%#v) without the key.
func (s Secret) GoString() string { return "whsign.Secret{" + redacted + "}" }

// LogValue implements slog.LogValuer without the key.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText implements encoding.TextMarshaler without the key, so that
// JSON and other text encodings of a struct holding a Secret do not leak
// it either. Store the secret with Reveal.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Sign returns the "v1,<base64>" signature of one delivery: the
// HMAC-SHA256 under s of id, ".", the timestamp in Unix seconds, ".", and
// body. It panics on the zero Secret, a programming error.
func (s Secret) Sign(id string, ts time.Time, body []byte) string {
	if len(s.key) == 0 {
		panic("whsign: Sign with the zero Secret")
	}
	mac := hmac.New(sha256.New, s.key)
	var num [20]byte
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(num[:0], ts.Unix(), 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	var sum [sha256.Size]byte
	out := make([]byte, 0, 3+base64.StdEncoding.EncodedLen(len(sum)))
	out = append(out, "v1,"...)
	out = base64.StdEncoding.AppendEncode(out, mac.Sum(sum[:0]))
	return string(out)
}

// Set sets the three headers of one delivery attempt on h: webhook-id
// id, webhook-timestamp ts in Unix seconds, and webhook-signature with one
// signature per secret, in the order given (the current secret first;
// during a rotation, the one being retired after it). It panics when
// secrets is empty or holds the zero Secret.
func Set(h http.Header, id string, ts time.Time, body []byte, secrets ...Secret) {
	if len(secrets) == 0 {
		panic("whsign: Set without a secret")
	}
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = s.Sign(id, ts, body)
	}
	// Set by their canonical keys, which net/http writes as given; the
	// specification's names are lowercase and header names are
	// case-insensitive.
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}
