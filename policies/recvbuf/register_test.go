package recvbuf_test

import (
	"testing"

	"github.com/gobtl/gobtl/core"
	_ "github.com/gobtl/gobtl/policies/recvbuf/bsrq"
	_ "github.com/gobtl/gobtl/policies/recvbuf/perpeer"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

// Every layout's schema refuses, for the shared parameters it has, what
// no layout can run — so that config check reports it at its line — and
// its defaults build a policy.
func TestEveryLayoutRefusesWhatNoLayoutCanRun(t *testing.T) {
	bad := map[string]any{"send_free_list_max": int64(0), "max_factor": int64(0), "grow": -0.5}
	comps := core.Components(core.KindRecvBuf)
	if len(comps) < 3 {
		t.Fatalf("%d layouts registered, want perpeer, srq and bsrq", len(comps))
	}
	for _, comp := range comps {
		ps := core.MustParams(comp.Params)
		if _, ok := ps.Param("send_free_list_max"); !ok {
			t.Errorf("%s has no send_free_list_max", comp.Name)
		}
		for k, v := range bad {
			if _, ok := ps.Param(k); ok && ps.Set(k, v) == nil {
				t.Errorf("%s: %s = %v accepted", comp.Name, k, v)
			}
		}
		if pol, err := comp.NewPolicy(core.MustParams(comp.Params)); err != nil {
			t.Errorf("%s with its defaults: %v", comp.Name, err)
		} else if _, ok := pol.(core.RecvBuffers); !ok {
			t.Errorf("%s builds a %T, no core.RecvBuffers", comp.Name, pol)
		}
	}
}
