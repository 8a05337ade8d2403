package httpx

import (
	"net/http"

	"github.com/heraldevents/herald/auth"
)

// Answer is what an endpoint answers: a status and a body written as JSON
// (no body when Body is nil, as for 204).
type Answer struct {
	Status int
	Body   any
}

// Call is one endpoint's work for a request r made by p (already
// authenticated). It may set response headers on w (Location); it writes
// no body: Endpoint writes the Answer, or the error with WriteError.
type Call func(w http.ResponseWriter, r *http.Request, p *auth.Principal) (Answer, error)

// Endpoint returns the handler of c: the preamble and the ending every
// management endpoint shares. It resolves the caller (Principal: 401
// without one), runs c, and writes c's answer as JSON or its error as the
// coded error body.
func Endpoint(c Call) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := Principal(r)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		a, err := c(w, r, p)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if a.Body == nil {
			w.WriteHeader(a.Status)
			return
		}
		WriteJSON(w, a.Status, a.Body)
	}
}

// Decode reads r's JSON body of at most limit bytes into a new T, by the
// rules of DecodeJSON.
func Decode[T any](r *http.Request, limit int64) (T, error) {
	var v T
	err := DecodeJSON(r, limit, &v)
	return v, err
}
