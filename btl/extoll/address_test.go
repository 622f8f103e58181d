package extoll

import (
	"testing"

	"github.com/gobtl/gobtl/btl/netif"
	"github.com/gobtl/gobtl/core"
)

func TestTheTCPEnginesNeverPublishLoopbackAcrossNodes(t *testing.T) {
	params := func(kv ...string) core.Params {
		p := core.MustParams(Params)
		for i := 0; i < len(kv); i += 2 {
			if err := p.SetText(kv[i], kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	if a, err := listenAddr(params(), false); err != nil || a != "127.0.0.1" {
		t.Errorf("one node, nothing set: %q, %v", a, err)
	}
	if a, err := listenAddr(params("listen", "127.0.0.1"), true); err == nil {
		t.Errorf("listen 127.0.0.1 across nodes gave %q", a)
	}
	if a, err := listenAddr(params("listen", "10.9.8.7", netif.ParamInclude, "eth0"), false); err == nil {
		t.Errorf("listen and if_include together gave %q", a)
	}
	want, err := netif.Select(netif.Choice{Spans: true})
	if err != nil {
		t.Skipf("no interface but loopback is up: %v", err)
	}
	if a, err := listenAddr(params(), true); err != nil || a != want.String() {
		t.Errorf("two nodes, nothing set: %q, %v; want %s", a, err, want)
	}
}
