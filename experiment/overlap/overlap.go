// Package overlap runs the InfiniBand experiments of seed 004 between two
// processes: the overlap of computation and communication of the three
// rendezvous protocols (§5.1, `gobtl experiment overlap`), and beside it
// the latency and bandwidth of ib/softrc against Open MPI ob1+tcp
// (`gobtl experiment ibperf`). Each runs the benchmark suite (`gobtl
// bench`) under gobtl run over an ib/softrc stack written for the run,
// reads its JSON reports and prints them beside the reference numbers.
package overlap

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
)

// Overlap is `gobtl experiment overlap`.
var Overlap = experiment.Register(&experiment.Experiment{
	Name:  "overlap",
	Short: "sender and receiver overlap W/T over ib/softrc for rdma_write, rdma_read and rdma_read_async (seed 004 §5.1)",
	Long: `Overlap runs gobtl bench overlap between two processes under gobtl run, over
an ib/softrc stack, for each rendezvous protocol and computation time W, and
prints the sender's and the receiver's overlap ratio W/T next to the paper's.`,
})

// IBPerf is `gobtl experiment ibperf`.
var IBPerf = experiment.Register(&experiment.Experiment{
	Name:  "ibperf",
	Short: "latency and 1 MiB bandwidth of ib/softrc between two processes, against Open MPI ob1+tcp over loopback",
})

// ibStack is the stack an experiment runs over: self plus one softrc rail
// with the default receive queues, its link at rate (unlimited if empty).
func ibStack(protocol, rate string) string {
	r := ""
	if rate != "" {
		r = fmt.Sprintf("  rate     = %q\n", rate)
	}
	return fmt.Sprintf(`job {
  protocol = %q
%s}
btl "self" "self" {}
btl "ib" "rail0" {
  provider = "softrc"
  port     = 1
%s}
`, protocol, experiment.Progress, r)
}

// Options configure the overlap experiment.
type Options struct {
	// Sizes are the message sizes.
	Sizes []int
	// Compute are the computation times W as the bench takes them
	// ("100us"); W = 0 gives W/T = 0 by definition.
	Compute []string
	// Protocols are the rendezvous protocols.
	Protocols []string
	// Iters are the timed iterations per point.
	Iters int
	// Rate is the softrc link rate; "" is unlimited.
	Rate string
}

// Seed 004 §5.1's measured overlap for 1 MB and W = 1800 µs.
const paperOverlap = "seed 004 (1MB, W=1800us): receiver write 59%, read 62.2%, read+interrupt 99.5%; sender: read and read+interrupt nearly complete, write low"

// NewOverlap sets the overlap experiment up to run in env.
func NewOverlap(env *experiment.Env, o Options) *experiment.Plan {
	run := func() error {
		l, err := env.Launch()
		if err != nil {
			return err
		}
		sizes := make([]string, len(o.Sizes))
		for i, n := range o.Sizes {
			sizes[i] = fmt.Sprint(n)
		}
		// results[proto][w] is a report covering every size.
		results := map[string]map[string]experiment.Report{}
		for _, p := range o.Protocols {
			results[p] = map[string]experiment.Report{}
			for _, w := range o.Compute {
				env.Begin("overlap: %s, W=%s ...", p, w)
				rep, err := l.Bench(env.Ctx, 2, ibStack(p, o.Rate), "overlap", "--sizes", strings.Join(sizes, ","), "--compute", w, "--iters", fmt.Sprint(o.Iters))
				if err != nil {
					return err
				}
				results[p][w] = rep
			}
		}
		printOverlap(env.Out, o, results)
		return nil
	}
	return &experiment.Plan{Name: "overlap", Steps: []experiment.Step{{Name: "overlap", Runs: len(o.Protocols) * len(o.Compute), Run: run}}}
}

func printOverlap(w io.Writer, o Options, res map[string]map[string]experiment.Report) {
	link := "unlimited"
	if o.Rate != "" {
		link = o.Rate
	}
	fmt.Fprintf(w, "# overlap W/T over ib/softrc, two processes on two cores, link rate %s, waiters spin 50 polls then yield (seed 004 §5.1)\n", link)
	fmt.Fprintf(w, "# %s\n", paperOverlap)
	protos := o.Protocols
	for _, side := range []string{"send", "recv"} {
		for _, sz := range o.Sizes {
			fmt.Fprintf(w, "%s side, %s\n%-8s", map[string]string{"send": "sender", "recv": "receiver"}[side], core.FormatSize(int64(sz)), "W")
			for _, p := range protos {
				fmt.Fprintf(w, " %16s", p)
			}
			fmt.Fprintln(w)
			for _, x := range o.Compute {
				// The W the bench measured (the bench chooses one itself
				// for a W of 0).
				label := x
				if v, ok := res[protos[0]][x].Value(sz, "compute_us"); ok {
					label = fmt.Sprintf("%.0fus", v)
				}
				fmt.Fprintf(w, "%-8s", label)
				for _, p := range protos {
					v, ok := res[p][x].Value(sz, "overlap_"+side)
					if ok {
						fmt.Fprintf(w, " %15.1f%%", 100*v)
					} else {
						fmt.Fprintf(w, " %16s", "-")
					}
				}
				fmt.Fprintln(w)
			}
		}
	}
}

// Open MPI ob1 + tcp over loopback, measured on this project's machine.
const ompiLatencyUs, ompiBandwidthMBs = 4.18, 5960.0

// NewIBPerf sets the ibperf experiment up to run in env: latency of 8 B
// over iters round trips and bandwidth of 1 MiB messages, with the
// rendezvous protocol given.
func NewIBPerf(env *experiment.Env, protocol string, iters int) *experiment.Plan {
	run := func() error {
		l, err := env.Launch()
		if err != nil {
			return err
		}
		env.Begin("ibperf: latency, %s", protocol)
		lat, err := l.Bench(env.Ctx, 2, ibStack(protocol, ""), "latency", "--sizes", "8", "--iters", fmt.Sprint(iters))
		if err != nil {
			return err
		}
		env.Begin("ibperf: bandwidth, %s", protocol)
		bw, err := l.Bench(env.Ctx, 2, ibStack(protocol, ""), "bw", "--sizes", "1MiB")
		if err != nil {
			return err
		}
		lt, okL := lat.Value(8, "lat_us")
		b, okB := bw.Value(1<<20, "mbps")
		if !okL || !okB {
			return fmt.Errorf("reports without lat_us or mbps: %+v %+v", lat.Rows, bw.Rows)
		}
		w := env.Out
		fmt.Fprintf(w, "# ib/softrc between two processes vs Open MPI ob1+tcp over loopback (reference measured here)\n")
		fmt.Fprintf(w, "%-22s %12s %12s %8s %s\n", "", "ib/softrc", "ob1+tcp", "ratio", "goal")
		fmt.Fprintf(w, "%-22s %10.2fus %10.2fus %7.2fx %s\n", "latency (8 B, one-way)", lt, ompiLatencyUs, lt/ompiLatencyUs, "≤ 1.0x")
		fmt.Fprintf(w, "%-22s %8.0fMB/s %8.0fMB/s %7.2fx %s\n", "bandwidth (1 MiB)", b, ompiBandwidthMBs, b/ompiBandwidthMBs, "≥ 0.9x")
		fmt.Fprintf(w, "# measured %s on a shared machine; protocol %s\n", time.Now().Format(time.DateTime), protocol)
		return nil
	}
	return &experiment.Plan{Name: "ibperf", Steps: []experiment.Step{{Name: "ibperf", Runs: 2, Run: run}}}
}
