package recvbuf_test

import (
	"testing"

	"github.com/gobtl/gobtl/core"
	_ "github.com/gobtl/gobtl/policies/recvbuf/bsrq"
	_ "github.com/gobtl/gobtl/policies/recvbuf/perpeer"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

// Each layout is registered with a schema whose shared parameters refuse
// what no layout can run, so that config check reports it at its line,
// and whose defaults build a policy.
func TestTheLayoutsAreRegisteredWithTheSharedRanges(t *testing.T) {
	for _, c := range []struct {
		name string
		bad  map[string]any
	}{
		{"perpeer", map[string]any{"send_free_list_max": int64(0)}},
		{"srq", map[string]any{"send_free_list_max": int64(0), "max_factor": int64(0), "grow": -0.5}},
		{"bsrq", map[string]any{"send_free_list_max": int64(0), "max_factor": int64(0), "grow": -0.5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp, ok := core.Lookup(core.KindRecvBuf, c.name)
			if !ok {
				t.Fatal("not registered")
			}
			for k, v := range c.bad {
				if err := core.MustParams(comp.Params).Set(k, v); err == nil {
					t.Errorf("%s = %v accepted", k, v)
				}
			}
			pol, err := comp.NewPolicy(core.MustParams(comp.Params))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := pol.(core.RecvBuffers); !ok {
				t.Fatalf("%T is no core.RecvBuffers", pol)
			}
		})
	}
}
