// Command compare runs gobtl's benchmarks and the same algorithms on Open
// MPI (ob1 + vader, single-copy mechanism cma and none) alternately,
// several times, and prints the medians and the ratios gobtl / Open MPI
// against the targets. bench/compare-ompi.sh installs Open MPI and
// builds bench/c/osu.c first; `make compare-ompi` runs both.
//
// -set p2p (the default) compares latency, bandwidth and message rate on
// 2 ranks; -set coll compares the collectives on 4 (-np for 8, 16): gobtl
// bench allreduce, bcast and allgather against MPI_Allreduce, MPI_Bcast and
// MPI_Allgather as Open MPI's coll/tuned chooses them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
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
	target       float64 // ratio gobtl/ompi must be <= (lowerBetter) or >= this
	label        string
}

// sets of metrics: the point-to-point targets (2 ranks) and the
// collective ones (issue 18; 4 ranks, also run at 8 and 16).
var sets = map[string][]metric{"p2p": p2pMetrics, "coll": collMetrics}

var collMetrics = []metric{
	{"allreduce", "lat_us", 8, true, 1.0, "allreduce 8 B (us)"},
	{"allreduce", "lat_us", 1 << 20, true, 1.0, "allreduce 1 MiB (us)"},
	{"bcast", "lat_us", 1 << 20, true, 1.0, "bcast 1 MiB (us)"},
	{"allgather", "lat_us", 1 << 20, true, 1.0, "allgather 1 MiB (us)"},
}

var p2pMetrics = []metric{
	{"latency", "lat_us", 8, true, 0.9, "latency 8 B (us)"},
	{"latency", "lat_us", 1 << 20, true, 1.0, "latency 1 MiB (us)"},
	{"bw", "mbps", 64 << 10, false, 1.0, "bw 64 KiB (MB/s)"},
	{"bw", "mbps", 1 << 20, false, 1.0, "bw 1 MiB (MB/s)"},
	{"bw", "mbps", 4 << 20, false, 1.0, "bw 4 MiB (MB/s)"},
	{"msgrate", "msgs_per_s", 8, false, 0.9, "msgrate 8 B (msg/s)"},
}

type runner struct {
	name string
	cmd  func(bench string, sizes []int) []string
}

func main() {
	reps := flag.Int("reps", 5, "runs of every benchmark on every stack, alternating")
	set := flag.String("set", "p2p", "the metrics: p2p (latency, bandwidth, message rate) or coll (allreduce, bcast, allgather)")
	np := flag.Int("np", 0, "ranks (0: 2 for p2p, 4 for coll)")
	iters := flag.Int("iters", 0, "iterations per size on both sides (0: the benchmarks' defaults)")
	gobtl := flag.String("gobtl", "bin/gobtl", "the gobtl command")
	osu := flag.String("osu", "bin/osu-ompi", "bench/c/osu.c built with mpicc.openmpi")
	// By its full name: with MPICH installed too, the unsuffixed mpirun
	// follows Debian's alternatives.
	mpirun := flag.String("mpirun", "mpirun.openmpi", "Open MPI's launcher")
	stack := flag.String("c", "conf/examples/sm.hcl", "stack file for gobtl run (\"\" for the default stack)")
	extra := flag.String("mpirun-args", "--allow-run-as-root --oversubscribe", "extra mpirun arguments")
	quiet := flag.Duration("quiet", 30*time.Second, "before each run, wait up to this long for a second in which the machine is idle (other jobs share it)")
	flag.Parse()
	metrics, ok := sets[*set]
	if !ok {
		fmt.Fprintf(os.Stderr, "compare: no metric set %q (p2p, coll)\n", *set)
		os.Exit(2)
	}
	if *np == 0 {
		*np = map[string]int{"p2p": 2, "coll": 4}[*set]
	}
	var itersArgs []string
	if *iters > 0 {
		itersArgs = []string{"--iters", strconv.Itoa(*iters)}
	}

	sizes := map[string][]int{}
	var benches []string
	for _, m := range metrics {
		if sizes[m.bench] == nil {
			benches = append(benches, m.bench)
		}
		sizes[m.bench] = append(sizes[m.bench], m.size)
	}
	ompi := func(mech string) runner {
		return runner{"ompi-" + mech, func(bench string, s []int) []string {
			args := append([]string{*mpirun}, strings.Fields(*extra)...)
			args = append(args, "-np", strconv.Itoa(*np), "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
				"--mca", "btl_vader_single_copy_mechanism", mech, *osu, bench, "--sizes", joinSizes(s))
			return append(args, itersArgs...)
		}}
	}
	gob := runner{"gobtl", func(bench string, s []int) []string {
		args := []string{*gobtl, "run", "-np", strconv.Itoa(*np)}
		if *stack != "" {
			args = append(args, "-c", *stack)
		}
		args = append(args, "--", *gobtl, "bench", bench, "--json", "--sizes", joinSizes(s))
		return append(args, itersArgs...)
	}}
	runners := []runner{gob, ompi("cma"), ompi("none")}

	// values[runner][metric index] collects one value per repetition.
	values := map[string][][]float64{}
	for _, r := range runners {
		values[r.name] = make([][]float64, len(metrics))
	}
	fmt.Printf("# %d repetitions, %d ranks, alternating gobtl / Open MPI vader cma / vader none\n", *reps, *np)
	for _, r := range runners {
		for _, b := range benches {
			fmt.Printf("#   %s\n", strings.Join(r.cmd(b, sizes[b]), " "))
		}
	}
	start := time.Now()
	for rep := range *reps {
		for _, b := range benches {
			// Rotate the order so that no stack always runs first.
			for k := range runners {
				r := runners[(k+rep)%len(runners)]
				if *quiet > 0 && !waitQuiet(*quiet) {
					busyRuns++
				}
				rows, err := run(r.cmd(b, sizes[b]))
				if err != nil {
					fmt.Fprintf(os.Stderr, "compare: %s %s: %v\n", r.name, b, err)
					os.Exit(1)
				}
				for i, m := range metrics {
					if m.bench != b {
						continue
					}
					if v, ok := rows[m.size][m.field]; ok {
						values[r.name][i] = append(values[r.name][i], v)
					}
				}
			}
		}
		fmt.Fprintf(os.Stderr, "compare: repetition %d of %d done (%v)\n", rep+1, *reps, time.Since(start).Round(time.Second))
	}

	fmt.Printf("\n%-22s %12s %12s %12s %9s %8s %5s\n", "metric (median)", "gobtl", "vader cma", "vader none", "ratio", "target", "met")
	for i, m := range metrics {
		g := median(values["gobtl"][i])
		c := median(values["ompi-cma"][i])
		n := median(values["ompi-none"][i])
		best := max(c, n)
		op := ">="
		if m.lowerBetter {
			best = min(c, n)
			op = "<="
		}
		ratio := g / best
		met := ratio >= m.target
		if m.lowerBetter {
			met = ratio <= m.target
		}
		fmt.Printf("%-22s %12s %12s %12s %9.3f %5s%.1f %5v\n", m.label, num(g), num(c), num(n), ratio, op, m.target, met)
	}
	fmt.Println("\n(ratio = gobtl / the better of vader cma and none)")
	if busyRuns > 0 {
		fmt.Printf("warning: %d runs started while other processes kept the CPUs busy\n", busyRuns)
	}
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
