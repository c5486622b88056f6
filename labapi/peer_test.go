package labapi

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestLoopbackOwner: the uid owning the caller's end of a loopback
// connection is found in /proc/net/tcp (IPv4) and /proc/net/tcp6 (IPv6),
// and a 4-tuple no socket has is not found.
func TestLoopbackOwner(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := "127.0.0.1:0"
		if network == "tcp6" {
			addr = "[::1]:0"
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v (no loopback of this family here)", network, err)
			continue
		}
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		client := netip.MustParseAddrPort(c.LocalAddr().String())
		server := netip.MustParseAddrPort(s.LocalAddr().String())
		if uid, err := loopbackOwner(client, server); err != nil || uid != os.Geteuid() {
			t.Errorf("%s: loopbackOwner = %d, %v; want %d", network, uid, err, os.Geteuid())
		}
		if _, err := loopbackOwner(netip.AddrPortFrom(client.Addr(), client.Port()+1), server); err == nil {
			t.Errorf("%s: a 4-tuple of no socket was found", network)
		}
		c.Close()
		s.Close()
		ln.Close()
	}
}

// TestParseProcAddr: the kernel's hex forms (as a little-endian machine
// prints them), IPv4, IPv6 and v4-mapped IPv6.
func TestParseProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"0000000000000000FFFF00000100007F:01BB": "127.0.0.1:443",
	} {
		got, err := parseProcAddr([]byte(in))
		if err != nil || got.String() != want {
			t.Errorf("parseProcAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007G:1F90", "0100:1F90", "0100007F:1FFFF"} {
		if _, err := parseProcAddr([]byte(bad)); err == nil {
			t.Errorf("parseProcAddr(%q) accepted", bad)
		}
	}
}
