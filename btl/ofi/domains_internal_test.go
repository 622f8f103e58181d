//go:build ofi && cgo

package ofi

import (
	"strings"
	"testing"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
)

// if_include names domains by name or, for IP providers, by subnet (as
// btl_tcp_if_include): one stack names each host's interface on a
// network whatever it is called there.
func TestIfIncludeNamesADomainByNameOrBySubnet(t *testing.T) {
	tcp := func(dom, fab, af string) fabric.Info {
		return fabric.Info{Provider: "tcp;ofi_rxm", Domain: dom, Fabric: fab, AddrFormat: af}
	}
	here := []fabric.Info{
		tcp("lo", "127.0.0.0/8", "FI_SOCKADDR_IN"), tcp("eth0", "fe80::/64", "FI_SOCKADDR_IN6"),
		tcp("eth0", "192.0.2.0/24", "FI_SOCKADDR_IN"), tcp("veth1", "10.16.3.0/24", "FI_SOCKADDR_IN"),
	}
	for _, c := range []struct {
		want []string
		got  string // domains chosen, or "error: " and the error's text
	}{
		{[]string{"10.16.3.0/24"}, "veth1"},
		{[]string{"10.0.0.0/8"}, "veth1"},
		{[]string{"192.0.2.0/24", "lo"}, "eth0 lo"},
		{[]string{"10.16.3.0/25"}, `error: no domain "10.16.3.0/25"`},
		{[]string{"10.17.0.0/16"}, `error: no domain "10.17.0.0/16"`},
		{[]string{"10.16.3.0/24", "veth1"}, `error: domain "veth1" named twice`},
		{nil, "eth0"},
	} {
		infos, err := chooseDomains(here, c.want, true)
		var got []string
		for _, in := range infos {
			got = append(got, in.Domain)
		}
		s := strings.Join(got, " ")
		if err != nil {
			s = "error: " + err.Error()
		}
		if want, isErr := strings.CutPrefix(c.got, "error: "); isErr && !strings.Contains(s, want) || !isErr && s != c.got {
			t.Errorf("if_include %q: %v (%v), want %s", c.want, got, err, c.got)
		}
	}
}
