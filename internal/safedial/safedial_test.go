package safedial_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/safedial"
)

// TestRefused: every range the package doc names is refused, with its
// kind; public addresses are not.
func TestRefused(t *testing.T) {
	t.Parallel()
	refused := map[string]string{
		"0.0.0.0": "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
		"127.0.0.1": "loopback", "127.255.0.9": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.0.0.1": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"fc00::1": "private", "fd00:ec2::254": "private", "::ffff:10.1.2.3": "private",
		"169.254.169.254": "cloud metadata", "169.254.0.1": "link-local", "fe80::1": "link-local",
		"100.64.0.1": "shared (RFC 6598)", "100.127.255.254": "shared (RFC 6598)",
		"192.0.0.192": "IETF protocol assignment", "198.18.0.1": "benchmarking", "198.19.255.1": "benchmarking",
		"240.0.0.1": "reserved", "255.255.255.255": "reserved",
		"224.0.0.1": "multicast", "ff02::1": "multicast", "ff05::1": "multicast",
		"64:ff9b::7f00:1": "NAT64 of a loopback", "64:ff9b::a9fe:a9fe": "NAT64 of a cloud metadata",
		"2002:c0a8:0101::1": "6to4 of a private",
	}
	for a, kind := range refused {
		require.Equal(t, kind, safedial.Refused(netip.MustParseAddr(a)), a)
		err := safedial.Policy{}.CheckAddr(netip.MustParseAddr(a))
		require.ErrorIs(t, err, safedial.ErrRefused, a)
		require.Contains(t, err.Error(), kind)
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "192.0.2.1", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:0808:0808::1", "::ffff:8.8.8.8"} {
		require.Empty(t, safedial.Refused(netip.MustParseAddr(a)), a)
		require.NoError(t, safedial.Policy{}.CheckAddr(netip.MustParseAddr(a)), a)
	}
}

// TestAllowList: prefixes, single addresses and host names parse;
// allowed prefixes open their addresses only; bad entries are named.
func TestAllowList(t *testing.T) {
	t.Parallel()
	p, err := safedial.ParseAllowList(" 127.0.0.1/32, ::1 ,10.1.0.0/16,Receiver.Internal., ,::ffff:192.168.0.0/120")
	require.NoError(t, err)
	require.Equal(t, []string{"receiver.internal"}, p.Hosts)
	for _, a := range []string{"127.0.0.1", "::1", "10.1.200.3", "::ffff:127.0.0.1", "192.168.0.7"} {
		require.NoError(t, p.CheckAddr(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"127.0.0.2", "10.2.0.1", "169.254.169.254", "192.168.1.7"} {
		require.ErrorIs(t, p.CheckAddr(netip.MustParseAddr(a)), safedial.ErrRefused, a)
	}
	for _, bad := range []string{"10.0.0.1/8", "10.0.0.0/33", "not a host", "a..b", "http://x"} {
		_, err := safedial.ParseAllowList("127.0.0.1/32," + bad)
		require.ErrorContains(t, err, bad)
	}
	empty, err := safedial.ParseAllowList("")
	require.NoError(t, err)
	require.Equal(t, safedial.Policy{}, empty)
}

// TestCheckURL: what is refused before any lookup, and the http opt-in.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	p, err := safedial.ParseAllowList("127.0.0.1/32,localhost")
	require.NoError(t, err)
	for _, ok := range []string{"https://example.com/hook", "https://example.com:8443/a?b=c", "https://8.8.8.8/", "https://[2606:4700::1]/x"} {
		_, err := safedial.Policy{}.CheckURL(ok)
		require.NoError(t, err, ok)
	}
	for _, ok := range []string{"http://127.0.0.1:9/x", "http://localhost:9/x", "https://127.0.0.1/"} {
		_, err := p.CheckURL(ok)
		require.NoError(t, err, ok)
	}
	for raw, want := range map[string]string{
		"http://example.com/":               "https",
		"ftp://example.com/":                "scheme",
		"/relative":                         "absolute",
		"https://user:pw@example.com/":      "user information",
		"https://example.com/#frag":         "fragment",
		"https:///path":                     "no host",
		"https://127.0.0.2/":                "loopback",
		"https://[::1]/":                    "loopback",
		"https://169.254.169.254/latest":    "cloud metadata",
		"https://10.0.0.1/":                 "private",
		"https://[fe80::1%25eth0]/":         "",
		"https://exa_mple com/":             "",
		"http://127.0.0.2/":                 "https",
		"https://[::ffff:169.254.169.254]/": "cloud metadata",
	} {
		_, err := p.CheckURL(raw)
		require.ErrorIs(t, err, safedial.ErrRefused, raw)
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "pw@", raw)
	}
}

// counted is a receiver that counts its requests.
func counted(t *testing.T, tls bool, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	f := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(f)
	} else {
		srv = httptest.NewServer(f)
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

func trust(srv *httptest.Server) func(*http.Transport) {
	return func(tr *http.Transport) {
		tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		// httptest's certificate names 127.0.0.1, ::1 and example.com;
		// the test dials localhost too.
		tr.TLSClientConfig.ServerName = "example.com"
	}
}

// TestDialRefusesLoopback: a request to a loopback receiver, by address
// or by a name that resolves to loopback (which CheckURL passes: only the
// connect-time check sees the resolved address, which is what stops DNS
// rebinding), is refused and never reaches it; the allow-list opens it,
// by prefix or by name.
func TestDialRefusesLoopback(t *testing.T) {
	t.Parallel()
	srv, n := counted(t, true, nil)
	port := strings.TrimPrefix(srv.URL, "https://127.0.0.1:")
	for _, raw := range []string{srv.URL, "https://localhost:" + port} {
		c := safedial.Policy{}.Client(safedial.ClientOptions{Timeout: 10 * time.Second, Transport: trust(srv)})
		_, err := c.Get(raw)
		require.ErrorIs(t, err, safedial.ErrRefused, raw)
		require.ErrorContains(t, err, "loopback")
	}
	require.Zero(t, n.Load())

	for _, allow := range []string{"127.0.0.1/32", "localhost"} {
		p, err := safedial.ParseAllowList(allow)
		require.NoError(t, err)
		c := p.Client(safedial.ClientOptions{Timeout: 10 * time.Second, Transport: trust(srv)})
		raw := srv.URL
		if allow == "localhost" {
			raw = "https://localhost:" + port
		}
		res, err := c.Get(raw)
		require.NoError(t, err, allow)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
	require.EqualValues(t, 2, n.Load())
}

// TestNoRedirect: a 3xx is the answer; its Location is never requested,
// whether it points at a refused address or not.
func TestNoRedirect(t *testing.T) {
	t.Parallel()
	target, hit := counted(t, false, nil)
	srv, _ := counted(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/meta", http.StatusFound)
	})
	p, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(t, err)
	res, err := p.Client(safedial.ClientOptions{}).Get(srv.URL)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusFound, res.StatusCode)
	require.Zero(t, hit.Load())
}

// TestTimeout: a receiver that does not answer within the timeout fails
// the request; it does not hold the caller.
func TestTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, _ := counted(t, false, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	p, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(t, err)
	_, err = p.Client(safedial.ClientOptions{Timeout: 100 * time.Millisecond}).Get(srv.URL)
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
