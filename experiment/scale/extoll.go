package scale

import (
	"fmt"

	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/extoll"
)

// extoll is seed 003's Table 3 — static against dynamic credit flow
// control at 64 nodes × 1 and × 4 processes: delayed sends, overhead and
// memory per process — from the simulated EXTOLL fabric
// (extoll.SimTable3; quick: 4 nodes × 1 and × 2).
func (x *exp) extoll() error {
	x.Begin("scale: seed 003 Table 3")
	o := extoll.SimOptions{}
	if x.Quick {
		o.Nodes, o.PerNode, o.PingpongIters = 4, []int{1, 2}, 20
	}
	fmt.Fprintf(x.Out, "== Seed 003 Table 3 on the simulated EXTOLL fabric ==\n")
	rows, err := extoll.SimTable3(x.Ctx, o)
	if err != nil {
		return fmt.Errorf("scale: seed 003: %w", err)
	}
	if err := extoll.WriteSimTable(x.Out, rows); err != nil {
		return err
	}
	const table = "seed 003 Table 3 (simulated EXTOLL)"
	// Pair each dynamic row with the static row of its pattern and shape.
	static := map[string]extoll.SimRow{}
	for _, r := range rows {
		x.Record(table, r)
		key := fmt.Sprintf("%d×%d %s", r.Nodes, r.PerNode, r.Pattern)
		if r.Scheme == "extoll_static" {
			static[key] = r
			continue
		}
		s, ok := static[key]
		if !ok || s.MemoryBytes == 0 {
			continue
		}
		fmt.Fprintf(x.Out, "%s\n", x.Check(table, key, "dynamic credits need less than a third of static's memory per process (Table 3: 0.29)",
			float64(r.MemoryBytes)/float64(s.MemoryBytes), experiment.AtMost(1.0/3)))
	}
	return nil
}
