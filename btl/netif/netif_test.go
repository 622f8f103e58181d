package netif_test

import (
	"errors"
	"net"
	"testing"

	"github.com/gobtl/gobtl/btl/netif"
)

func cidr(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// host is a machine with loopback, a down interface, a management
// network, a veth into another "host" and an IPv6-only link.
var host = []netif.Iface{
	{Name: "lo", Up: true, Loopback: true, Addrs: []*net.IPNet{cidr("127.0.0.1/8"), cidr("::1/128")}},
	{Name: "eth1", Up: false, Addrs: []*net.IPNet{cidr("172.16.0.5/16")}},
	{Name: "eth0", Up: true, Addrs: []*net.IPNet{cidr("fe80::1/64"), cidr("192.168.1.10/24")}},
	{Name: "veth0", Up: true, Addrs: []*net.IPNet{cidr("10.0.0.1/24")}},
	{Name: "ib0", Up: true, Addrs: []*net.IPNet{cidr("fe80::2/64"), cidr("2001:db8::7/64")}},
}

func TestSelectPicksAnAddressTheOtherNodesCanReach(t *testing.T) {
	for _, tc := range []struct {
		name             string
		include, exclude string
		spans            bool
		ifs              []netif.Iface
		want             string
		err              error
	}{
		{"one node, nothing set: loopback", "", "", false, host, "127.0.0.1", nil},
		{"across nodes, nothing set: the first up, non-loopback interface", "", "", true, host, "192.168.1.10", nil},
		{"an interface by name", "veth0", "", true, host, "10.0.0.1", nil},
		{"a subnet", "10.0.0.0/8", "", true, host, "10.0.0.1", nil},
		{"the list's order is the preference", "veth0,eth0", "", true, host, "10.0.0.1", nil},
		{"an entry that matches nothing is skipped", "eth9,192.168.0.0/16", "", true, host, "192.168.1.10", nil},
		{"a down interface never serves", "eth1", "", true, host, "", netif.ErrNoAddress},
		{"IPv6 when that is all the interface has", "ib0", "", true, host, "2001:db8::7", nil},
		{"include on one node may name loopback", "lo", "", false, host, "127.0.0.1", nil},
		{"exclude skips interfaces and subnets", "", "eth0,10.0.0.0/24", true, host, "2001:db8::7", nil},
		{"exclude across nodes never falls back to loopback", "", "eth0,veth0,ib0", true, host, "", netif.ErrNoAddress},
		{"only loopback up across nodes", "", "", true, host[:2], "", netif.ErrNoAddress},
	} {
		ip, err := netif.Select(netif.Choice{Include: tc.include, Exclude: tc.exclude, Spans: tc.spans, Interfaces: tc.ifs})
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: Select = %v, %v; want %v", tc.name, ip, err, tc.err)
			}
		case err != nil || !ip.Equal(net.ParseIP(tc.want)):
			t.Errorf("%s: Select = %v, %v; want %s", tc.name, ip, err, tc.want)
		}
	}
}

func TestSelectRefusesLoopbackAcrossNodes(t *testing.T) {
	if ip, err := netif.Select(netif.Choice{Include: "lo", Spans: true, Interfaces: host}); err == nil {
		t.Errorf("if_include lo across nodes gave %v", ip)
	}
	if ip, err := netif.Check("127.0.0.1", true); err == nil {
		t.Errorf("address 127.0.0.1 across nodes gave %v", ip)
	}
	if ip, err := netif.Check("", true); err == nil {
		t.Errorf("no address across nodes gave %v", ip)
	}
	if ip, err := netif.Check("127.0.0.1", false); err != nil || !ip.IsLoopback() {
		t.Errorf("address 127.0.0.1 on one node: %v, %v", ip, err)
	}
	if ip, err := netif.Check("10.1.2.3", true); err != nil || !ip.Equal(net.ParseIP("10.1.2.3")) {
		t.Errorf("address 10.1.2.3 across nodes: %v, %v", ip, err)
	}
}

func TestBadListsAreRefused(t *testing.T) {
	for _, c := range []netif.Choice{
		{Include: "10.0.0.0/33", Spans: true},
		{Include: "10.0.0.1", Spans: true}, // an address, not a subnet
		{Include: " , ", Spans: true},
		{Include: "eth0", Exclude: "eth1"},
	} {
		c.Interfaces = host
		if ip, err := netif.Select(c); err == nil {
			t.Errorf("%+v gave %v", c, ip)
		}
	}
}

func TestResolveTakesIPsAndThisHostsInterfaces(t *testing.T) {
	ifs, err := netif.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Loopback && i.Up {
			ip, err := netif.Resolve(i.Name)
			if err != nil || !ip.IsLoopback() {
				t.Errorf("Resolve(%q) = %v, %v", i.Name, ip, err)
			}
		}
	}
	if ip, err := netif.Resolve("192.0.2.1"); err != nil || ip.String() != "192.0.2.1" {
		t.Errorf("Resolve of an IP: %v, %v", ip, err)
	}
	if _, err := netif.Resolve("no-such-interface.invalid"); err == nil {
		t.Error("an unknown name resolved")
	}
}
