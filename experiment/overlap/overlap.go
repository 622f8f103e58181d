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
	"os"
	"runtime"
	"slices"
	"strings"

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
// with the default receive queues (policy srq: built in, or its plugin as
// choose says), its link at rate (unlimited if empty), and softrc's NIC
// thread pinned to a core of its own when nicThread says so. The ranks
// are then left unbound: bound to one core each (gobtl run's default), a
// rank would compute on the core its NIC thread and its progress thread
// need — an HCA and its interrupts do not take the application's core
// (seed 004 §5.1) — and the kernel lets a computing thread finish its
// slice, milliseconds, before the woken progress thread runs there.
func ibStack(choose func(string) string, protocol, rate string, nicThread bool) string {
	r, job := "", experiment.Progress
	if rate != "" {
		r = fmt.Sprintf("  rate     = %q\n", rate)
	}
	if nicThread {
		r += "  nic_thread = \"pinned\"\n"
		job += "  placement {\n    bind_to = \"none\"\n  }\n"
	}
	pol := ""
	if choose != nil {
		pol = "policy \"recvbuf\" {\n" + choose("srq") + "}\n"
	}
	return fmt.Sprintf(`job {
  protocol = %q
%s}
btl "self" "self" {}
btl "ib" "rail0" {
  provider = "softrc"
  port     = 1
%s}
%s`, protocol, job, r, pol)
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
	// Iters are the timed iterations per point (default 50; quick 10).
	Iters int
	// Rate is the softrc link rate; "" is unlimited.
	Rate string
	// NICThread runs softrc's NIC work on an OS thread of its own, pinned
	// to a core the ranks do not use, where the machine has one.
	NICThread bool
}

// Seed 004 §5.1's measured overlap for 1 MB and W = 1800 µs.
const paperOverlap = "seed 004 (1MB, W=1800us): receiver write 59%, read 62.2%, read+interrupt 99.5%; sender: read and read+interrupt nearly complete, write low"

// coresForOverlap is how many CPUs the overlap needs: each of the two
// ranks computes on a core while its HCA — softrc's NIC goroutine —
// moves the data on another.
const coresForOverlap = 4

// NewOverlap sets the overlap experiment up to run in env.
func NewOverlap(env *experiment.Env, o Options) *experiment.Plan {
	if o.Iters <= 0 {
		o.Iters = 50
		if env.Quick {
			o.Iters = 10
		}
	}
	if env.Quick {
		o.Sizes = []int{1 << 20}
		o.Compute = []string{"500us", "1800us"}
	}
	run := func() error {
		l, err := env.Launch()
		if err != nil {
			return err
		}
		sizes := make([]string, len(o.Sizes))
		for i, n := range o.Sizes {
			sizes[i] = fmt.Sprint(n)
		}
		// results[proto][w] are the reports of the reps, each covering
		// every size.
		results := map[string]map[string][]experiment.Report{}
		for _, p := range o.Protocols {
			results[p] = map[string][]experiment.Report{}
			for _, w := range o.Compute {
				for rep := range env.Repeat() {
					env.Begin("overlap: %s, W=%s, run %d of %d", p, w, rep+1, env.Repeat())
					r, err := l.Bench(env.Ctx, 2, ibStack(env.PolicyLines, p, o.Rate, o.NICThread), "overlap", "--sizes", strings.Join(sizes, ","), "--compute", w, "--iters", fmt.Sprint(o.Iters))
					if err != nil {
						return err
					}
					results[p][w] = append(results[p][w], r)
				}
			}
		}
		printOverlap(env, o, results)
		return nil
	}
	return &experiment.Plan{Name: "overlap", Steps: []experiment.Step{{Name: "overlap", Runs: len(o.Protocols) * len(o.Compute) * env.Repeat(), Run: run}}}
}

// median is the median over the reports of a row's field.
func median(reps []experiment.Report, size int, field string) (float64, bool) {
	var v []float64
	for _, r := range reps {
		if x, ok := r.Value(size, field); ok {
			v = append(v, x)
		}
	}
	return experiment.Median(v), len(v) > 0
}

