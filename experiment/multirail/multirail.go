// Package multirail runs the multirail experiments of seed 001 §6 over
// ib/softrc between real processes (`gobtl experiment multirail`) and
// prints their tables next to the paper's numbers, with plots:
//
//   - equal: two equal rails (1GB/s each) against one — latency,
//     bandwidth and bidirectional bandwidth from 4 B to 4 MiB (§6.2,
//     Figs. 5, 7, 8);
//   - 4x1x: a 4x rail (1GB/s) and a 1x rail (250MB/s) — even striping,
//     weighted striping 4:1 and adaptive striping (§6.3, Figs. 17–19),
//     and the weights adaptive striping learns without being told the
//     rates;
//   - load: a long bandwidth run during which a second job loads one rail
//     (§6.3, Fig. 20) — bandwidth and adaptive weights every 100 ms, even
//     against adaptive striping;
//   - window: window round robin on rails of different latency (§4.4) —
//     out-of-order arrivals as W grows.
//
// The second job of "load" is a real job: its ranks run the same stream
// over one rail whose port names a shared link (btl/ib's link parameter)
// with the first job's second rail, so the two jobs' traffic goes through
// one softrc token bucket per node, as two programs on one node share an
// HCA port. Rank r of each job stands for node r.
package multirail

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
)

// Experiment is `gobtl experiment multirail`; its rank program is one
// rank of a stream (Stream).
var Experiment = experiment.Register(&experiment.Experiment{
	Name:  "multirail",
	Short: "multirail experiments over ib/softrc rails (seed 001 §6): equal rails, 4x+1x rails, a loaded rail, window round robin",
	Long: `Runs the multirail experiments of seed 001 §6 between two processes under gobtl run,
over ib/softrc rails with per-port link rates, and prints the tables next to the
paper's numbers; plots go to --plots:

  equal   two 1GB/s rails vs one: latency, bandwidth, bidirectional bandwidth, 4 B to 4 MiB (Figs 5, 7, 8)
  4x1x    1GB/s + 250MB/s rails: even vs weighted 4:1 vs adaptive striping (Figs 17-19)
  load    a second job loads one rail during a long bandwidth run: bandwidth and weights every 100 ms (Fig 20)
  window  window round robin on rails of different latency: out-of-order arrivals as W grows`,
	Rank: experiment.RankOf(Stream),
})

// Options configure the experiments; zero fields take the defaults. The
// shared ones (reps, quick, plugins) are the Env's.
type Options struct {
	// Tag makes the shared links of this run unique on the host (default:
	// the process id).
	Tag string
}

// Names of the experiments, in order.
var Names = []string{"equal", "4x1x", "load", "window"}

type exp struct {
	Options
	*experiment.Env
}

// New sets the experiments up to run in env: their ranks are processes
// started by env.Jobs.
func New(env *experiment.Env, o Options) *experiment.Plan {
	if o.Tag == "" {
		o.Tag = fmt.Sprint(os.Getpid())
	}
	x := &exp{Options: o, Env: env}
	windows := len(x.windows()) + 1
	return &experiment.Plan{
		Name: "multirail",
		Header: fmt.Sprintf("Multirail experiments (seed 001 §6) over ib/softrc between two processes under gobtl run.\n"+
			"softrc rails are rate-limited TCP connections over loopback (a token bucket per port), and the\n"+
			"machine has %d CPUs: both ranks, their softrc device goroutines and the kernel's TCP copies\n"+
			"compete for them. Rendezvous is rdma_read.\n", runtime.NumCPU()),
		Steps: []experiment.Step{
			// bench runs 3 benchmarks × configs × 2 groups of sizes.
			{Name: "equal", Runs: len(x.equalBenches()) * 2 * len(x.groups(false)) * env.Repeat(), Run: x.equal},
			{Name: "4x1x", Runs: 2*4*len(x.groups(true))*env.Repeat() + 1, Run: x.fourByOne},
			{Name: "load", Runs: 2, Run: x.load},
			{Name: "window", Runs: windows * env.Repeat(), Run: x.window},
		},
	}
}

