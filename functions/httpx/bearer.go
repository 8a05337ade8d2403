package httpx

import (
	"net/http"
	"strings"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
)

// retryAfterKeys is the Retry-After (seconds) of a 503 whose issuer keys
// could not be fetched.
const retryAfterKeys = "5"

// challenge returns a WWW-Authenticate value for the Bearer scheme (RFC
// 6750, section 3): with code ("invalid_token", "insufficient_scope") and
// desc as error and error_description, or bare when code is "".
func challenge(code, desc string) string {
	v := `Bearer realm="herald"`
	if code == "" {
		return v
	}
	v += `, error="` + code + `"`
	if d := descriptionChars(desc); d != "" {
		v += `, error_description="` + d + `"`
	}
	return v
}

// descriptionChars keeps the characters RFC 6750 allows in
// error_description (%x20-21 / %x23-5B / %x5D-7E): a double quote becomes
// a single one, anything else outside the set is dropped.
func descriptionChars(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r == '\\' || r < 0x20 || r > 0x7e:
			return -1
		}
		return r
	}, s)
}

// insufficientScope sets the RFC 6750 challenge of a 403 on a request
// that carried a bearer token (a principal is in its context).
func insufficientScope(w http.ResponseWriter, r *http.Request, err error) {
	if _, perr := auth.FromContext(r.Context()); perr != nil {
		return
	}
	w.Header().Set("WWW-Authenticate", challenge("insufficient_scope", herr.MessageOf(err)))
}
