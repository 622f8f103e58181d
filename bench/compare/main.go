// Command compare runs gobtl's benchmarks and a reference alternately,
// several times, and prints the medians and the ratios gobtl / reference
// against the targets (issues 16 and 18), every ratio in one
// table. bench/compare-ompi.sh installs Open MPI and builds bench/c/osu.c
// (the same algorithms as `gobtl bench`) first; `make compare-ompi` runs it.
//
// A set is a list of groups, each gobtl on one stack against its
// references:
//
//   - sm: gobtl's shared-memory stack (-c) against Open MPI's ob1 + vader
//     with single-copy mechanism cma and none, the better of the two as
//     the reference; latency, bandwidth, message rate on 2 ranks.
//   - softrc: ib over softrc (-softrc-c) against Open MPI's ob1 + tcp over
//     loopback; latency 8 B and 1 MiB, bandwidth 1 MiB.
//   - plugin: one policy (-plugin-policy) as a plugin process against the
//     same policy built in, on the same stack; message rate 8 B and
//     bandwidth 1 MiB, and under each the ratios of every repetition's
//     two runs, which ran back to back, with their spread. bw warms up
//     for -plugin-bw-warmup windows on both sides, so that the policy's
//     quota ramp is over before the timed windows.
//   - coll: the collectives on 4 ranks (-np for 8, 16): gobtl bench
//     allreduce, bcast, allgather and barrier against MPI_Allreduce,
//     MPI_Bcast, MPI_Allgather and MPI_Barrier as Open MPI's coll/tuned
//     chooses them, on the stack of -coll-c: by default the default stack,
//     which yields at once where a node has more ranks than CPUs (as
//     mpirun --oversubscribe makes Open MPI's ranks do). sm.hcl's long
//     spin is for ranks that have a CPU each: 4 of them on 2 CPUs wait
//     for the scheduler's tick (a barrier took 3-4 ms against 13-26 µs).
//     The barrier row has no target (the issue sets none); it is there to
//     be seen.
//   - ofi: gobtl's btl "ofi" on one libfabric provider (-ofi-provider,
//     tcp: tcp under ofi_rxm, on loopback) against Open MPI's two paths
//     over the same provider — ob1 + btl/ofi and cm + mtl/ofi, the better
//     of them as the reference — and, beside them, gobtl's ib over softrc
//     (not a reference); latency 8 B and 1 MiB, bandwidth 1 MiB, message
//     rate 8 B. Each Open MPI path is tried once first: one that cannot
//     run here is left out, saying why (Open MPI 4.1's btl/ofi refuses
//     ofi_rxm, so on tcp only mtl/ofi runs). The ratios of each
//     repetition's back-to-back runs are printed under each metric.
//
// Under a latency metric's line, each runner whose rows have them
// (gobtl's) gets the spread of its calls: the min, median, p99 and max of
// rank 0's timed iterations, medians over the repetitions.
//
// -set p2p (the default) runs sm, softrc and plugin in one run; -set sm,
// softrc, plugin, coll or ofi runs one. With -plots DIR the latency and
// bandwidth of sm and softrc, 8 B to 4 MiB, gobtl and Open MPI side by
// side, go to DIR/compare-latency.png and DIR/compare-bw.png, titled with
// the commit, the host, the date and the load of the run that made them.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gobtl/gobtl/internal/plot"
)

type report struct {
	Bench string                       `json:"bench"`
	Rows  []map[string]json.RawMessage `json:"rows"`
}

// metric is one number the targets speak about.
type metric struct {
	bench, field string
	size         int
	lowerBetter  bool
	target       float64 // ratio gobtl/reference must be <= (lowerBetter) or >= this; 0: none
	label        string
}

// runner is one stack: the command that runs a benchmark on it, and the
// name its values and curves go by.
type runner struct {
	name string
	cmd  func(bench string, sizes []int) []string
	// known is why the runner may fail its probe, where that is known.
	known string
}

