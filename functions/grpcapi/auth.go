package grpcapi

import (
	"net/http"

	"connectrpc.com/connect"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
)

// errorWriter writes an error in the protocol of the request: a gRPC or
// gRPC-Web status, or a Connect JSON error.
var errorWriter = connect.NewErrorWriter()

// Authenticate wraps an RPC handler so that it runs only for calls with
// `authorization: Bearer <token>` metadata that a resolves, with the
// principal in the request context (auth.FromContext). Other calls are
// answered in the caller's protocol before the request body is read:
// UNAUTHENTICATED for a missing or refused token (with the refusal's
// description, "token expired"), UNAVAILABLE when the issuer's keys
// cannot be fetched; the answer never repeats the token. A handler's
// PERMISSION_DENIED is the RPC form of RFC 6750's insufficient_scope.
//
// It is net/http middleware rather than a connect.Interceptor because
// connect decodes a unary request's body before unary interceptors run,
// which would let an unauthenticated caller make the server read and
// decode a message of up to the read limit.
func Authenticate(a auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// gRPC has no 400 for a bad header: two values or a token that
		// is no token are UNAUTHENTICATED, with the REST rule's reason.
		token, err := httpx.BearerToken(r.Header.Values("Authorization"))
		if err != nil {
			msg := "authorization metadata \"Bearer <token>\" is required"
			if herr.CodeOf(err) == herr.Malformed {
				msg = herr.MessageOf(err)
			}
			reject(w, r, herr.New(herr.Unauthenticated, "%s", msg))
			return
		}
		p, err := a.Authenticate(r.Context(), token)
		if err != nil {
			reject(w, r, err)
			return
		}
		accesslog.SetPrincipal(r.Context(), p.ID)
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// reject answers err in the request's RPC protocol, or as a REST error for
// a request that speaks none (e.g. a browser's GET).
func reject(w http.ResponseWriter, r *http.Request, err error) {
	if !errorWriter.IsSupported(r) {
		httpx.WriteError(w, r, err)
		return
	}
	_ = errorWriter.Write(w, r, Error(r.Context(), accesslog.Route(r), err))
}
