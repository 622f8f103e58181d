package scale

import (
	"fmt"

	"github.com/gobtl/gobtl/experiment"
)

// ExtollTable3 prints seed 003's Table 3 — static vs dynamic credit flow
// control at 64 nodes × 1 and × 4 processes: delayed sends, overhead and
// memory — from the simulated EXTOLL fabric. It is nil until that fabric
// exists.
//
// LEAD: wire the simulated EXTOLL device's experiment here (the function
// experiment/extoll/sim.go exports): set ExtollTable3 to it, from this
// package (an import of experiment/extoll) or from cmd/gobtl.
var ExtollTable3 func(env *experiment.Env) error

// extoll is seed 003's Table 3 at 64 nodes.
func (x *exp) extoll() error {
	x.Begin("scale: seed 003 Table 3")
	if ExtollTable3 == nil {
		fmt.Fprintf(x.Out, "== Seed 003 Table 3 at 64 nodes × 1 and × 4 processes ==\n")
		fmt.Fprintf(x.Out, "%s\n", x.Unshown("seed 003 Table 3", "64 nodes", "dynamic credits need less memory than static ones (Table 3)",
			"the simulated EXTOLL fabric is not wired into this experiment yet (scale.ExtollTable3)"))
		return nil
	}
	return ExtollTable3(x.Env)
}