func printOverlap(env *experiment.Env, o Options, res map[string]map[string][]experiment.Report) {
	w := env.Out
	link := "unlimited"
	if o.Rate != "" {
		link = o.Rate
	}
	cpus := runtime.NumCPU()
	fmt.Fprintf(w, "# overlap W/T over ib/softrc, two processes, link rate %s, waiters spin 50 polls then yield (seed 004 §5.1)\n", link)
	fmt.Fprintf(w, "# %s\n", paperOverlap)
	unshown := ""
	if cpus < coresForOverlap {
		unshown = fmt.Sprintf("this machine has %d CPUs and both ranks compute: softrc's NIC work (the HCA's, in hardware) "+
			"shares their cores, so the data moves only when a rank yields; overlap needs %d CPUs (a core per rank and one "+
			"per rank's NIC thread, nic_thread = \"pinned\")", cpus, coresForOverlap)
		fmt.Fprintf(w, "# %s\n", unshown)
	} else if !o.NICThread {
		fmt.Fprintf(w, "# %d CPUs: --nic-thread pins softrc's NIC work to cores of its own\n", cpus)
	}
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
				if v, ok := median(res[protos[0]][x], sz, "compute_us"); ok {
					label = fmt.Sprintf("%.0fus", v)
				}
				fmt.Fprintf(w, "%-8s", label)
				rec := map[string]any{"side": side, "size": sz, "compute": x}
				for _, p := range protos {
					v, ok := median(res[p][x], sz, "overlap_"+side)
					if ok {
						fmt.Fprintf(w, " %15.1f%%", 100*v)
						rec[p] = v
					} else {
						fmt.Fprintf(w, " %16s", "-")
					}
				}
				fmt.Fprintln(w)
				env.Record("overlap", rec)
			}
		}
	}
	// The paper's point: 1 MiB, W = 1800 µs.
	if !slices.Contains(o.Sizes, 1<<20) || !slices.Contains(o.Compute, "1800us") {
		return
	}
	const table = "§5.1 overlap at 1MiB, W=1800us"
	for _, c := range []struct {
		proto, side, trend string
		cond               experiment.Cond
	}{
		{"rdma_read_async", "recv", "read with interrupts overlaps nearly all of the receiver's transfer (paper 99.5%)", experiment.AtLeast(0.9)},
		{"rdma_read", "send", "with RDMA read the sender's overlap is nearly complete", experiment.AtLeast(0.9)},
		{"rdma_read_async", "send", "with RDMA read and interrupts the sender's overlap is nearly complete", experiment.AtLeast(0.9)},
	} {
		if !slices.Contains(protos, c.proto) {
			continue
		}
		v, _ := median(res[c.proto]["1800us"], 1<<20, "overlap_"+c.side)
		row := c.proto + " " + c.side
		// Sender or receiver, the read is served by a NIC: softrc's
		// goroutine, which needs a core of its own.
		if unshown != "" {
			fmt.Fprintf(w, "%s: %.1f%%: %s\n", row, 100*v, env.Unshown(table, row, c.trend, unshown))
			continue
		}
		fmt.Fprintf(w, "%s: %.1f%%: %s\n", row, 100*v, env.Check(table, row, c.trend, v, c.cond))
	}
}

// IBPerfOptions configure ibperf.
type IBPerfOptions struct {
	// Protocol is the rendezvous protocol.
	Protocol string
	// Iters are the latency round trips (default 20000; quick 2000).
	Iters int
}

// NewIBPerf sets the ibperf experiment up to run in env: latency of 8 B
// and bandwidth of 1 MiB messages over ib/softrc, and the same benchmark
// (bench/c/osu.c) under Open MPI's ob1 over tcp on loopback in the same
// run as the reference, when Open MPI is installed.
func NewIBPerf(env *experiment.Env, o IBPerfOptions) *experiment.Plan {
	if o.Protocol == "" {
		o.Protocol = "rdma_read"
	}
	if o.Iters <= 0 {
		o.Iters = 20000
		if env.Quick {
			o.Iters = 2000
		}
	}
	// A run starts afresh: --plugins runs the step twice.
	run := func() error { return (&ibPerf{env: env, o: o}).run() }
	return &experiment.Plan{Name: "ibperf", Steps: []experiment.Step{{Name: "ibperf", Runs: 2 * env.Repeat(), Run: run}}}
}

// ibPerf is a run of ibperf: the latencies and bandwidths of each
// repetition, over softrc and (ref) Open MPI's.
type ibPerf struct {
	env       *experiment.Env
	o         IBPerfOptions
	lat, bw   []float64
	rlat, rbw []float64
}

// run measures softrc and, when Open MPI builds osu.c, the reference,
// alternately, and prints the table.
func (p *ibPerf) run() error {
	env := p.env
	l, err := env.Launch()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gobtl-ibperf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ref, none := findOMPI(env.Ctx, dir)
	for rep := range env.Repeat() {
		env.Begin("ibperf: ib/softrc, %s, run %d of %d", p.o.Protocol, rep+1, env.Repeat())
		if err := p.measure(l); err != nil {
			return err
		}
		if ref == nil {
			continue
		}
		env.Begin("ibperf: Open MPI ob1/tcp, run %d of %d", rep+1, env.Repeat())
		if err := p.measureRef(ref); err != nil {
			return err
		}
	}
	if ref == nil {
		p.printAlone(none)
		return nil
	}
	p.printAgainstRef()
	return nil
}

