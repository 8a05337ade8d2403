package stream_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/stream"
)

// TestAccessTokenFromQuery checks that the access_token parameter becomes
// the Authorization header, is removed from what the next handler (and
// any log) sees, and loses to a header that is already there.
func TestAccessTokenFromQuery(t *testing.T) {
	t.Parallel()
	var got *http.Request
	h := stream.AccessTokenFromQuery(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r }))

	cases := []struct {
		name, target, header, wantAuth, wantQuery string
	}{
		{"moved to the header", "/s?access_token=s3cr3t&filter_groups=x", "", "Bearer s3cr3t", "filter_groups=x"},
		{"the header wins", "/s?access_token=s3cr3t", "Bearer other", "Bearer other", ""},
		{"empty is ignored", "/s?access_token=&a=1", "", "", "a=1"},
		{"absent changes nothing", "/s?a=1", "", "", "a=1"},
	}
	for _, tc := range cases {
		req := httptest.NewRequest("GET", tc.target, nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		require.Equal(t, tc.wantAuth, got.Header.Get("Authorization"), tc.name)
		require.Equal(t, tc.wantQuery, got.URL.RawQuery, tc.name)
		require.NotContains(t, got.RequestURI, "s3cr3t", tc.name)
		require.NotContains(t, got.URL.String(), "s3cr3t", tc.name)
		if tc.header == "" {
			require.Empty(t, req.Header.Get("Authorization"), "%s: the caller's request is not changed", tc.name)
		}
	}
}
