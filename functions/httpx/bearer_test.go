package httpx_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
)

type answer struct{ err error }

func (a answer) Authenticate(context.Context, string) (*auth.Principal, error) {
	if a.err != nil {
		return nil, a.err
	}
	return &auth.Principal{ID: "p", Permissions: []string{auth.PermReadEvents}}, nil
}

// TestBearerChallenges holds the answers to RFC 6750, section 3.
func TestBearerChallenges(t *testing.T) {
	t.Parallel()
	needs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpx.Principal(r)
		httpx.WriteError(w, r, p.Require(auth.PermManageDestinations))
	})
	call := func(a auth.Authenticator, header string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/x", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		httpx.Authenticate(a, needs).ServeHTTP(rec, r)
		return rec
	}

	rec := call(answer{}, "")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, `Bearer realm="herald"`, rec.Header().Get("WWW-Authenticate"), "no error code without credentials")

	rec = call(answer{err: herr.New(herr.Unauthenticated, "token expired")}, "bearer eyJ.eyJ.sig")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, `Bearer realm="herald", error="invalid_token", error_description="token expired"`, rec.Header().Get("WWW-Authenticate"))
	require.Equal(t, "token expired", decodeError(t, rec).Message)

	rec = call(answer{err: herr.New(herr.Unavailable, "keys cannot be fetched")}, "Bearer eyJ.eyJ.sig")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Empty(t, rec.Header().Get("WWW-Authenticate"), "the token may be fine: no invalid_token")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))

	rec = call(answer{}, "Bearer eyJ.eyJ.sig")
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Equal(t, `Bearer realm="herald", error="insufficient_scope", error_description="permission 'manage:destinations' is required"`, rec.Header().Get("WWW-Authenticate"))

	// A 403 outside an authenticated request carries no challenge.
	rec = httptest.NewRecorder()
	httpx.WriteError(rec, httptest.NewRequest("GET", "/", nil), herr.New(herr.PermissionDenied, "no"))
	require.Empty(t, rec.Header().Get("WWW-Authenticate"))
}