// group is gobtl on one stack against its references: the ratio of a
// metric is gobtl's value over the best reference's.
type group struct {
	name    string
	subject runner
	refs    []runner
	metrics []metric
	// sweep are the sizes a bench runs at beyond the metrics' own, for
	// the plots; plot names the group's curves there ("" draws none).
	sweep map[string][]int
	plot  string
	// paired also prints, under each metric, the ratios of the runs of
	// each repetition — they ran back to back, so load that drifts over
	// the minutes of a compare run cancels in each — and their spread:
	// for the plugin group, whose target is a few percent between two
	// runs of one program on a machine whose load moves the message rate
	// by more than that between minutes; for the ofi group, whose
	// 1 MiB figures move by 2x between minutes on a VM (mtl/ofi's
	// latency 263-549 µs in three runs of one loop), for both sides.
	paired bool
	// also are runners measured beside the subject but not references:
	// their medians and ratios are printed under each metric.
	also []runner
	// probe tries each reference once before the run and leaves out
	// those that cannot run here (notes says why).
	probe bool
	notes []string
}

// sweepSizes are the plots' sizes: 8 B to 4 MiB by factors of 8, and the
// sizes the targets name.
var sweepSizes = []int{8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}

var smMetrics = []metric{
	{"latency", "lat_us", 8, true, 1.1, "latency 8 B (us)"},
	{"latency", "lat_us", 1 << 20, true, 0.6, "latency 1 MiB (us)"},
	{"bw", "mbps", 64 << 10, false, 1.1, "bw 64 KiB (MB/s)"},
	{"bw", "mbps", 1 << 20, false, 1.1, "bw 1 MiB (MB/s)"},
	{"bw", "mbps", 4 << 20, false, 1.1, "bw 4 MiB (MB/s)"},
	{"msgrate", "msgs_per_s", 8, false, 1.1, "msgrate 8 B (msg/s)"},
}

var softrcMetrics = []metric{
	{"latency", "lat_us", 8, true, 1.0, "latency 8 B (us)"},
	{"latency", "lat_us", 1 << 20, true, 1.0, "latency 1 MiB (us)"},
	{"bw", "mbps", 1 << 20, false, 1.1, "bw 1 MiB (MB/s)"},
}

var pluginMetrics = []metric{
	{"msgrate", "msgs_per_s", 8, false, 0.95, "msgrate 8 B (msg/s)"},
	{"bw", "mbps", 1 << 20, false, 0.95, "bw 1 MiB (MB/s)"},
}

var ofiMetrics = []metric{
	{"latency", "lat_us", 8, true, 1.0, "latency 8 B (us)"},
	{"latency", "lat_us", 1 << 20, true, 1.0, "latency 1 MiB (us)"},
	{"bw", "mbps", 1 << 20, false, 1.0, "bw 1 MiB (MB/s)"},
	{"msgrate", "msgs_per_s", 8, false, 0, "msgrate 8 B (msg/s)"},
}

var collMetrics = []metric{
	{"allreduce", "lat_us", 8, true, 1.0, "allreduce 8 B (us)"},
	{"allreduce", "lat_us", 1 << 20, true, 1.0, "allreduce 1 MiB (us)"},
	{"bcast", "lat_us", 1 << 20, true, 1.0, "bcast 1 MiB (us)"},
	{"allgather", "lat_us", 1 << 20, true, 1.0, "allgather 1 MiB (us)"},
	{"barrier", "lat_us", 0, true, 0, "barrier (us)"},
}

type options struct {
	np, iters                         int
	gobtl, osu, mpirun, extra         string
	smStack, softrcStack, collStack   string
	pluginKind, pluginName, pluginBTL string
	pluginDir, tmp                    string
	ofiStack, ofiProvider             string
	pluginBWWarmup                    int
}

