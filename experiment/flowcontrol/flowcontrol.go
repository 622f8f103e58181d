// Package flowcontrol runs the flow-control experiments of seed 000 §6 over
// the ib BTL on softrc, between processes under gobtl run, and prints
// their tables next to the paper's numbers:
//
//   - latency (§6.2.1, Fig 2): ping-pong, 4 B to 4 KiB, the three schemes
//     with 100 buffers pre-posted;
//   - bw (§6.2.2, Figs 3–6): bandwidth of 4-byte messages against the
//     window size, blocking (Send/Recv) and non-blocking (Isend/Irecv),
//     with 100 and with 10 buffers pre-posted;
//   - bw32k (Figs 7–8): the same with 32 KiB messages (rendezvous) and 10
//     buffers;
//   - patterns (§6.3): the NAS-like patterns of bench/patterns on 8 ranks:
//     explicit credit messages and all messages per connection under the
//     static scheme at pre-post 100 (Table 1), time per scheme (Fig 9),
//     the slowdown from pre-post 100 to pre-post 1 (Fig 10), and the
//     dynamic scheme's most buffers posted per connection (Table 2).
//
// The schemes are the flow_control policies ib_hardware, ib_static and
// ib_dynamic (policies/flowcontrol), named here as the paper does;
// "pre-post N" is hardware's and static's
// pre_post and dynamic's initial. The receive layout is the paper's: one
// per-peer queue of 2 KiB buffers, eager messages up to what one holds,
// larger ones by rendezvous.
package flowcontrol

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gobtl/gobtl/experiment"
)

// Experiment is `gobtl experiment flowcontrol`; its rank program is one
// rank of the bandwidth test (BW).
var Experiment = experiment.Register(&experiment.Experiment{
	Name:  "flowcontrol",
	Short: "flow-control experiments over ib/softrc (seed 000 §6): latency, bandwidth vs window, NAS-like patterns",
	Long: `Runs the flow-control experiments of seed 000 §6 over the ib BTL on softrc,
between processes under gobtl run, for the three schemes (hardware, static,
dynamic), and prints the tables next to the paper's numbers; plots go to --plots:

  latency   ping-pong 4 B to 4 KiB, pre-post 100 (Fig 2)
  bw        4-byte messages vs window size, blocking and non-blocking, pre-post 100 and 10 (Figs 3-6)
  bw32k     32 KiB messages vs window size, pre-post 10 (Figs 7-8)
  patterns  the NAS patterns on 8 ranks: explicit credits per connection (Table 1), time (Fig 9),
            slowdown at pre-post 1 (Fig 10), the dynamic scheme's most buffers posted (Table 2)`,
	Rank: experiment.RankOf(BW),
})

// Options configure the experiments; zero fields take the defaults. The
// shared ones (reps, quick, plugins) are the Env's.
type Options struct {
	// Patterns to run (bench/patterns names); empty runs all (--quick: LU
	// and CG).
	Patterns []string
	// Ranks of the pattern runs (seed 000: 8; BT and SP always run on 16,
	// as the paper's did).
	Ranks int
	// Max is the dynamic scheme's most buffers per peer.
	Max int
	// RNRTimer is the btl's min_rnr_timer ("10us"); empty keeps the BTL's.
	RNRTimer string
}

// Names of the experiments, in order.
var Names = []string{"latency", "bw", "bw32k", "patterns"}

// Schemes are seed 000's three flow-control schemes, as policies.
var Schemes = []string{"hardware", "static", "dynamic"}

// AllPatterns are the NAS patterns of seed 000 §6.3, as `gobtl bench`
// names.
var AllPatterns = []string{"is", "ft", "lu", "cg", "mg", "bt", "sp"}

// squareRanks are the patterns the paper ran on 16 processes: BT and SP
// need a square number of them.
var squareRanks = map[string]int{"bt": 16, "sp": 16}

type exp struct {
	Options
	*experiment.Env
}

