package ib

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

// openOn opens rank 0 of a two-rank job the engine places on nodes, with
// params, and returns its module or the error.
func openOn(t *testing.T, nodes core.NodeMap, params map[string]string) (*module, error) {
	t.Helper()
	b := boot.GroupOn(fmt.Sprintf("ibaddr-%d-%d", os.Getpid(), jobSeq.Add(1)), nodes)[0]
	p := core.MustParams(Params)
	for k, v := range params {
		if err := p.SetText(k, v); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := openBTL(core.BTLEnv{Instance: "addr", Params: p, Boot: b, Locality: core.LocalityOf(b), Log: zerolog.Nop(), Metrics: core.NewMetrics()})
	if err != nil {
		return nil, err
	}
	m := ms[0].(*module)
	t.Cleanup(func() { m.Close() })
	return m, nil
}

// gid is the IP a softrc port publishes: its GID, the IP as RoCE maps it.
func gid(m *module) string {
	if m == nil {
		return "no module"
	}
	a, err := m.h.dev.QueryPort(m.port)
	if err != nil {
		return err.Error()
	}
	return net.IP(a.GID[:]).String()
}

func TestASoftrcPortPublishesAnAddressTheOtherNodesReach(t *testing.T) {
	oneNode, twoNodes := core.NodeMap{0, 0}, core.NodeMap{0, 1}
	m, err := openOn(t, oneNode, nil)
	if err != nil || gid(m) != "127.0.0.1" {
		t.Errorf("one node, nothing set: %v, %v; want loopback", gid(m), err)
	}
	if _, err := openOn(t, twoNodes, map[string]string{"address": "127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("address 127.0.0.1 across nodes: %v", err)
	}
	if _, err := openOn(t, twoNodes, map[string]string{"address": "127.0.0.1", netif.ParamInclude: "lo"}); err == nil {
		t.Error("address and if_include together were accepted")
	}
	want, err := netif.Select(netif.Choice{Spans: true})
	if err != nil {
		t.Skipf("no interface but loopback is up: %v", err)
	}
	if m, err := openOn(t, twoNodes, nil); err != nil || gid(m) != want.String() {
		t.Errorf("two nodes, nothing set: %v, %v; want %s", gid(m), err, want)
	}
	ifs, _ := netif.Interfaces()
	for _, i := range ifs {
		if i.Up && !i.Loopback && len(i.Addrs) > 0 {
			ip, _ := netif.Select(netif.Choice{Include: i.Name, Spans: true, Interfaces: ifs})
			if m, err := openOn(t, twoNodes, map[string]string{netif.ParamInclude: "nosuch0," + i.Name}); err != nil || ip == nil || gid(m) != ip.String() {
				t.Errorf("if_include %s: %v, %v; want %v", i.Name, gid(m), err, ip)
			}
			break
		}
	}
}
