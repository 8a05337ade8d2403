// Package safedial opens HTTP connections to addresses on the public
// internet only, so that a URL a user hands Herald (a webhook endpoint)
// cannot make Herald reach into its own network (server-side request
// forgery, SSRF).
//
// # What is refused
//
// An address is refused when it is, after unmapping an IPv4-mapped IPv6
// address: unspecified (0.0.0.0, ::), in 0.0.0.0/8, loopback
// (127.0.0.0/8, ::1), private (RFC 1918's 10/8, 172.16/12, 192.168/16;
// fc00::/7, which holds AWS's fd00:ec2::254), link-local (169.254.0.0/16,
// which holds the cloud metadata address 169.254.169.254; fe80::/10),
// shared address space (100.64.0.0/10, RFC 6598, carrier NAT and some
// clouds' internal ranges), IETF protocol assignments (192.0.0.0/24, which
// holds the Alibaba and Oracle metadata addresses), benchmarking
// (198.18.0.0/15), reserved (240.0.0.0/4), broadcast, multicast, or an
// IPv6 address that embeds a refused IPv4 address (NAT64 64:ff9b::/96,
// 6to4 2002::/16).
//
// # When
//
// The check runs on the address the connection is made to, after DNS
// resolution, for every connection attempt (net.Dialer.Control), so a name
// that resolves to a public address when a webhook is created and to a
// private one later (DNS rebinding) is refused then. CheckURL refuses what
// can be refused before any lookup (a wrong scheme, an IP literal in a
// refused range) so that a user learns of it when configuring the URL.
//
// The client never follows redirects (a 3xx is the answer), and uses no
// proxy from the environment (a proxy would resolve and connect on
// Herald's behalf, past the check).
//
// # Opting in
//
// Policy.Allow opens host names and CIDR prefixes: a name there is dialled
// without any address check, an address in a prefix there is allowed
// whatever its range. That is how a local deployment or a test reaches a
// receiver on 127.0.0.1. A URL must be https unless its host is allowed
// this way (by name, or as an IP literal in an allowed prefix).
package safedial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of this package: a URL or an
// address it will not connect to.
var ErrRefused = errors.New("refused by the webhook address policy")

// Policy decides which addresses may be dialled. The zero Policy allows
// public addresses only.
type Policy struct {
	// Hosts are host names dialled without any address check, lowercase
	// and without a trailing dot.
	Hosts []string
	// Prefixes are address ranges allowed whatever their kind.
	Prefixes []netip.Prefix
}

// ParseAllowList reads an allow-list: comma-separated entries, each a
// CIDR prefix ("127.0.0.1/32", "10.1.0.0/16", "::1/128"), a single
// address (taken as its /32 or /128), or a host name ("localhost",
// "receiver.internal"). Blank entries are ignored. An entry that is
// neither, or a prefix with host bits set, is an error naming it.
func ParseAllowList(s string) (Policy, error) {
	var p Policy
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") {
			pf, err := netip.ParsePrefix(e)
			if err != nil {
				return Policy{}, fmt.Errorf("allow-list entry %q is not a CIDR prefix: %v", e, err)
			}
			if pf.Masked() != pf {
				return Policy{}, fmt.Errorf("allow-list entry %q has bits set past its prefix length; did you mean %s?", e, pf.Masked())
			}
			p.Prefixes = append(p.Prefixes, netip.PrefixFrom(pf.Addr().Unmap(), unmappedBits(pf)))
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			p.Prefixes = append(p.Prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		h := normalHost(e)
		if !validHostName(h) {
			return Policy{}, fmt.Errorf("allow-list entry %q is neither a CIDR prefix, an address nor a host name", e)
		}
		p.Hosts = append(p.Hosts, h)
	}
	return p, nil
}