// New sets the experiments up to run in env: their ranks are processes
// started by env.Jobs.
func New(env *experiment.Env, o Options) *experiment.Plan {
	if o.Ranks <= 0 {
		o.Ranks = 8
	}
	if o.Max <= 0 {
		o.Max = 128
	}
	if len(o.Patterns) == 0 {
		o.Patterns = AllPatterns
		if env.Quick {
			o.Patterns = []string{"lu", "cg"}
		}
	}
	x := &exp{Options: o, Env: env}
	schemes := len(Schemes) * env.Repeat()
	return &experiment.Plan{
		Name: "flowcontrol",
		Header: fmt.Sprintf("Flow-control experiments (seed 000 §6) over ib/softrc between processes under gobtl run.\n"+
			"Schemes: hardware (RNR NAK, retry 7), static (credits = pre-posted buffers, threshold 5),\n"+
			"dynamic (starts at the pre-post count, +1 per backlogged message up to %d).\n", o.Max),
		Steps: []experiment.Step{
			{Name: "latency", Runs: schemes, Run: x.latency},
			{Name: "bw", Runs: len(x.bwModes(4, 100)) * 2 * schemes, Run: func() error { return x.bandwidth(4, []int{100, 10}) }},
			{Name: "bw32k", Runs: len(x.bwModes(32<<10, 10)) * schemes, Run: func() error { return x.bandwidth(32<<10, []int{10}) }},
			{Name: "patterns", Runs: len(o.Patterns) * 2 * schemes, Run: x.patterns},
		},
	}
}

// Stack renders the stack of a run: self, one softrc port, the paper's
// receive layout and the scheme with pre buffers per peer; policy gives
// the lines that choose a policy by name (Env.PolicyLines: built in or a
// plugin).
func Stack(policy func(name string) string, scheme string, pre, maxPosted int, rnrTimer string) string {
	var b strings.Builder
	b.WriteString("job {\n  log { level = \"warn\" }\n" + experiment.Progress + "}\n")
	b.WriteString(`
btl "self" "self" {}

btl "ib" "ib0" {
  provider    = "softrc"
  address     = "127.0.0.1"
  eager_limit = "2016B" # one 2 KiB buffer less the header
`)
	if rnrTimer != "" {
		fmt.Fprintf(&b, "  min_rnr_timer = %q\n", rnrTimer)
	}
	b.WriteString("}\n\npolicy \"recvbuf\" {\n" + policy("perpeer") + "  receive_queues = \"P,2048,100,1,5\"\n}\n\n")
	b.WriteString("policy \"flow_control\" {\n" + policy("ib_"+scheme))
	switch scheme {
	case "dynamic":
		fmt.Fprintf(&b, "  initial = %d\n  max     = %d\n", pre, max(pre, maxPosted))
	default:
		fmt.Fprintf(&b, "  pre_post = %d\n", pre)
	}
	b.WriteString("}\n")
	return b.String()
}

func (x *exp) stack(scheme string, pre int) string {
	return Stack(x.PolicyLines, scheme, pre, x.Max, x.RNRTimer)
}