// stream runs a stream between two processes over st.
func (x *exp) stream(st Stack, o StreamOptions) (StreamReport, error) {
	var r StreamReport
	jobs, err := x.Launch()
	if err != nil {
		return r, err
	}
	st.Choose = x.PolicyLines
	lines, err := jobs.Rank(x.Ctx, 2, st.HCL(), Experiment.Name, o)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(lines[0], &r); err != nil {
		return r, fmt.Errorf("a stream report: %w in %q", err, lines[0])
	}
	return r, nil
}

// config is one stack under test.
type config struct {
	name  string
	stack Stack
}

// curves[bench][config] maps size to the best value of the reps.
type curves map[string]map[string]map[int]float64

var benchField = map[string]string{"latency": "lat_us", "bw": "mbps", "bibw": "mbps"}

// sizes of the figures: 4 B to 4 MiB in powers of 4.
func (x *exp) sizes() []int {
	if x.Quick {
		return []int{4, 64 << 10, 1 << 20, 4 << 20}
	}
	var s []int
	for n := 4; n <= 4<<20; n *= 4 {
		s = append(s, n)
	}
	return s
}

// groups are the size groups a bench runs in one job each: up to
// 64 KiB and above; the quick 4x1x runs only the large group, where
// striping acts.
func (x *exp) groups(largeOnly bool) [][]string {
	var small, large []string
	for _, n := range x.sizes() {
		if n <= 64<<10 {
			small = append(small, fmt.Sprint(n))
		} else {
			large = append(large, fmt.Sprint(n))
		}
	}
	if largeOnly && x.Quick {
		return [][]string{large}
	}
	return [][]string{small, large}
}

// equalBenches are the benches of "equal": latency, bandwidth and
// bidirectional bandwidth (quick: no bidirectional).
func (x *exp) equalBenches() []string {
	if x.Quick {
		return []string{"latency", "bw"}
	}
	return []string{"latency", "bw", "bibw"}
}

// bench runs the osu-style benches for every config and reports the
// median of the reps per size.
func (x *exp) bench(configs []config, benches []string, groups [][]string) (curves, error) {
	runs := map[string]map[string]map[int][]float64{}
	for _, b := range benches {
		runs[b] = map[string]map[int][]float64{}
		for _, c := range configs {
			runs[b][c.name] = map[int][]float64{}
		}
	}
	for rep := 0; rep < x.Repeat(); rep++ {
		for _, b := range benches {
			for _, c := range configs {
				for _, group := range groups {
					if len(group) == 0 {
						continue
					}
					args := []string{b, "--sizes", strings.Join(group, ",")}
					first, _ := strconv.Atoi(group[0])
					big := first > 64<<10
					switch {
					case b == "latency" && big:
						args = append(args, "--iters", "20", "--warmup", "3")
					case b == "latency":
						args = append(args, "--iters", "2000", "--warmup", "200")
					case big:
						args = append(args, "--iters", "4", "--warmup", "1", "--window", "32")
					default:
						args = append(args, "--iters", "50", "--warmup", "5", "--window", "64")
					}
					jobs, err := x.Launch()
					if err != nil {
						return nil, err
					}
					x.Begin("multirail: %s %s (%s), run %d of %d", b, c.name, strings.Join(group, ","), rep+1, x.Repeat())
					st := c.stack
					st.Choose = x.PolicyLines
					report, err := jobs.Bench(x.Ctx, 2, st.HCL(), args...)
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", b, c.name, err)
					}
					for _, row := range report.Rows {
						size, _ := row["size"].(float64)
						if v, ok := row[benchField[b]].(float64); ok {
							runs[b][c.name][int(size)] = append(runs[b][c.name][int(size)], v)
						}
					}
				}
			}
		}
	}
	out := curves{}
	for b, cs := range runs {
		out[b] = map[string]map[int]float64{}
		for c, m := range cs {
			out[b][c] = map[int]float64{}
			for n, v := range m {
				out[b][c][n] = experiment.Median(v)
			}
		}
	}
	return out, nil
}

