// Package scale runs the papers' scalability arguments at the job sizes
// they argue about, on the simulated fabric (package sim, btl/ib/simrc):
// the real pml, ib BTL, credit engine, receive-buffer policies and
// flow-control policies at 64 to 4,096 ranks in one process, in virtual
// time. Everything it prints about the mechanisms is counted by them in
// simulated runs — explicit credit frames, buffers posted, receive
// memory the device saw posted or the module registered — never fitted.
//
//   - flowcontrol: seed 000 §6 Table 1 (explicit credit messages per
//     connection, static scheme) and Table 2 (most buffers posted per
//     connection, dynamic scheme) at 64, 256 and 1,024 ranks, and the
//     receive-buffer memory per process of the hardware, static and
//     dynamic schemes — §5's scalability argument, measured.
//   - recvbuf: seed 002 §3–5, receive memory per process of per-peer
//     buffers, one SRQ and B-SRQ at 64 … 4,096 ranks against the paper's
//     25 MB, and buffer utilization (frame / buffer) of per-peer and
//     B-SRQ under MG at scale.
//   - extoll: seed 003 Table 3 on the simulated EXTOLL fabric
//     (extoll.SimTable3).
//   - cost: the simulator's own wall time and peak memory per simulated
//     rank, LU and alltoall, each run in a `gobtl sim` process of its own.
package scale

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/flowcontrol"
)

// Experiment is `gobtl experiment scale`; its ranks are simulated.
var Experiment = experiment.Register(&experiment.Experiment{
	Name:  "scale",
	Short: "seed 000 Tables 1-2, seed 002 memory and seed 003 Table 3 at 64-4096 simulated ranks, and the simulator's cost",
	Long: `Scale runs the papers' scalability arguments on the simulated fabric (gobtl sim):
the unchanged pml, ib BTL and policies at 64 to 4,096 ranks in this process, in
virtual time. It prints seed 000's Table 1 (explicit credit messages per
connection) and Table 2 (most buffers posted per connection under the dynamic
scheme) and the receive memory per process of the three flow-control schemes at
64, 256 and 1,024 ranks; seed 002's receive memory of per-peer, SRQ and B-SRQ at
64 to 4,096 ranks against the paper's 25 MB, and buffer utilization at scale;
and what the simulator itself costs per simulated rank.`,
	Reps: 1,
})

// Options configure the experiment; zero fields take the defaults (quick
// ones with Env.Quick).
type Options struct {
	// Ranks are seed 000's job sizes (default 64, 256, 1024; quick 8, 16).
	Ranks []int
	// Patterns are the NPB patterns of seed 000's tables (default all
	// seven: is, ft, lu, cg, mg, bt, sp; quick lu and mg).
	Patterns []string
	// Iters are the time steps of each pattern run (default 2; quick 1):
	// the tables' ratios and maxima settle within a step or two, and the
	// counts per connection are per step here, not per class A run.
	Iters int
	// AlltoallRanks is the largest job IS and FT (every rank to every
	// other) run at: their connections grow as n², and with seed 000's
	// 100 pre-posted 2 KiB buffers per connection a 1,024-rank job needs
	// 200 MiB of receive buffers per rank (default 256).
	AlltoallRanks int
	// MemRanks are seed 002's job sizes (default 64 … 4096; quick 8, 16).
	MemRanks []int
	// UtilRanks are the sizes of the utilization runs (default 64, 256;
	// quick 8).
	UtilRanks []int
	// CostRanks are the sizes of the simulator's cost (default 256, 1024,
	// 4096; quick 16).
	CostRanks []int
	// CostPatterns are what the cost is measured on (default lu and
	// alltoall).
	CostPatterns []string
}

// Names of the steps, in order.
var Names = []string{"flowcontrol", "recvbuf", "extoll", "cost"}

// exp is the experiment set up: the options and the Env.
type exp struct {
	*experiment.Env
	Options
}

// New sets the experiment up to run in env.
func New(env *experiment.Env, o Options) *experiment.Plan {
	q := env.Quick
	def := func(v []int, full, quick []int) []int {
		if len(v) > 0 {
			return v
		}
		if q {
			return quick
		}
		return full
	}
	o.Ranks = def(o.Ranks, []int{64, 256, 1024}, []int{8, 16})
	o.MemRanks = def(o.MemRanks, []int{64, 256, 1024, 4096}, []int{8, 16})
	o.UtilRanks = def(o.UtilRanks, []int{64, 256}, []int{8})
	o.CostRanks = def(o.CostRanks, []int{256, 1024, 4096}, []int{16})
	if len(o.Patterns) == 0 {
		o.Patterns = []string{"is", "ft", "lu", "cg", "mg", "bt", "sp"}
		if q {
			o.Patterns = []string{"lu", "mg"}
		}
	}
	if len(o.CostPatterns) == 0 {
		o.CostPatterns = []string{"lu", "alltoall"}
	}
	if o.Iters <= 0 {
		o.Iters = 2
		if q {
			o.Iters = 1
		}
	}
	if o.AlltoallRanks <= 0 {
		o.AlltoallRanks = 256
	}
	x := &exp{Env: env, Options: o}
	return &experiment.Plan{Name: "scale",
		Header: "Scalability on the simulated fabric (gobtl sim: the real pml, ib BTL and policies over btl/ib/simrc in\n" +
			"virtual time, LogGP links L 2µs, o 0.3µs, o_r 0.3µs, g 0.1µs, 1 GB/s).\n",
		Steps: []experiment.Step{
			{Name: "flowcontrol", Runs: len(o.Ranks) * len(o.Patterns) * len(flowcontrol.Schemes), Run: x.flowcontrol},
			{Name: "recvbuf", Runs: len(o.MemRanks)*3 + len(o.UtilRanks)*2, Run: x.recvbuf},
			{Name: "extoll", Runs: 1, Run: x.extoll},
			{Name: "cost", Runs: len(o.CostRanks) * len(o.CostPatterns), Run: x.cost},
		}}
}

// stack is seed 000's stack of flowcontrol.Stack on the simulated
// provider: per-peer 2 KiB buffers, the scheme's policy with pre
// pre-posted buffers (the dynamic scheme's first), at most maxPosted.
func (x *exp) stack(scheme string, pre, maxPosted int) string {
	s := flowcontrol.Stack(x.PolicyLines, scheme, pre, maxPosted, "")
	s = strings.Replace(s, `provider    = "softrc"`, `provider    = "sim"`, 1)
	return strings.Replace(s, "  address     = \"127.0.0.1\"\n", "", 1)
}

// release gives a large job's memory back before the next one.
func release() { debug.FreeOSMemory() }

func mib(b float64) string { return fmt.Sprintf("%.2f MiB", b/(1<<20)) }

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