// latency: Fig 2.
func (x *exp) latency() error {
	sizes := []int{4, 64, 1024, 4096}
	if !x.Quick {
		sizes = []int{4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}
	}
	iters := "2000"
	if x.Quick {
		iters = "300"
	}
	var ss []string
	for _, s := range sizes {
		ss = append(ss, fmt.Sprint(s))
	}
	runs := map[string]map[int][]float64{}
	for _, sc := range Schemes {
		runs[sc] = map[int][]float64{}
		for rep := range x.Repeat() {
			jobs, err := x.Launch()
			if err != nil {
				return err
			}
			x.Begin("flowcontrol: latency %s, run %d of %d", sc, rep+1, x.Repeat())
			report, err := jobs.Bench(x.Ctx, 2, x.stack(sc, 100), "latency", "--sizes", strings.Join(ss, ","), "--iters", iters)
			if err != nil {
				return err
			}
			var r struct {
				Rows []struct {
					Size int     `json:"size"`
					Lat  float64 `json:"lat_us"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(report.Raw, &r); err != nil {
				return err
			}
			for _, row := range r.Rows {
				runs[sc][row.Size] = append(runs[sc][row.Size], row.Lat)
			}
		}
	}
	res := medians(runs)
	const table = "Fig 2 latency"
	fmt.Fprintf(x.Out, "\n== Latency, pre-post 100 (Fig 2: \"all three schemes perform comparably\") ==\n")
	fmt.Fprintf(x.Out, "%8s %10s %10s %10s   static/hw dynamic/hw  paper's trend: user-level / hardware\n", "size", "hardware", "static", "dynamic")
	for _, s := range sizes {
		h, st, d := res["hardware"][s], res["static"][s], res["dynamic"][s]
		v := x.Check(table, fmt.Sprintf("%d B", s), "the three schemes' latency comparable (user-level / hardware)", math.Max(ratio(st, h), ratio(d, h)), experiment.AtMost(1.25))
		fmt.Fprintf(x.Out, "%8d %9.2fµs %9.2fµs %9.2fµs   %8.2f %10.2f  %s\n", s, h, st, d, ratio(st, h), ratio(d, h), v)
		x.Record(table, map[string]any{"size": s, "hardware_us": h, "static_us": st, "dynamic_us": d})
	}
	return x.plot("latency", "Latency, pre-post 100 (seed 000 Fig 2)", "message size (bytes)", "one-way latency (us)", true, res)
}

// medians is the median of each scheme's runs at each x.
func medians(runs map[string]map[int][]float64) map[string]map[int]float64 {
	out := map[string]map[int]float64{}
	for sc, m := range runs {
		out[sc] = map[int]float64{}
		for k, v := range m {
			out[sc][k] = experiment.Median(v)
		}
	}
	return out
}

// bwModes are the blocking modes a bandwidth figure runs: both, or in
// quick mode the one the paper's point is clearest in (blocking at
// pre-post 10 for 4 B, where the user-level schemes get credits back
// through rendezvous; non-blocking otherwise).
func (x *exp) bwModes(size, pre int) []bool {
	switch {
	case !x.Quick:
		return []bool{true, false}
	case size <= 2048 && pre < 100:
		return []bool{true}
	}
	return []bool{false}
}

// bandwidth: Figs 3–8.
func (x *exp) bandwidth(size int, pres []int) error {
	for _, pre := range pres {
		for _, blocking := range x.bwModes(size, pre) {
			f := x.bwFig(size, pre, blocking)
			res, rows, err := x.bwRuns(f)
			if err != nil {
				return err
			}
			if err := x.bwTable(f, res, rows); err != nil {
				return err
			}
		}
	}
	return nil
}

// bwFig is one bandwidth figure: messages of size bytes with pre buffers
// pre-posted, blocking or not, over its windows, iters timed rounds each.
type bwFig struct {
	size, pre int
	blocking  bool
	windows   []int
	iters     int
}

// bwFig plans a figure: the paper's windows (up to the buffers, beyond
// them where there are few, fewer for rendezvous-sized messages), fewer
// in quick mode.
func (x *exp) bwFig(size, pre int, blocking bool) bwFig {
	windows := []int{1, 2, 4, 8, 16, 32, 64, 100}
	if pre < 100 {
		windows = []int{1, 2, 4, 8, 16, 32, 64, 128}
	}
	if size > 2048 {
		windows = []int{1, 2, 4, 8, 16, 32, 64}
	}
	if x.Quick {
		windows = slices.DeleteFunc(windows, func(w int) bool { return w == 2 || w == 4 || w == 8 || w == 32 })
	}
	iters := 300
	if size > 2048 {
		iters = 40
	}
	if x.Quick {
		iters /= 4
	}
	return bwFig{size: size, pre: pre, blocking: blocking, windows: windows, iters: iters}
}

func (f bwFig) mode() string {
	if f.blocking {
		return "blocking"
	}
	return "non-blocking"
}

// bwRuns runs the figure's test for every scheme, Repeat times, and
// returns the median bandwidth per scheme and window and the middle run's
// rows (whose counters the table shows).
func (x *exp) bwRuns(f bwFig) (map[string]map[int]float64, map[string]map[int]BWRow, error) {
	runs := map[string]map[int][]float64{}
	rows := map[string]map[int]BWRow{}
	for _, sc := range Schemes {
		runs[sc], rows[sc] = map[int][]float64{}, map[int]BWRow{}
		for rep := range x.Repeat() {
			jobs, err := x.Launch()
			if err != nil {
				return nil, nil, err
			}
			x.Begin("flowcontrol: bw %dB pre-post %d %s %s, run %d of %d", f.size, f.pre, f.mode(), sc, rep+1, x.Repeat())
			lines, err := jobs.Rank(x.Ctx, 2, x.stack(sc, f.pre), Experiment.Name,
				BWOptions{Size: f.size, Windows: f.windows, Iters: f.iters, Warmup: max(2, f.iters/10), Blocking: f.blocking})
			if err != nil {
				return nil, nil, err
			}
			for _, l := range lines {
				var r BWRow
				if err := json.Unmarshal(l, &r); err != nil {
					return nil, nil, err
				}
				runs[sc][r.Window] = append(runs[sc][r.Window], r.MBps)
				// The counters shown are the middle run's.
				if rep == x.Repeat()/2 {
					rows[sc][r.Window] = r
				}
			}
		}
	}
	return medians(runs), rows, nil
}

// bwTable prints a figure's table, each window's bandwidth per scheme and
// the counters that explain it, checks it against the paper's trend,
// records it and plots it.
func (x *exp) bwTable(f bwFig, res map[string]map[int]float64, rows map[string]map[int]BWRow) error {
	fig := bwFigure(f.size, f.pre, f.blocking)
	table := fmt.Sprintf("%s bandwidth %d B pre-post %d %s", fig, f.size, f.pre, f.mode())
	trend, cond, measure := bwTrend(f.size, f.pre)
	fmt.Fprintf(x.Out, "\n== Bandwidth of %d-byte messages, pre-post %d, %s (%s: %s) ==\n", f.size, f.pre, f.mode(), fig, trend)
	fmt.Fprintf(x.Out, "%7s %11s %11s %11s   %-44s %s\n", "window", "hardware", "static", "dynamic",
		"hw RNR NAKs | static stalls, rndv | dynamic stalls, most posted", "trend")
	for _, w := range f.windows {
		h, s, d := rows["hardware"][w], rows["static"][w], rows["dynamic"][w]
		hb, sb, db := res["hardware"][w], res["static"][w], res["dynamic"][w]
		verdict := "-"
		if v, ok := measure(w, hb, sb, db); ok {
			verdict = x.Check(table, fmt.Sprintf("window %d", w), trend, v, cond)
		}
		fmt.Fprintf(x.Out, "%7d %8.2fMB/s %8.2fMB/s %8.2fMB/s   %6d | %6d %6d | %6d %4d %13s %s\n", w,
			hb, sb, db,
			sum(h.Receiver, "rnr_naks_sent"),
			sum(s.Sender, ".stalls.peer1"), sum(s.Sender, ".rndv_no_credit.peer1"),
			sum(d.Sender, ".stalls.peer1"), sum(d.Receiver, ".posted_max.peer0"), "", verdict)
		x.Record(table, map[string]any{"window": w, "hardware_mbps": hb, "static_mbps": sb, "dynamic_mbps": db,
			"hardware_rnr_naks": sum(h.Receiver, "rnr_naks_sent"), "static_stalls": sum(s.Sender, ".stalls.peer1"),
			"dynamic_most_posted": sum(d.Receiver, ".posted_max.peer0")})
	}
	title := fmt.Sprintf("Bandwidth, %d B, pre-post %d, %s (seed 000 %s)", f.size, f.pre, f.mode(), fig)
	return x.plot(fmt.Sprintf("bw-%d-pp%d-%s", f.size, f.pre, f.mode()), title, "window size (messages)", "bandwidth (MB/s)", false, res)
}

// bwTrend is the paper's statement about a bandwidth figure and how a row
// is checked against it (ok false: the row says nothing about it).
func bwTrend(size, pre int) (string, experiment.Cond, func(w int, hw, st, dyn float64) (float64, bool)) {
	comparable := func(_ int, hw, st, dyn float64) (float64, bool) {
		return math.Min(hw, math.Min(st, dyn)) / math.Max(hw, math.Max(st, dyn)), true
	}
	switch {
	case size > 2048:
		return "all three perform well with 10 buffers (rendezvous is symmetric): slowest / fastest", experiment.AtLeast(0.7), comparable
	case pre >= 100:
		return "with enough buffers all three perform comparably: slowest / fastest", experiment.AtLeast(0.7), comparable
	}
	return "window > buffers: dynamic best, static worst (dynamic / static)", experiment.AtLeast(1.0),
		func(w int, _, st, dyn float64) (float64, bool) { return ratio(dyn, st), w > pre }
}

// bwFigure names the paper's figure for a bandwidth table.
func bwFigure(size, pre int, blocking bool) string {
	n := 3
	switch {
	case size > 2048:
		n = 7
	case pre < 100:
		n = 5
	}
	if !blocking {
		n++
	}
	return fmt.Sprintf("Fig %d", n)
}

// sum adds the metrics whose name contains sub.
func sum(m map[string]int64, sub string) int64 {
	var n int64
	for k, v := range m {
		if strings.Contains(k, sub) {
			n += v
		}
	}
	return n
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