func sizeName(n int) string { return core.FormatSize(int64(n)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// peak is the largest value of a curve and the size where it is.
func peak(m map[int]float64) (float64, int) {
	best, at := 0.0, 0
	for n, v := range m {
		if v > best || (v == best && n < at) {
			best, at = v, n
		}
	}
	return best, at
}

// equal: two 1GB/s rails against one (§6.2, Figs. 5, 7, 8).
func (x *exp) equal() error {
	one := config{"1 rail", Stack{Rails: []Rail{{Name: "hca0", Rate: rate4x}}}}
	pol, params := striping("even_striping", nil)
	two := config{"2 rails", Stack{Rails: []Rail{{Name: "hca0", Rate: rate4x}, {Name: "hca1", Rate: rate4x}}, Policy: pol, Params: params}}
	res, err := x.bench([]config{one, two}, x.equalBenches(), x.groups(false))
	if err != nil {
		return err
	}
	w := x.Out
	fmt.Fprintf(w, "== equal: one rail vs two rails of 1GB/s (Figs. 5, 7, 8); two rails: even striping of RDMA data >= 64KiB, round robin below\n")
	fmt.Fprintf(w, "%-8s | %10s %10s %6s | %10s %10s %6s | %10s %10s %6s\n", "", "latency", "(us)", "", "bandwidth", "(MB/s)", "", "bidir bw", "(MB/s)", "")
	fmt.Fprintf(w, "%-8s | %10s %10s %6s | %10s %10s %6s | %10s %10s %6s\n", "size", "1 rail", "2 rails", "2/1", "1 rail", "2 rails", "2/1", "1 rail", "2 rails", "2/1")
	benches := x.equalBenches()
	for _, n := range x.sizes() {
		fmt.Fprintf(w, "%-8s", sizeName(n))
		for _, b := range []string{"latency", "bw", "bibw"} {
			if !slices.Contains(benches, b) {
				fmt.Fprintf(w, " | %10s %10s %6s", "-", "-", "-") // not run (--quick)
				continue
			}
			a, c := res[b]["1 rail"][n], res[b]["2 rails"][n]
			x.Record("equal rails", map[string]any{"bench": b, "size": n, "one_rail": a, "two_rails": c})
			fmt.Fprintf(w, " | %10.2f %10.2f %6.2f", a, c, ratio(c, a))
		}
		fmt.Fprintln(w)
	}
	bw1, at1 := peak(res["bw"]["1 rail"])
	bw2, at2 := peak(res["bw"]["2 rails"])
	bi1, _ := peak(res["bibw"]["1 rail"])
	bi2, _ := peak(res["bibw"]["2 rails"])
	const table = "Figs 5, 7, 8 equal rails"
	fmt.Fprintf(w, "peak bandwidth:       1 rail %6.0f MB/s (%s), 2 rails %6.0f MB/s (%s): %.2fx   paper: 884 vs 1723 MB/s, 1.95x   %s\n",
		bw1, sizeName(at1), bw2, sizeName(at2), ratio(bw2, bw1),
		x.Check(table, "peak bandwidth", "two rails give about twice one rail's bandwidth (2 rails / 1 rail)", ratio(bw2, bw1), experiment.AtLeast(1.8)))
	if bi1 > 0 {
		fmt.Fprintf(w, "peak bidirectional:   1 rail %6.0f MB/s, 2 rails %6.0f MB/s: %.2fx   paper: 943 vs 1877 MB/s, 1.99x   %s\n", bi1, bi2, ratio(bi2, bi1),
			x.Check(table, "peak bidirectional", "two rails give about twice one rail's bidirectional bandwidth", ratio(bi2, bi1), experiment.AtLeast(1.8)))
	}
	fmt.Fprintf(w, "latency, 2 rails / 1 rail:")
	for _, n := range x.sizes() {
		if n >= 1<<20 {
			r := ratio(res["latency"]["2 rails"][n], res["latency"]["1 rail"][n])
			fmt.Fprintf(w, " %.2f at %s (%s)", r, sizeName(n), x.Check(table, "latency "+sizeName(n), "large-message latency about halves on two rails (2 rails / 1 rail)", r, experiment.AtMost(0.65)))
		}
	}
	fmt.Fprintf(w, "   paper: about half for large messages\n")
	worstLat, worstBW, atLat, atBW := 0.0, math.Inf(1), 0, 0
	for _, n := range x.sizes() {
		if n > 4<<10 {
			continue
		}
		if r := ratio(res["latency"]["2 rails"][n], res["latency"]["1 rail"][n]); r > worstLat {
			worstLat, atLat = r, n
		}
		if r := ratio(res["bw"]["2 rails"][n], res["bw"]["1 rail"][n]); r < worstBW {
			worstBW, atBW = r, n
		}
	}
	fmt.Fprintf(w, "small messages (<= 4KiB), 2 rails / 1 rail: worst latency %.2f (%s), worst bandwidth %.2f (%s)   paper: comparable latency (~6us both), round robin slightly better bandwidth   %s\n\n",
		worstLat, sizeName(atLat), worstBW, sizeName(atBW),
		x.Check(table, "small-message latency", "small messages lose nothing on two rails (worst latency 2 rails / 1 rail)", worstLat, experiment.AtMost(1.2)))
	return x.plotCurves("fig05-07-08-equal-rails", "two 1GB/s rails vs one (ib/softrc)", res, []string{"1 rail", "2 rails"})
}

// fourByOne: a 4x and a 1x rail; even vs weighted 4:1 vs adaptive
// (§6.3, Figs. 17–19).
func (x *exp) fourByOne() error {
	rails := []Rail{{Name: "x4", Rate: rate4x}, {Name: "x1", Rate: rate1x}}
	mk := func(name, policy string, extra map[string]string) config {
		pol, params := striping(policy, extra)
		return config{name, Stack{Rails: rails, Policy: pol, Params: params}}
	}
	only := config{"4x only", Stack{Rails: rails[:1]}}
	even := mk("even", "even_striping", nil)
	weighted := mk("weighted 4:1", "weighted_striping", map[string]string{"weights": "[4, 1]"})
	adaptive := mk("adaptive", "adaptive_striping", map[string]string{"alpha": "0.5"})
	configs := []config{only, even, weighted, adaptive}
	benches := []string{"latency", "bw", "bibw"}
	if x.Quick {
		benches = []string{"bw", "bibw"}
	}
	res, err := x.bench(configs, benches, x.groups(true))
	if err != nil {
		return err
	}
	fmt.Fprintf(x.Out, "== 4x1x: a 4x rail (1GB/s) and a 1x rail (250MB/s): even vs weighted 4:1 vs adaptive striping (Figs. 17-19)\n")
	fmt.Fprintf(x.Out, "adaptive starts from equal weights and is not told the rates; alpha 0.5, W_total 100\n")
	x.fourByOneTables(configs, benches, res)
	// The weights adaptive striping reaches in a stream of 1 MiB messages.
	dur := 3 * time.Second
	if x.Quick {
		dur = time.Second
	}
	x.Begin("multirail: adaptive weights, %s stream", dur)
	st, err := x.stream(adaptive.stack, StreamOptions{Size: 1 << 20, Window: 16, Duration: dur, Interval: 100 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("adaptive stream: %w", err)
	}
	x.fourByOneChecks(res, st, dur)
	fmt.Fprintln(x.Out)
	return x.plotCurves("fig17-18-19-4x1x", "4x (1GB/s) + 1x (250MB/s) rails (ib/softrc)", res, []string{"4x only", "even", "weighted 4:1", "adaptive"})
}

// fourByOneTables prints a table per bench, a column per config and
// adaptive's ratio to weighted, and records its rows.
func (x *exp) fourByOneTables(configs []config, benches []string, res curves) {
	w := x.Out
	titles := map[string]string{"latency": "latency (us)", "bw": "bandwidth (MB/s)", "bibw": "bidirectional bandwidth (MB/s)"}
	for _, b := range benches {
		fmt.Fprintf(w, "%s\n%-8s", titles[b], "size")
		for _, c := range configs {
			fmt.Fprintf(w, " %12s", c.name)
		}
		fmt.Fprintf(w, " %18s\n", "adaptive/weighted")
		for _, n := range x.sizes() {
			if _, ok := res[b]["even"][n]; !ok {
				continue
			}
			fmt.Fprintf(w, "%-8s", sizeName(n))
			rec := map[string]any{"bench": b, "size": n}
			for _, c := range configs {
				fmt.Fprintf(w, " %12.2f", res[b][c.name][n])
				rec[c.name] = res[b][c.name][n]
			}
			x.Record("4x1x rails", rec)
			fmt.Fprintf(w, " %18.2f\n", ratio(res[b]["adaptive"][n], res[b]["weighted 4:1"][n]))
		}
	}
}

// fourByOneChecks checks the paper's trends: adaptive striping matches
// weighted 4:1 for messages of 1 MiB and more, both ways, and the
// weights it learnt in the stream st of dur are the rails' 4:1.
func (x *exp) fourByOneChecks(res curves, st StreamReport, dur time.Duration) {
	w := x.Out
	big := func(b string) (float64, float64) {
		var a, wt float64
		for _, n := range x.sizes() {
			if n >= 1<<20 {
				a, wt = math.Max(a, res[b]["adaptive"][n]), math.Max(wt, res[b]["weighted 4:1"][n])
			}
		}
		return a, wt
	}
	ua, uw := big("bw")
	ba, bwt := big("bibw")
	const table = "Figs 17-19 4x+1x rails"
	fmt.Fprintf(w, "bandwidth >= 1MiB:       adaptive %6.0f MB/s, weighted %6.0f MB/s: %.2fx   paper: adaptive comparable to weighted   %s\n", ua, uw, ratio(ua, uw),
		x.Check(table, "bandwidth", "adaptive striping, not told the rates, matches weighted 4:1 (adaptive / weighted)", ratio(ua, uw), experiment.AtLeast(0.9)))
	fmt.Fprintf(w, "bidirectional >= 1MiB:   adaptive %6.0f MB/s, weighted %6.0f MB/s: %.2fx   paper: adaptive beats weighted (the PCI-X bus made 2:1 the best split, not 4:1; no such bus here)   %s\n", ba, bwt, ratio(ba, bwt),
		x.Check(table, "bidirectional", "adaptive at least matches weighted bidirectionally (adaptive / weighted)", ratio(ba, bwt), experiment.AtLeast(0.9)))
	if s := st.Samples[1]; len(s) > 0 {
		first, last := s[0].Weights, s[len(s)-1].Weights
		share := 0.0
		if len(last) == 2 {
			share = last[0]
		}
		fmt.Fprintf(w, "adaptive weights (receiver, which stripes the reads) in a %s stream of 1MiB: %s after 100ms, %s at the end (%.0f MB/s); link rates are 4:1 = 80:20   %s\n",
			dur, fmtWeights(first), fmtWeights(last), st.MBps,
			x.Check(table, "learnt weights", "adaptive striping learns the rails' 4:1 (the 4x rail's weight of 100)", share, experiment.Within(80, 8)))
	}
}

func fmtWeights(w []float64) string {
	parts := make([]string, len(w))
	for i, v := range w {
		parts[i] = fmt.Sprintf("%.1f", v)
	}
	return strings.Join(parts, ":")
}
