package chat

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Private clone hosts (DESIGN §6 "Access"). A clone URL makes prchat's git
// connect wherever its host resolves: to this host's loopback services or a
// cloud's metadata address (169.254.169.254), a blind request forgery for
// whoever may register repositories. CheckCloneHost refuses hosts that
// resolve to such addresses; registration calls it for early feedback, and
// the code that runs git calls it again right before each clone or fetch
// and pins git to the addresses it checked (agentsession), so a name that
// resolves elsewhere the second time (DNS rebinding) gains nothing.

// Resolver looks up the addresses of a host. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CloneEndpoint is where a clone URL connects: its transport ("https",
// "http", "ssh", "git"), host and port. A URL of no network transport (a
// local path, file://) has none.
type CloneEndpoint struct {
	Scheme, Host, Port string
}

// CloneEndpointOf returns the endpoint of a clone URL, and false for one
// that names no host (a local path, file://, a transport::address).
func CloneEndpointOf(raw string) (CloneEndpoint, bool) {
	if strings.Contains(raw, "::") && !strings.Contains(raw, "://") {
		return CloneEndpoint{}, false
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return CloneEndpoint{}, false
		}
		scheme := strings.ToLower(u.Scheme)
		switch scheme {
		case "git+ssh", "ssh+git":
			scheme = "ssh"
		case "https", "http", "ssh", "git":
		default:
			return CloneEndpoint{}, false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80", "ssh": "22", "git": "9418"}[scheme]
		}
		return CloneEndpoint{Scheme: scheme, Host: u.Hostname(), Port: port}, true
	}
	// scp-like [user@]host:path; a slash before the first colon is a path.
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || strings.ContainsAny(raw[:colon], `/\`) {
		return CloneEndpoint{}, false
	}
	host := raw[:colon]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	host = strings.Trim(host, "[]")
	if host == "" {
		return CloneEndpoint{}, false
	}
	return CloneEndpoint{Scheme: "ssh", Host: host, Port: "22"}, true
}

// nonPublic are ranges netip's predicates do not cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT, often a cloud's internal network
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// nat64 embeds an IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// PrivateAddr reports whether a is not a public unicast address: loopback,
// link-local (169.254.0.0/16, fe80::/10: cloud metadata), private
// (10/8, 172.16/12, 192.168/16, fc00::/7), unspecified, multicast and the
// other special ranges; an IPv4 address mapped into IPv6 or NAT64 counts as
// the IPv4 address.
func PrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	if !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || a.IsPrivate() || a.IsUnspecified() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ErrUnresolved wraps the failure to look up a clone URL's host.
type ErrUnresolved struct {
	Host string
	Err  error
}

func (e *ErrUnresolved) Error() string { return fmt.Sprintf("look up %s: %v", e.Host, e.Err) }
func (e *ErrUnresolved) Unwrap() error { return e.Err }

// CheckCloneHost resolves the host of a clone URL (an address is taken as
// it is) and returns its addresses; if any of them is private (PrivateAddr)
// it returns an *Error with CodeInvalid naming the host. A URL without a
// host returns no addresses and no error; a host that cannot be looked up
// returns an *ErrUnresolved.
func CheckCloneHost(ctx context.Context, r Resolver, raw string) (CloneEndpoint, []netip.Addr, error) {
	ep, ok := CloneEndpointOf(raw)
	if !ok {
		return ep, nil, nil
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(ep.Host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if r == nil {
			r = net.DefaultResolver
		}
		found, err := r.LookupNetIP(ctx, "ip", ep.Host)
		if err != nil || len(found) == 0 {
			return ep, nil, &ErrUnresolved{Host: ep.Host, Err: err}
		}
		addrs = found
	}
	for _, a := range addrs {
		if PrivateAddr(a) {
			return ep, nil, Errorf(CodeInvalid, "clone_url host %s resolves to %s, a loopback, link-local or private address (an internal git server needs PRCHAT_CLONE_ALLOW_PRIVATE=1 on the server)", ep.Host, a.Unmap())
		}
	}
	return ep, addrs, nil
}
