package nats

import (
	"strings"

	natsgo "github.com/nats-io/nats.go"

	"github.com/heraldevents/herald/herr"
)

// NATS header values lose leading and trailing white space and cannot hold
// CR or LF, so values are escaped: '%', control bytes, space and DEL become
// %XX. Everything else (UTF-8 included) stays readable.
func escapeValue(v string) string {
	if !strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '%' || r == 0x7f }) {
		return v
	}
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c == '%' || c == 0x7f {
			const hexdigits = "0123456789ABCDEF"
			sb.WriteByte('%')
			sb.WriteByte(hexdigits[c>>4])
			sb.WriteByte(hexdigits[c&15])
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// unescapeValue reverses escapeValue; a stray '%' (a header not written by
// Herald) is kept as is.
func unescapeValue(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			hi, ok1 := unhex(v[i+1])
			lo, ok2 := unhex(v[i+2])
			if ok1 && ok2 {
				sb.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		sb.WriteByte(v[i])
	}
	return sb.String()
}

// reservedPrefix marks the headers NATS itself sets and reads.
const reservedPrefix = "nats-"

// checkKey refuses metadata keys that cannot be header names.
func checkKey(k string) error {
	if k == "" || strings.HasPrefix(strings.ToLower(k), reservedPrefix) {
		return herr.New(herr.InvalidArgument, "metadata key %q is empty or reserved by NATS", k)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return herr.New(herr.InvalidArgument, "metadata key %q must be printable ASCII without ':' or spaces", k)
		}
	}
	return nil
}

// headersOf writes metadata as headers, one per key (case kept).
func headersOf(md map[string]string) (natsgo.Header, error) {
	h := make(natsgo.Header, len(md))
	for k, v := range md {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		h[k] = []string{escapeValue(v)}
	}
	return h, nil
}

// metadataOf reads Herald's headers back, skipping NATS's own.
func metadataOf(h natsgo.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	md := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) == 0 || strings.HasPrefix(strings.ToLower(k), reservedPrefix) {
			continue
		}
		md[k] = unescapeValue(vs[0])
	}
	if len(md) == 0 {
		return nil
	}
	return md
}