func main() {
	var o options
	reps := flag.Int("reps", 5, "runs of every benchmark on every stack, alternating")
	set := flag.String("set", "p2p", "the groups: p2p (sm, softrc and plugin), sm, softrc, plugin, coll or ofi")
	flag.IntVar(&o.np, "np", 0, "ranks of the sm and coll groups (0: 2 for sm, 4 for coll)")
	flag.IntVar(&o.iters, "iters", 0, "iterations per size on both sides (0: the benchmarks' defaults)")
	flag.StringVar(&o.gobtl, "gobtl", "bin/gobtl", "the gobtl command")
	flag.StringVar(&o.osu, "osu", "bin/osu-ompi", "bench/c/osu.c built with mpicc.openmpi")
	// By its full name: with MPICH installed too, the unsuffixed mpirun
	// follows Debian's alternatives.
	flag.StringVar(&o.mpirun, "mpirun", "mpirun.openmpi", "Open MPI's launcher")
	flag.StringVar(&o.smStack, "c", "conf/examples/sm.hcl", "stack file of the sm group (\"\" for the default stack)")
	flag.StringVar(&o.collStack, "coll-c", "", "stack file of the coll group (\"\": the default stack)")
	flag.StringVar(&o.softrcStack, "softrc-c", "conf/examples/ib.hcl", "stack file of the softrc group")
	flag.StringVar(&o.ofiProvider, "ofi-provider", "tcp", "the ofi group's libfabric provider, on both sides (on loopback)")
	flag.StringVar(&o.ofiStack, "ofi-c", "", "stack file of the ofi group (\"\": self and btl \"ofi\" on -ofi-provider, domain lo)")
	flag.StringVar(&o.pluginKind, "plugin-kind", "flow_control", "the plugin group's policy kind")
	flag.StringVar(&o.pluginName, "plugin-policy", "extoll_dynamic", "the plugin group's policy, built in and as a plugin")
	flag.StringVar(&o.pluginBTL, "plugin-btl", `btl "extoll" "x" {}`, "the plugin group's transport block")
	flag.StringVar(&o.pluginDir, "plugin-dir", "bin/plugins", "where the plugin group's plugins are")
	flag.IntVar(&o.pluginBWWarmup, "plugin-bw-warmup", 20, "untimed bw windows of the plugin group, on both of its sides (0: the benchmark's default of 2)")
	flag.StringVar(&o.extra, "mpirun-args", "--allow-run-as-root --oversubscribe", "extra mpirun arguments")
	plots := flag.String("plots", "", "directory for the latency and bandwidth plots (\"\": none)")
	quiet := flag.Duration("quiet", 30*time.Second, "before each run, wait up to this long for a second in which the machine is idle (other jobs share it)")
	flag.Parse()

	tmp, err := os.MkdirTemp("", "gobtl-compare-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	o.tmp = tmp
	groups, err := groupsOf(*set, &o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		os.Exit(2)
	}

	printHeader(groups, *reps)
	vals := values{}
	load := measure(groups, vals, *reps, *quiet)

	printTable(os.Stdout, groups, vals)
	caption := fmt.Sprintf("%s, %s, %s, %d reps, load %.1f-%.1f", commit(), hostname(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), *reps, slices.Min(load), slices.Max(load))
	fmt.Printf("run: %s\n", caption)
	if busyRuns > 0 {
		fmt.Printf("warning: %d runs started while other processes kept the CPUs busy\n", busyRuns)
	}
	if *plots != "" {
		if err := writePlots(*plots, caption, groups, vals); err != nil {
			fail(err)
		}
	}
}

// printHeader probes the references of the groups that ask for it and
// prints what will run: every command, and why a reference was left out.
func printHeader(groups []*group, reps int) {
	for _, g := range groups {
		if g.probe {
			g.probeRefs()
		}
	}
	fmt.Printf("# %d repetitions, alternating gobtl and the references\n", reps)
	for _, g := range groups {
		fmt.Printf("# group %s\n", g.name)
		for _, n := range g.notes {
			fmt.Printf("#   note: %s\n", n)
		}
		for _, r := range g.runners() {
			for _, b := range g.benches() {
				fmt.Printf("#   %s\n", strings.Join(r.cmd(b, g.sizes(b)), " "))
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "compare: %v\n", err)
	os.Exit(1)
}

// measure runs every bench of every group on every runner, reps times,
// into vals, and returns the load average before each run. It exits on a
// run that fails, and prints the table so far after each repetition but
// the last.
func measure(groups []*group, vals values, reps int, quiet time.Duration) []float64 {
	start := time.Now()
	var load []float64
	for rep := range reps {
		for _, g := range groups {
			rs := g.runners()
			for _, b := range g.benches() {
				// Rotate the order so that no stack always runs first.
				for k := range rs {
					r := rs[(k+rep)%len(rs)]
					if quiet > 0 && !waitQuiet(quiet) {
						busyRuns++
					}
					load = append(load, loadavg())
					rows, err := run(r.cmd(b, g.sizes(b)))
					if err != nil {
						fmt.Fprintf(os.Stderr, "compare: %s %s %s: %v\n", g.name, r.name, b, err)
						os.Exit(1)
					}
					vals.add(g.name, r.name, b, rows)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "compare: repetition %d of %d done (%v)\n", rep+1, reps, time.Since(start).Round(time.Second))
		if rep+1 < reps {
			// So far, for a run cut short.
			printTable(os.Stderr, groups, vals)
		}
	}
	return load
}

// groupsOf builds the groups of a set.
func groupsOf(set string, o *options) ([]*group, error) {
	switch set {
	case "p2p":
		var gs []*group
		for _, s := range []string{"sm", "softrc", "plugin"} {
			g, err := groupsOf(s, o)
			if err != nil {
				return nil, err
			}
			gs = append(gs, g...)
		}
		return gs, nil
	case "sm":
		np := o.np
		if np == 0 {
			np = 2
		}
		g := &group{name: "sm", subject: o.gobtlRunner("gobtl sm", np, o.smStack),
			refs: []runner{o.ompiRunner("vader cma", np, "self,vader", "btl_vader_single_copy_mechanism", "cma"),
				o.ompiRunner("vader none", np, "self,vader", "btl_vader_single_copy_mechanism", "none")},
			metrics: smMetrics, plot: "sm"}
		if np == 2 {
			g.sweep = map[string][]int{"latency": sweepSizes, "bw": sweepSizes}
		}
		return []*group{g}, nil
	case "softrc":
		return []*group{{name: "softrc", subject: o.gobtlRunner("gobtl ib/softrc", 2, o.softrcStack),
			refs:    []runner{o.ompiRunner("ob1/tcp", 2, "self,tcp", "btl_tcp_if_include", "lo")},
			metrics: softrcMetrics, plot: "softrc",
			sweep: map[string][]int{"latency": sweepSizes, "bw": sweepSizes}}}, nil
	case "plugin":
		g, err := o.pluginGroup()
		if err != nil {
			return nil, err
		}
		return []*group{g}, nil
	case "coll":
		np := o.np
		if np == 0 {
			np = 4
		}
		return []*group{{name: "coll", subject: o.gobtlRunner("gobtl", np, o.collStack),
			refs: []runner{o.ompiRunner("vader cma", np, "self,vader", "btl_vader_single_copy_mechanism", "cma"),
				o.ompiRunner("vader none", np, "self,vader", "btl_vader_single_copy_mechanism", "none")},
			metrics: collMetrics}}, nil
	case "ofi":
		g, err := o.ofiGroup()
		if err != nil {
			return nil, err
		}
		return []*group{g}, nil
	}
	return nil, fmt.Errorf("no set %q (p2p, sm, softrc, plugin, coll, ofi)", set)
}

// pluginGroup is one policy as a plugin process against the same policy
// built in, on the same stack.
func (o *options) pluginGroup() (*group, error) {
	stacks := map[string]string{}
	for _, how := range []string{"builtin", "plugin"} {
		sel := fmt.Sprintf("builtin = %q", o.pluginName)
		if how == "plugin" {
			dir, err := filepath.Abs(o.pluginDir)
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(filepath.Join(dir, o.pluginName)); err != nil {
				return nil, fmt.Errorf("plugin group: %w (make plugins builds it)", err)
			}
			sel = fmt.Sprintf("plugin = %q\n  plugin_dir = %q", o.pluginName, dir)
		}
		path := filepath.Join(o.tmp, how+".hcl")
		hcl := fmt.Sprintf("btl \"self\" \"self\" {}\n%s\npolicy %q {\n  %s\n}\n", o.pluginBTL, o.pluginKind, sel)
		if err := os.WriteFile(path, []byte(hcl), 0o644); err != nil {
			return nil, err
		}
		stacks[how] = path
	}
	// A flow-control policy ramps its quotas up in the first ~100 ms
	// of a bw run (extoll_dynamic: 6 steals, 12 proposals), built in
	// and as a plugin alike. bw's default warm-up of 2 windows left
	// the ramp inside the timed windows, so the row measured the ramp
	// as much as the settled policy; both sides warm up longer.
	warm := func(r runner) runner {
		if o.pluginBWWarmup <= 0 {
			return r
		}
		return runner{name: r.name, cmd: func(bench string, s []int) []string {
			args := r.cmd(bench, s)
			if bench == "bw" {
				args = append(args, "--warmup", strconv.Itoa(o.pluginBWWarmup))
			}
			return args
		}}
	}
	return &group{name: "plugin", subject: warm(o.gobtlRunner(o.pluginName+" plugin", 2, stacks["plugin"])),
		refs: []runner{warm(o.gobtlRunner(o.pluginName+" built in", 2, stacks["builtin"]))}, metrics: pluginMetrics, paired: true}, nil
}

// ofiGroup is gobtl's btl "ofi" against Open MPI's btl/ofi and mtl/ofi on
// the same provider, on loopback (FI_TCP_IFACE, FI_SOCKETS_IFACE), with
// gobtl's softrc beside them.
func (o *options) ofiGroup() (*group, error) {
	stack := o.ofiStack
	if stack == "" {
		stack = filepath.Join(o.tmp, "ofi.hcl")
		hcl := fmt.Sprintf("btl \"self\" \"self\" {}\nbtl \"ofi\" \"net\" {\n  provider = %q\n  domain   = \"lo\"\n}\n", o.ofiProvider)
		if o.ofiProvider == "shm" {
			hcl = fmt.Sprintf("btl \"self\" \"self\" {}\nbtl \"ofi\" \"net\" {\n  provider = %q\n}\n", o.ofiProvider)
		}
		if err := os.WriteFile(stack, []byte(hcl), 0o644); err != nil {
			return nil, err
		}
	}
	p := o.ofiProvider
	env := []string{"-x", "FI_TCP_IFACE=lo", "-x", "FI_SOCKETS_IFACE=lo"}
	btl := o.ompiArgs("btl/ofi "+p, 2, append([]string{"--mca", "pml", "ob1", "--mca", "btl", "self,ofi",
		"--mca", "btl_ofi_provider_include", p, "--mca", "btl_ofi_provider_exclude", ""}, env...))
	if p == "tcp" {
		btl.known = "Open MPI's btl/ofi refuses ofi_rxm, which tcp runs under, for want of FI_DELIVERY_COMPLETE"
	}
	return &group{name: "ofi", subject: o.gobtlRunner("gobtl ofi/"+p, 2, stack),
		refs: []runner{btl, o.ompiArgs("mtl/ofi "+p, 2, append([]string{"--mca", "pml", "cm", "--mca", "mtl", "ofi",
			"--mca", "mtl_ofi_provider_include", p}, env...))},
		also:    []runner{o.gobtlRunner("gobtl ib/softrc", 2, o.softrcStack)},
		metrics: ofiMetrics, probe: true, paired: true}, nil
}

// probeRefs runs each reference once, 8 B latency with few iterations,
// and leaves out those that fail, noting why (the last line they print).
func (g *group) probeRefs() {
	var ok []runner
	for _, r := range g.refs {
		args := append(r.cmd("latency", []int{8}), "--iters", "20")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		cancel()
		if err == nil {
			ok = append(ok, r)
			continue
		}
		note := fmt.Sprintf("Open MPI %s cannot run here, left out (%v: %s)", r.name, err, firstWords(out))
		if r.known != "" {
			note += "; " + r.known
		}
		g.notes = append(g.notes, note)
	}
	g.refs = ok
}

// firstWords is what a failed run said first: the first sentence of
// Open MPI's first help message (the text between its rules of dashes),
// else its last line.
func firstWords(out []byte) string {
	text := strings.TrimSpace(string(out))
	if _, help, ok := strings.Cut(text, "-----\n"); ok {
		help, _, _ = strings.Cut(help, "\n-----")
		help = strings.Join(strings.Fields(help), " ")
		if i := strings.Index(help, ". "); i > 0 {
			help = help[:i+1]
		}
		return help
	}
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	if text == "" {
		return "no output"
	}
	return text
}

func (o *options) itersArgs() []string {
	if o.iters > 0 {
		return []string{"--iters", strconv.Itoa(o.iters)}
	}
	return nil
}

// ompiRunner runs osu.c under Open MPI's ob1 over btls, with one MCA
// parameter set.
func (o *options) ompiRunner(name string, np int, btls, param, value string) runner {
	return o.ompiArgs(name, np, []string{"--mca", "pml", "ob1", "--mca", "btl", btls, "--mca", param, value})
}

// ompiArgs runs osu.c under Open MPI with mpirun arguments of its own.
func (o *options) ompiArgs(name string, np int, mpirunArgs []string) runner {
	return runner{name: name, cmd: func(bench string, s []int) []string {
		args := append([]string{o.mpirun}, strings.Fields(o.extra)...)
		args = append(append(args, "-np", strconv.Itoa(np)), mpirunArgs...)
		args = append(args, o.osu, bench, "--sizes", joinSizes(s))
		return append(args, o.itersArgs()...)
	}}
}

// gobtlRunner runs gobtl bench under gobtl run on a stack.
func (o *options) gobtlRunner(name string, np int, stack string) runner {
	return runner{name: name, cmd: func(bench string, s []int) []string {
		args := []string{o.gobtl, "run", "-np", strconv.Itoa(np)}
		if stack != "" {
			args = append(args, "-c", stack)
		}
		args = append(args, "--", o.gobtl, "bench", bench, "--json", "--sizes", joinSizes(s))
		return append(args, o.itersArgs()...)
	}}
}

func (g *group) runners() []runner { return append(append([]runner{g.subject}, g.refs...), g.also...) }

// benches are the group's benchmarks in the order its metrics name them.
func (g *group) benches() []string {
	var bs []string
	for _, m := range g.metrics {
		if !slices.Contains(bs, m.bench) {
			bs = append(bs, m.bench)
		}
	}
	return bs
}

// sizes are the sizes a bench runs at: the metrics' and the sweep's.
func (g *group) sizes(bench string) []int {
	s := slices.Clone(g.sweep[bench])
	for _, m := range g.metrics {
		if m.bench == bench {
			s = append(s, m.size)
		}
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// key names the values of one field of one size of one bench on one
// runner of one group, one per repetition.
type key struct {
	group, runner, bench string
	size                 int
	field                string
}

type values map[key][]float64

// add appends the rows of one run, size -> field -> value, to the values
// of group, runner and bench.
func (v values) add(group, runner, bench string, rows map[int]map[string]float64) {
	for size, row := range rows {
		for field, x := range row {
			k := key{group, runner, bench, size, field}
			v[k] = append(v[k], x)
		}
	}
}

func (v values) median(group, runner string, m metric) float64 {
	return median(v[key{group, runner, m.bench, m.size, m.field}])
}

// tail is how one runner's calls of a latency metric spread, rank 0's
// timed iterations: min, median, p99 and max (the bench row's _min,
// _median, _p99, _max), each the median over the repetitions; "" when
// its rows have no p99 (Open MPI's osu.c reports the mean per rank).
func (v values) tail(group, runner string, m metric) string {
	at := func(suffix string) float64 { return median(v[key{group, runner, m.bench, m.size, m.field + suffix}]) }
	if len(v[key{group, runner, m.bench, m.size, m.field + "_p99"}]) == 0 {
		return ""
	}
	return fmt.Sprintf("min %s, median %s, p99 %s, max %s", num(at("_min")), num(at("_median")), num(at("_p99")), num(at("_max")))
}

// paired are the ratios subject / ref of a metric, one per repetition in
// which both have a value.
func (v values) paired(group, subject, ref string, m metric) []float64 {
	s, r := v[key{group, subject, m.bench, m.size, m.field}], v[key{group, ref, m.bench, m.size, m.field}]
	var rs []float64
	for i := range min(len(s), len(r)) {
		if r[i] > 0 {
			rs = append(rs, s[i]/r[i])
		}
	}
	return rs
}

// curve is the medians of a field of a bench over its sizes.
func (v values) curve(group, runner, bench, field string) map[int]float64 {
	c := map[int]float64{}
	for k, xs := range v {
		if k.group == group && k.runner == runner && k.bench == bench && k.field == field {
			c[k.size] = median(xs)
		}
	}
	return c
}

// writePlots draws latency and bandwidth over size, every runner of the
// groups that plot, gobtl and Open MPI side by side.
func writePlots(dir, caption string, groups []*group, v values) error {
	out := plot.Dir{Path: dir, Out: os.Stdout}
	for _, p := range []struct{ file, bench, field, title, ylabel string }{
		{"compare-latency", "latency", "lat_us", "one-way latency", "latency (µs, lower is better)"},
		{"compare-bw", "bw", "mbps", "bandwidth", "bandwidth (MB/s, higher is better)"},
	} {
		f := plot.Figure{Title: "gobtl vs Open MPI 4.1, 2 ranks: " + p.title + "\n" + caption,
			XLabel: "message size", YLabel: p.ylabel, LogX: true, LogY: true, XTicks: plot.SizeTicks{}}
		// Both curves rise with size: the legend goes where they are not.
		f.LegendLeft = p.bench == "latency"
		f.LegendBottom = p.bench == "bw"
		for _, g := range groups {
			if g.plot == "" {
				continue
			}
			for _, r := range g.runners() {
				name := r.name
				if !strings.HasPrefix(name, "gobtl") {
					name = "Open MPI " + name
				}
				f.Lines = append(f.Lines, plot.Line{Name: name, XY: plot.Curve(v.curve(g.name, r.name, p.bench, p.field))})
			}
		}
		if err := out.Figure(p.file, f); err != nil {
			return err
		}
	}
	return nil
}

// printTable prints every metric's medians, ratio and target.
func printTable(w io.Writer, groups []*group, vals values) {
	fmt.Fprintf(w, "\n%-7s %-22s %12s %12s %-22s %8s %7s %5s\n", "group", "metric (median)", "gobtl", "reference", "(which)", "ratio", "target", "met")
	met, all := 0, 0
	for _, g := range groups {
		for _, m := range g.metrics {
			gv := vals.median(g.name, g.subject.name, m)
			best, which := 0.0, ""
			var others []string
			for _, r := range g.refs {
				v := vals.median(g.name, r.name, m)
				if v == 0 {
					continue
				}
				others = append(others, fmt.Sprintf("%s %s", r.name, num(v)))
				if which == "" || (m.lowerBetter && v < best) || (!m.lowerBetter && v > best) {
					best, which = v, r.name
				}
			}
			ratio := 0.0
			if best > 0 {
				ratio = gv / best
			}
			if m.target == 0 {
				fmt.Fprintf(w, "%-7s %-22s %12s %12s %-22s %8.3f %8s %5s\n", g.name, m.label, num(gv), num(best), which, ratio, "-", "-")
			} else {
				op, ok := ">=", ratio >= m.target
				if m.lowerBetter {
					op, ok = "<=", ratio > 0 && ratio <= m.target
				}
				all++
				if ok {
					met++
				}
				fmt.Fprintf(w, "%-7s %-22s %12s %12s %-22s %8.3f %4s%.2f %5v\n", g.name, m.label, num(gv), num(best), which, ratio, op, m.target, ok)
			}
			if len(others) > 1 {
				fmt.Fprintf(w, "%-7s %-22s %12s   %s\n", "", "", "", strings.Join(others, ", "))
			}
			for _, r := range g.also {
				if v := vals.median(g.name, r.name, m); v > 0 {
					fmt.Fprintf(w, "%-7s %-22s %12s   beside: %s %s (gobtl / it %.3f)\n", "", "", "", r.name, num(v), gv/v)
				}
			}
			for _, r := range g.runners() {
				if t := vals.tail(g.name, r.name, m); t != "" {
					fmt.Fprintf(w, "%-7s %-22s %12s   %s per call: %s\n", "", "", "", r.name, t)
				}
			}
			if rs := vals.paired(g.name, g.subject.name, which, m); g.paired && len(rs) > 0 {
				fmt.Fprintf(w, "%-7s %-22s %12s   paired by repetition: median %.3f, %.3f-%.3f over %d\n", "", "", "", median(rs), slices.Min(rs), slices.Max(rs), len(rs))
			}
		}
	}
	fmt.Fprintf(w, "\n%d of %d targets met (ratio = gobtl / the best reference; plugin: the plugin / the built-in)\n", met, all)
}

var busyRuns int

// waitQuiet waits until the CPUs have been at least 90%% idle for a second,
// or until limit has passed; it reports whether it saw a quiet second.
func waitQuiet(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		idle0, total0 := cpuTimes()
		time.Sleep(time.Second)
		idle1, total1 := cpuTimes()
		if total1 > total0 && float64(idle1-idle0)/float64(total1-total0) >= 0.9 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// cpuTimes reads the idle and total jiffies of all CPUs from /proc/stat.
func cpuTimes() (idle, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return idle, total
}

// loadavg is the one-minute load average, for the caption.
func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown commit"
	}
	return strings.TrimSpace(string(out))
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func run(args []string) (map[int]map[string]float64, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v\n%s%s", err, out.String(), errb.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("bad JSON: %v\n%s", err, out.String())
	}
	rows := map[int]map[string]float64{}
	for _, row := range rep.Rows {
		var size int
		json.Unmarshal(row["size"], &size)
		rows[size] = map[string]float64{}
		for k, v := range row {
			var f float64
			if json.Unmarshal(v, &f) == nil {
				rows[size][k] = f
			}
		}
	}
	return rows, nil
}

func joinSizes(s []int) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func num(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3f", v)
}