// measure runs softrc's latency and bandwidth once.
func (p *ibPerf) measure(l *experiment.Launcher) error {
	env, stack := p.env, ibStack(p.env.PolicyLines, p.o.Protocol, "", false)
	lr, err := l.Bench(env.Ctx, 2, stack, "latency", "--sizes", "8", "--iters", fmt.Sprint(p.o.Iters))
	if err != nil {
		return err
	}
	br, err := l.Bench(env.Ctx, 2, stack, "bw", "--sizes", "1MiB")
	if err != nil {
		return err
	}
	lt, okL := lr.Value(8, "lat_us")
	b, okB := br.Value(1<<20, "mbps")
	if !okL || !okB {
		return fmt.Errorf("reports without lat_us or mbps: %+v %+v", lr.Rows, br.Rows)
	}
	p.lat, p.bw = append(p.lat, lt), append(p.bw, b)
	return nil
}

// measureRef runs Open MPI's latency and bandwidth once.
func (p *ibPerf) measureRef(ref *ompi) error {
	ctx := p.env.Ctx
	rl, err := ref.bench(ctx, "latency", "--sizes", "8", "--iters", fmt.Sprint(p.o.Iters))
	if err != nil {
		return fmt.Errorf("the Open MPI reference: %w", err)
	}
	rb, err := ref.bench(ctx, "bw", "--sizes", "1MiB")
	if err != nil {
		return fmt.Errorf("the Open MPI reference: %w", err)
	}
	x, okL := rl.Value(8, "lat_us")
	y, okB := rb.Value(1<<20, "mbps")
	if !okL || !okB {
		return fmt.Errorf("Open MPI reports without lat_us or mbps: %+v %+v", rl.Rows, rb.Rows)
	}
	p.rlat, p.rbw = append(p.rlat, x), append(p.rbw, y)
	return nil
}

const ibPerfTable = "ibperf vs Open MPI ob1/tcp"

// printAlone prints softrc's medians with no reference, saying why
// (none) and that the trends are not shown.
func (p *ibPerf) printAlone(none string) {
	env, w := p.env, p.env.Out
	lt, b := experiment.Median(p.lat), experiment.Median(p.bw)
	fmt.Fprintf(w, "# ib/softrc between two processes; no reference: %s\n", none)
	fmt.Fprintf(w, "%-22s %12s\n", "", "ib/softrc")
	fmt.Fprintf(w, "%-22s %10.2fus   %s\n", "latency (8 B, one-way)", lt, env.Unshown(ibPerfTable, "latency", "latency no worse than Open MPI ob1/tcp", "no reference: "+none))
	fmt.Fprintf(w, "%-22s %8.0fMB/s   %s\n", "bandwidth (1 MiB)", b, env.Unshown(ibPerfTable, "bandwidth", "bandwidth at least 0.9x Open MPI ob1/tcp", "no reference: "+none))
	env.Record(ibPerfTable, map[string]any{"lat_us": lt, "mbps": b})
}

// printAgainstRef prints softrc's medians beside Open MPI's and checks
// the ratios.
func (p *ibPerf) printAgainstRef() {
	env, w := p.env, p.env.Out
	lt, b := experiment.Median(p.lat), experiment.Median(p.bw)
	rl, rb := experiment.Median(p.rlat), experiment.Median(p.rbw)
	fmt.Fprintf(w, "# ib/softrc between two processes vs Open MPI ob1+tcp over loopback, both measured in this run (%s, %s)\n", ompiRun, "bench/c/osu.c")
	fmt.Fprintf(w, "%-22s %12s %12s %8s %s\n", "", "ib/softrc", "ob1+tcp", "ratio", "trend")
	fmt.Fprintf(w, "%-22s %10.2fus %10.2fus %7.2fx %s\n", "latency (8 B, one-way)", lt, rl, lt/rl,
		env.Check(ibPerfTable, "latency", "softrc's latency no worse than Open MPI ob1/tcp's (softrc / ob1)", lt/rl, experiment.AtMost(1.0)))
	fmt.Fprintf(w, "%-22s %8.0fMB/s %8.0fMB/s %7.2fx %s\n", "bandwidth (1 MiB)", b, rb, b/rb,
		env.Check(ibPerfTable, "bandwidth", "softrc's bandwidth at least 0.9x Open MPI ob1/tcp's (softrc / ob1)", b/rb, experiment.AtLeast(0.9)))
	fmt.Fprintf(w, "# protocol %s; medians of %d run(s)\n", p.o.Protocol, env.Repeat())
	env.Record(ibPerfTable, map[string]any{"lat_us": lt, "mbps": b, "ompi_lat_us": rl, "ompi_mbps": rb})
}
