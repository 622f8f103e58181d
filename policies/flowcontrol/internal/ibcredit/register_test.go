package ibcredit_test

import (
	"testing"

	"github.com/gobtl/gobtl/core"
	ibdynamic "github.com/gobtl/gobtl/policies/flowcontrol/ib_dynamic"
	ibhardware "github.com/gobtl/gobtl/policies/flowcontrol/ib_hardware"
	ibstatic "github.com/gobtl/gobtl/policies/flowcontrol/ib_static"
)

// Each InfiniBand scheme is registered under its name and its former one,
// with a schema that refuses what the scheme cannot run and defaults that
// reach the policy.
func TestTheSchemesAreRegisteredWithTheirSchemas(t *testing.T) {
	for _, c := range []struct {
		name, former string
		bad, set     [2]string // a value the schema refuses, and one it takes
		check        func(pol any) bool
	}{
		{ibhardware.Name, "hardware", [2]string{"rnr_retry", "8"}, [2]string{"pre_post", "1"}, func(pol any) bool {
			p := pol.(*ibhardware.Policy)
			return p.PrePost == 1 && p.RNRRetry == 7
		}},
		{ibstatic.Name, "static", [2]string{"credit_threshold", "0"}, [2]string{"pre_post", "0"}, func(pol any) bool {
			p := pol.(*ibstatic.Policy)
			return p.Threshold == 5 && p.Rndv && p.PrePost == 0
		}},
		{ibdynamic.Name, "dynamic", [2]string{"growth", "quadratic"}, [2]string{"growth", "exponential"}, func(pol any) bool {
			p := pol.(*ibdynamic.Policy)
			return p.Exponential && p.Initial == 2 && p.Max == 128 && p.Threshold == 5
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp, ok := core.Lookup(core.KindFlowControl, c.name)
			if !ok {
				t.Fatal("not registered")
			}
			if old, ok := core.Lookup(core.KindFlowControl, c.former); !ok || old != comp {
				t.Fatalf("the former name %q does not find it", c.former)
			}
			ps := core.MustParams(comp.Params)
			if err := ps.SetText(c.bad[0], c.bad[1]); err == nil {
				t.Fatalf("%s = %s accepted", c.bad[0], c.bad[1])
			}
			if err := ps.SetText(c.set[0], c.set[1]); err != nil {
				t.Fatal(err)
			}
			pol, err := comp.NewPolicy(ps)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(pol) {
				t.Fatalf("policy %+v", pol)
			}
		})
	}
}
