package apigwmgmt_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
)

type seen struct {
	method, rawPath, path, auth, date, token, sha string
	body                                          string
}

func server(t *testing.T, status int) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{
			method: r.Method, rawPath: r.URL.EscapedPath(), path: r.URL.Path,
			auth: r.Header.Get("Authorization"), date: r.Header.Get("X-Amz-Date"),
			token: r.Header.Get("X-Amz-Security-Token"), sha: r.Header.Get("X-Amz-Content-Sha256"),
			body: string(b),
		})
		mu.Unlock()
		switch {
		case status == http.StatusGone:
			w.Header().Set("X-Amzn-Errortype", "GoneException:http://internal.amazon.com/coral/")
			w.WriteHeader(status)
		case status != http.StatusOK:
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"message":"Forbidden"}`))
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"connectedAt":"2024-10-16T14:30:00Z","lastActiveAt":"2024-10-16T14:31:00Z","identity":{"sourceIp":"192.0.2.7","userAgent":"ua"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

func client(url string) *apigwmgmt.Client {
	return &apigwmgmt.Client{
		Endpoint: url + "/prod", Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", "session-token-example"),
		Now:         func() time.Time { return time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC) },
	}
}

// TestSignedCalls: every call is SigV4-signed for execute-api in the
// client's region, the id is escaped in the path, and the body is sent
// as is.
func TestSignedCalls(t *testing.T) {
	t.Parallel()
	srv, got := server(t, http.StatusOK)
	c := client(srv.URL)
	ctx := t.Context()
	require.NoError(t, c.PostToConnection(ctx, "L0SM9cOFvHcCIhw=", []byte(`{"type":"pong"}`)))
	info, err := c.GetConnection(ctx, "L0SM9cOFvHcCIhw=")
	require.NoError(t, err)
	require.Equal(t, "192.0.2.7", info.Identity.SourceIP)
	require.Equal(t, 2024, info.ConnectedAt.Year())
	require.NoError(t, c.DeleteConnection(ctx, "L0SM9cOFvHcCIhw="))

	calls := got()
	require.Len(t, calls, 3)
	for i, method := range []string{"POST", "GET", "DELETE"} {
		s := calls[i]
		require.Equal(t, method, s.method)
		require.Equal(t, "/prod/@connections/L0SM9cOFvHcCIhw%3D", s.rawPath, "the id's '=' is escaped")
		require.Equal(t, "/prod/@connections/L0SM9cOFvHcCIhw=", s.path)
		require.True(t, strings.HasPrefix(s.auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20241016/eu-west-1/execute-api/aws4_request, SignedHeaders="), s.auth)
		require.Contains(t, s.auth, "Signature=")
		require.NotContains(t, s.auth, "secret-key-example")
		require.Equal(t, "20241016T143000Z", s.date)
		require.Equal(t, "session-token-example", s.token)
	}
	require.Equal(t, `{"type":"pong"}`, calls[0].body)
	require.Empty(t, calls[2].body)
	require.NotEqual(t, calls[0].auth, calls[2].auth, "the signature covers method and body")
}

// TestGoneAndOtherErrors: 410 is ErrGone (herr.NotFound); 403 is
// PermissionDenied; 5xx Unavailable, with the status in an APIError.
func TestGoneAndOtherErrors(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, http.StatusGone)
	err := client(srv.URL).PostToConnection(t.Context(), "abc=", []byte("x"))
	require.ErrorIs(t, err, apigwmgmt.ErrGone)
	require.Equal(t, herr.NotFound, herr.CodeOf(err))

	srv, _ = server(t, http.StatusForbidden)
	err = client(srv.URL).DeleteConnection(t.Context(), "abc=")
	var apiErr *apigwmgmt.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.Status)
	require.Equal(t, "Forbidden", apiErr.Type)
	require.Equal(t, herr.PermissionDenied, herr.CodeOf(err))
	require.False(t, errors.Is(err, apigwmgmt.ErrGone))

	srv, _ = server(t, http.StatusInternalServerError)
	err = client(srv.URL).PostToConnection(t.Context(), "abc=", []byte("x"))
	require.Equal(t, herr.Unavailable, herr.CodeOf(err))

	// Too big: refused before any call.
	srv, got := server(t, http.StatusOK)
	err = client(srv.URL).PostToConnection(t.Context(), "abc=", make([]byte, apigwmgmt.MaxMessageBytes+1))
	require.Equal(t, herr.InvalidArgument, herr.CodeOf(err))
	require.Empty(t, got())
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	ep, err := apigwmgmt.Endpoint("abc123.execute-api.us-east-1.amazonaws.com", "prod", none)
	require.NoError(t, err)
	require.Equal(t, "https://abc123.execute-api.us-east-1.amazonaws.com/prod", ep)
	require.Equal(t, "us-east-1", apigwmgmt.RegionOf("abc123.execute-api.us-east-1.amazonaws.com"))
	require.Empty(t, apigwmgmt.RegionOf("ws.example.com"))

	override := func(k string) (string, bool) {
		if k == apigwmgmt.EnvEndpoint {
			return "http://127.0.0.1:9000/local/", true
		}
		return "", false
	}
	ep, err = apigwmgmt.Endpoint("abc123.execute-api.us-east-1.amazonaws.com", "prod", override)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9000/local", ep, "the override is the whole base endpoint")

	_, err = apigwmgmt.Endpoint("", "prod", none)
	require.Equal(t, herr.FailedPrecondition, herr.CodeOf(err))

	f := &apigwmgmt.Factory{Region: "eu-central-1", Lookup: none}
	a, err := f.For("abc123.execute-api.us-west-2.amazonaws.com", "prod")
	require.NoError(t, err)
	require.Equal(t, "us-west-2", a.Region)
	b, err := f.For("abc123.execute-api.us-west-2.amazonaws.com", "prod")
	require.NoError(t, err)
	require.Same(t, a, b, "one client per endpoint")
	c, err := f.For("ws.example.com", "prod")
	require.NoError(t, err)
	require.Equal(t, "eu-central-1", c.Region)
}