// unmappedBits is pf's length once its address is unmapped: an
// IPv4-mapped prefix ::ffff:a.b.c.d/n covers a.b.c.d/(n-96).
func unmappedBits(pf netip.Prefix) int {
	if pf.Addr().Is4In6() {
		return max(pf.Bits()-96, 0)
	}
	return pf.Bits()
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// hostAllowed reports whether h (a URL's host, without port) is opened
// by name.
func (p Policy) hostAllowed(h string) bool {
	h = normalHost(h)
	for _, a := range p.Hosts {
		if a == h {
			return true
		}
	}
	return false
}

// addrAllowed reports whether a lies in one of p's prefixes.
func (p Policy) addrAllowed(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p.Prefixes {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// CheckAddr returns nil when a may be dialled: an allowed prefix holds
// it, or it is a public address (see the package doc). Otherwise an error
// wrapping ErrRefused that names the address and its kind.
func (p Policy) CheckAddr(a netip.Addr) error {
	if p.addrAllowed(a) {
		return nil
	}
	if kind := Refused(a); kind != "" {
		return fmt.Errorf("%w: %s is a %s address", ErrRefused, a, kind)
	}
	return nil
}

// Ranges refused, beyond what netip.Addr's predicates name.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	shared      = netip.MustParsePrefix("100.64.0.0/10")
	ietf        = netip.MustParsePrefix("192.0.0.0/24")
	bench       = netip.MustParsePrefix("198.18.0.0/15")
	reserved    = netip.MustParsePrefix("240.0.0.0/4")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// Refused names the kind of a that the package refuses ("loopback",
// "private", "link-local", …), or "" for a public address. It ignores any
// allow-list.
func Refused(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		if a == netip.AddrFrom4([4]byte{169, 254, 169, 254}) {
			return "cloud metadata"
		}
		return "link-local"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case shared.Contains(a):
		return "shared (RFC 6598)"
	case ietf.Contains(a):
		return "IETF protocol assignment"
	case bench.Contains(a):
		return "benchmarking"
	case reserved.Contains(a):
		return "reserved" // 255.255.255.255 included
	case nat64.Contains(a):
		b := a.As16()
		if k := Refused(netip.AddrFrom4([4]byte(b[12:]))); k != "" {
			return "NAT64 of a " + k
		}
	case sixToFour.Contains(a):
		b := a.As16()
		if k := Refused(netip.AddrFrom4([4]byte(b[2:6]))); k != "" {
			return "6to4 of a " + k
		}
	}
	return ""
}

// CheckURL checks a webhook URL before any lookup: absolute, http or
// https, a host, no user information (credentials in a URL end up in
// logs), no fragment; https unless its host is allowed by name or is an
// IP literal in an allowed prefix; and, for an IP literal, CheckAddr. It
// returns the parsed URL. Errors wrap ErrRefused and quote the URL's
// scheme and host only.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return nil, fmt.Errorf("%w: not an absolute http(s) URL", ErrRefused)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%w: the scheme must be https, not %q", ErrRefused, u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: the URL may not hold user information", ErrRefused)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: the URL may not hold a fragment", ErrRefused)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: the URL has no host", ErrRefused)
	}
	a, literal := parseLiteral(host)
	allowed := p.hostAllowed(host) || (literal && p.addrAllowed(a))
	if u.Scheme != "https" && !allowed {
		return nil, fmt.Errorf("%w: the scheme must be https (http only for allow-listed hosts)", ErrRefused)
	}
	if literal {
		if err := p.CheckAddr(a); err != nil {
			return nil, err
		}
	} else if !validHostName(normalHost(host)) {
		return nil, fmt.Errorf("%w: %q is not a host name", ErrRefused, host)
	}
	return u, nil
}

// parseLiteral reads host as an IP address (with an IPv6 zone refused:
// a zone names a local interface).
func parseLiteral(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, err == nil
	}
	return a, true
}

// Dialer returns a DialContext for an http.Transport: a host name in
// p.Hosts is dialled as is; any other connection is checked, after DNS
// resolution, on the address it is about to connect to (CheckAddr), and
// refused with an error wrapping ErrRefused.
func (p Policy) Dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	open := &net.Dialer{Timeout: timeout}
	checked := &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot read the address %q", ErrRefused, address)
		}
		return p.CheckAddr(ap.Addr())
	}}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if p.hostAllowed(host) {
			return open.DialContext(ctx, network, addr)
		}
		return checked.DialContext(ctx, network, addr)
	}
}

// ClientOptions shape Client.
type ClientOptions struct {
	// Timeout bounds each request, from dial to the last byte of the
	// answer read (http.Client.Timeout). Default 15 s.
	Timeout time.Duration
	// Transport, when set, adjusts the transport before use (a test trusts
	// its own CA through TLSClientConfig); it must leave DialContext,
	// DialTLSContext and Proxy as they are, which hold the policy.
	Transport func(*http.Transport)
}

// Client returns an http.Client that dials through p.Dialer, uses no
// proxy, follows no redirect (a 3xx is returned as the answer) and times
// out after o.Timeout.
func (p Policy) Client(o ClientOptions) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.Dialer(o.Timeout),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: o.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	if o.Transport != nil {
		o.Transport(t)
	}
	return &http.Client{
		Transport: t,
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
