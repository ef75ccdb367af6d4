package chat_test

import (
	"net/netip"
	"testing"

	"github.com/prchat/prchat/chat"
)

func TestCloneEndpointOf(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]chat.CloneEndpoint{
		"https://github.com/acme/x.git":        {Scheme: "https", Host: "github.com", Port: "443"},
		"https://git.example:8443/x.git":       {Scheme: "https", Host: "git.example", Port: "8443"},
		"http://127.0.0.1:9/x":                 {Scheme: "http", Host: "127.0.0.1", Port: "9"},
		"ssh://git@[fd00::1]:2222/x.git":       {Scheme: "ssh", Host: "fd00::1", Port: "2222"},
		"git+ssh://git@host/x":                 {Scheme: "ssh", Host: "host", Port: "22"},
		"git://host/x":                         {Scheme: "git", Host: "host", Port: "9418"},
		"git@github.com:acme/x.git":            {Scheme: "ssh", Host: "github.com", Port: "22"},
		"github.com:acme/x.git":                {Scheme: "ssh", Host: "github.com", Port: "22"},
		"a@b@169.254.169.254:x.git":            {Scheme: "ssh", Host: "169.254.169.254", Port: "22"},
		"https://user:pw@169.254.169.254/meta": {Scheme: "https", Host: "169.254.169.254", Port: "443"},
	} {
		got, ok := chat.CloneEndpointOf(raw)
		if !ok || got != want {
			t.Errorf("CloneEndpointOf(%q) = %+v, %v; want %+v", raw, got, ok, want)
		}
	}
	for _, raw := range []string{"file:///srv/x.git", "/srv/x.git", "./x", "ext::sh -c x", "C:/x"} {
		if got, ok := chat.CloneEndpointOf(raw); ok && raw != "C:/x" {
			t.Errorf("CloneEndpointOf(%q) = %+v, want none", raw, got)
		}
	}
}

func TestPrivateAddr(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "127.255.0.9", "::1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.0.1",
		"169.254.169.254", "fe80::1", "fd00:ec2::254", "fc00::1", "0.0.0.0", "::", "0.1.2.3", "100.64.0.1", "224.0.0.1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "255.255.255.255"} {
		if !chat.PrivateAddr(netip.MustParseAddr(a)) {
			t.Errorf("PrivateAddr(%s) = false", a)
		}
	}
	for _, a := range []string{"140.82.112.3", "8.8.8.8", "172.32.0.1", "2606:50c0:8000::153", "64:ff9b::808:808", "::ffff:8.8.8.8"} {
		if chat.PrivateAddr(netip.MustParseAddr(a)) {
			t.Errorf("PrivateAddr(%s) = true", a)
		}
	}
}
