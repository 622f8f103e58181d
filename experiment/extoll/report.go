package extoll

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/btl/extoll/velo"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
)

// Experiment is `gobtl experiment extoll`; its rank program runs one
// pattern (Run) and prints rank 0's outcome.
var Experiment = experiment.Register(&experiment.Experiment{
	Name:  "extoll",
	Short: "run the EXTOLL flow-control experiments of seed 003 and print their tables",
	Long: `Runs multi-pingpong, alltoall (all and a fraction of ranks active), the multi-phase
run and the memory model of seed 003 §5.3, §6.8 and §7 on the EXTOLL BTL with each flow
control, against a reference with a huge mailbox and no flow control, and prints the
tables next to the paper's trends. Ranks are processes under gobtl run unless
--in-process (goroutines of this process).`,
	Rank: experiment.RankOf(func(c bench.Comm, sp Spec, out io.Writer) error {
		o, err := Run(c, sp)
		if err != nil || o == nil {
			return err
		}
		return json.NewEncoder(out).Encode(o)
	}),
})

// Options configure the experiments; zero fields take the defaults. The
// shared ones (reps, quick, plugins) are the Env's.
type Options struct {
	// Ranks per run (seed 003: 16 + 16 on two nodes).
	Ranks int
	// InProcess runs the ranks as goroutines of this process, each with
	// its own mailbox in /dev/shm (also when there is no launcher).
	InProcess bool
}

// Names of the experiments, in order.
var Names = []string{"memory", "pingpong", "alltoall", "active", "phases", "handoff", "sm", "none"}

type exp struct {
	Options
	*experiment.Env
	refs map[string]float64
	// mode says how ranks run, for the header.
	mode string
	// sm says btl/sm can carry intra-node traffic (processes only).
	smNodes bool
}

// New sets the experiments up to run in env.
func New(env *experiment.Env, o Options) *experiment.Plan {
	if o.Ranks <= 0 {
		o.Ranks = 16
		if env.Quick {
			o.Ranks = 8
		}
	}
	x := &exp{Options: o, Env: env, refs: map[string]float64{}}
	switch {
	case o.InProcess || env.Jobs == nil:
		x.mode = "ranks are goroutines of one process (each with its own mailbox in /dev/shm)"
		if !o.InProcess {
			x.mode += "; gobtl run is not compiled in"
		}
	default:
		x.mode = "ranks are processes under gobtl run"
		// Simulated nodes need btl/sm to reach only its node's ranks.
		if sm, ok := core.Lookup(core.KindBTL, "sm"); ok {
			for _, p := range sm.Params {
				x.smNodes = x.smNodes || p.Name == "node_size"
			}
		}
	}
	w := &strings.Builder{}
	fmt.Fprintf(w, "EXTOLL flow control experiments (seed 003 §5.3, §6.8, §7): %d ranks, %s.\n", o.Ranks, x.mode)
	if cpus := runtime.NumCPU(); o.Ranks > cpus {
		fmt.Fprintf(w, "%d ranks on %d CPUs are oversubscribed %d:1, so times are noisy; ", o.Ranks, cpus, (o.Ranks+cpus-1)/cpus)
	}
	fmt.Fprintf(w, "each time is the median of the runs.\nOverhead = time / reference - 1, the reference being no flow control and a\n")
	fmt.Fprintf(w, "%d-slot-per-peer mailbox (§5.3). Delayed = sends that waited for credits.\n\n", Reference().SlotsPerPeer)
	return &experiment.Plan{
		Name:   "extoll",
		Header: w.String(),
		Steps: []experiment.Step{
			{Name: "memory", Runs: len(memoryNs), Run: x.memory},
			{Name: "pingpong", Runs: x.sweepRuns(), Run: x.pingpong},
			{Name: "alltoall", Runs: x.sweepRuns(), Run: x.alltoall},
			{Name: "active", Runs: x.activeRuns(), Run: x.active},
			{Name: "phases", Runs: 1, Run: x.phases},
			{Name: "handoff", Runs: 1, Run: x.handoff},
			{Name: "sm", Runs: x.smRuns(), Run: x.sm},
			{Name: "none", Runs: 1, Run: x.none},
		},
	}
}

// run runs one configuration on n ranks: processes under gobtl run, or
// goroutines of this process.
func (x *exp) run(n int, st Stack, sp Spec) (*Outcome, error) {
	x.Begin("extoll: %s, %v, %d ranks", sp.Pattern, st, n)
	if x.InProcess || x.Jobs == nil {
		if x.plugins() {
			st.Open = func() (core.FlowControl, io.Closer, error) {
				p, c, err := x.OpenPolicy(core.KindFlowControl, st.Scheme, st.params())
				if err != nil {
					return nil, nil, err
				}
				return p.(core.FlowControl), c, nil
			}
		}
		return InProcess(n, st, sp)
	}
	st.Choose = x.PolicyLines
	lines, err := x.Jobs.Rank(x.Ctx, n, st.HCL(), Experiment.Name, sp)
	if err != nil {
		return nil, fmt.Errorf("gobtl run -np %d (%v): %w", n, st, err)
	}
	var o Outcome
	if err := json.Unmarshal(lines[0], &o); err != nil {
		return nil, fmt.Errorf("%v, %s: the outcome: %w", st, sp.Pattern, err)
	}
	return &o, nil
}

// measure runs a configuration Reps times and returns the median outcome.
func (x *exp) measure(st Stack, sp Spec) (*Outcome, error) {
	var outs []*Outcome
	for range x.Repeat() {
		o, err := x.run(x.Ranks, st, sp)
		if err != nil {
			return nil, fmt.Errorf("%v, %s: %w", st, sp.Pattern, err)
		}
		outs = append(outs, o)
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].UsPerIter < outs[j].UsPerIter })
	return outs[len(outs)/2], nil
}

func (x *exp) reference(sp Spec) (float64, error) {
	key := fmt.Sprintf("%s/%d", sp.Pattern, sp.Active)
	if v, ok := x.refs[key]; ok {
		return v, nil
	}
	// The reference anchors every overhead: measure it twice as often.
	var ts []float64
	for range 2 {
		o, err := x.measure(Reference(), sp)
		if err != nil {
			return 0, err
		}
		ts = append(ts, o.UsPerIter)
	}
	x.refs[key] = (ts[0] + ts[1]) / 2
	return x.refs[key], nil
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// plugins says the policies run as plugins now.
func (x *exp) plugins() bool { return x.Mode() == "plugin" }

func (x *exp) slotsSweep() []int {
	if x.Quick {
		return []int{8, 58}
	}
	return []int{8, 16, 24, 32, 40, 48, 58, 64}
}

func (x *exp) creditSweep() []int {
	if x.Quick {
		return []int{1, 2}
	}
	return []int{1, 2, 3, 4, 5}
}

func (x *exp) activeSlots() []int {
	if x.Quick {
		return []int{8, 58}
	}
	return []int{4, 8, 12, 16, 24, 32, 48, 64}
}

func (x *exp) smSlots() []int {
	if x.Quick {
		return []int{8}
	}
	return []int{8, 16, 32, 58}
}

func (x *exp) iters(full, quick int) int {
	if x.Quick {
		return quick
	}
	return full
}

// sweepResult is a sweep's outcomes by row ("static k=2") and slots.
type sweepResult map[string]map[int]*Outcome

// delayed is the share of sends that waited for credits, in percent.
func (r sweepResult) delayed(row string, slots int) float64 {
	o := r[row][slots]
	if o == nil {
		return nan
	}
	return pct(o.Counters["fc.delayed_sends"], o.Counters["fc.sends"])
}

var nan = math.NaN()

// sweep prints overhead and delayed sends of the static scheme over
// credit slots × mailbox sizes, plus a dynamic row.
func (x *exp) sweep(sp Spec) (sweepResult, error) {
	res := sweepResult{}
	ref, err := x.reference(sp)
	if err != nil {
		return nil, err
	}
	w := x.Out
	slots := x.slotsSweep()
	head := fmt.Sprintf("%-14s", "slots/process")
	for _, s := range slots {
		head += fmt.Sprintf("%9d", s)
	}
	type row struct {
		name          string
		over, delayed []string
	}
	var rows []row
	schemes := []Stack{}
	for _, k := range x.creditSweep() {
		schemes = append(schemes, Stack{Scheme: "extoll_static", CreditSlots: k})
	}
	schemes = append(schemes, Stack{Scheme: "extoll_dynamic", CreditSlots: 2})
	for _, st := range schemes {
		r := row{name: fmt.Sprintf("%s k=%d", strings.TrimPrefix(st.Scheme, "extoll_"), st.CreditSlots)}
		res[r.name] = map[int]*Outcome{}
		for _, s := range slots {
			if s < 2*st.CreditSlots {
				r.over = append(r.over, "-")
				r.delayed = append(r.delayed, "-")
				continue
			}
			st.SlotsPerPeer = s
			o, err := x.measure(st, sp)
			if err != nil {
				return nil, err
			}
			res[r.name][s] = o
			x.Record(sp.Pattern, map[string]any{"scheme": st.Scheme, "credit_slots": st.CreditSlots, "slots_per_process": s,
				"us_per_iter": o.UsPerIter, "reference_us": ref, "counters": o.Counters})
			r.over = append(r.over, fmt.Sprintf("%.0f%%", 100*(o.UsPerIter/ref-1)))
			r.delayed = append(r.delayed, fmt.Sprintf("%.1f%%", pct(o.Counters["fc.delayed_sends"], o.Counters["fc.sends"])))
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(w, "overhead (reference %.1f us per iteration)\n%s\n", ref, head)
	for _, r := range rows {
		fmt.Fprintf(w, "%-14s", r.name)
		for _, v := range r.over {
			fmt.Fprintf(w, "%9s", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "delayed sends\n%s\n", head)
	for _, r := range rows {
		fmt.Fprintf(w, "%-14s", r.name)
		for _, v := range r.delayed {
			fmt.Fprintf(w, "%9s", v)
		}
		fmt.Fprintln(w)
	}
	return res, nil
}

// checkSweep checks the trends a sweep shares with the paper's figures:
// the static scheme's sends stop waiting as the mailbox grows, and the
// dynamic scheme delays fewer sends than the static one at the smallest
// mailbox.
func (x *exp) checkSweep(table string, res sweepResult) {
	slots := x.slotsSweep()
	lo, hi := slots[0], slots[len(slots)-1]
	drop := res.delayed("static k=2", lo) - res.delayed("static k=2", hi)
	fmt.Fprintf(x.Out, "static k=2, delayed sends at %d minus at %d slots/process: %.1f points   %s\n", lo, hi, drop,
		x.Check(table, "static k=2", "sends stop waiting for credits as the mailbox grows (delayed % small minus large mailbox)", drop, experiment.AtLeast(5)))
	d := res.delayed("dynamic k=2", lo) - res.delayed("static k=2", lo)
	fmt.Fprintf(x.Out, "at %d slots/process, delayed sends dynamic minus static k=2: %.1f points   %s\n", lo, d,
		x.Check(table, fmt.Sprintf("dynamic at %d slots", lo), "the dynamic scheme delays fewer sends than the static one in a small mailbox (dynamic − static, points)", d, experiment.AtMost(0)))
}

func (x *exp) pingpong() error {
	w := x.Out
	fmt.Fprintf(w, "== Multi-pingpong, 2 KiB, %d pairs across two halves of the job (seed 003 §5.3 Figs 4-5, §7.1 Fig 17)\n", x.Ranks/2)
	fmt.Fprintln(w, "Paper: overhead is high below ~30 slots/process and small above; one credit slot gives the lowest")
	fmt.Fprintln(w, "overhead although more credit slots delay fewer sends; sends stop waiting at the same buffer size")
	fmt.Fprintln(w, "whatever the distance; the dynamic scheme's overhead is much lower (a receiver gives its whole")
	fmt.Fprintln(w, "mailbox to its one partner). Distance (hops) is not modelled here: all ranks share one host.")
	res, err := x.sweep(Spec{Pattern: "multipingpong", Iters: x.iters(2000, 300), Warmup: 50})
	if err != nil {
		return err
	}
	x.checkSweep("Figs 4-5, 17 multi-pingpong", res)
	return nil
}

func (x *exp) alltoall() error {
	w := x.Out
	fmt.Fprintf(w, "== Alltoall of 2 KiB, all %d ranks, no collective optimisation (seed 003 §5.3 Figs 6-7, Table 2)\n", x.Ranks)
	fmt.Fprintln(w, "Paper: overhead drops once a sender's quota holds a whole 2 KiB message (37 packets) and is stable")
	fmt.Fprintln(w, "from Eq. 5's buffer: 57, 52, 50, 49 slots/process for 2-5 credit slots (Table 2; >>64 for one).")
	fmt.Fprint(w, "Eq. 4/5 here:")
	for _, k := range x.creditSweep() {
		q := 1
		for ; q-(velo.Threshold(q, k)-1) < 37; q++ {
		}
		fmt.Fprintf(w, " k=%d: %d", k, q+k)
	}
	fmt.Fprintln(w, " slots/process (the mechanism reproduces them exactly, see velo's TestEquation5...).")
	res, err := x.sweep(Spec{Pattern: "alltoall", Iters: x.iters(20, 5), Warmup: 2})
	if err != nil {
		return err
	}
	x.checkSweep("Figs 6-7 alltoall", res)
	return nil
}

func (x *exp) active() error {
	w := x.Out
	n := x.Ranks
	fmt.Fprintf(w, "== Alltoall of 2 KiB with a fraction of the %d ranks active, the rest in a barrier (Fig 10 static, Fig 15 dynamic)\n", n)
	fmt.Fprintln(w, "Paper: the static scheme's overhead stays high below ~55 slots/process however few ranks are active")
	fmt.Fprintln(w, "(their quota is wasted on idle senders); the dynamic scheme keeps overhead low at small mailboxes when")
	fmt.Fprintln(w, "few are active, and is about equal to static (slightly worse below 16 slots) when all are.")
	slots := x.activeSlots()
	fracs := x.activeFracs()
	head := fmt.Sprintf("%-20s", "slots/process")
	for _, s := range slots {
		head += fmt.Sprintf("%8d", s)
	}
	fmt.Fprintln(w, head)
	for _, f := range fracs {
		active := n / f
		if active < 2 {
			continue
		}
		sp := Spec{Pattern: "alltoall", Active: active, Iters: x.iters(20, 5), Warmup: 2}
		ref, err := x.reference(sp)
		if err != nil {
			return err
		}
		first := map[string]float64{} // delayed % at the smallest mailbox
		for _, scheme := range []string{"extoll_static", "extoll_dynamic"} {
			line := fmt.Sprintf("%2d active %-9s", active, strings.TrimPrefix(scheme, "extoll_"))
			delayed := fmt.Sprintf("%-20s", "   delayed sends")
			for _, s := range slots {
				o, err := x.measure(Stack{Scheme: scheme, CreditSlots: 2, SlotsPerPeer: s}, sp)
				if err != nil {
					return err
				}
				line += fmt.Sprintf("%8s", fmt.Sprintf("%.0f%%", 100*(o.UsPerIter/ref-1)))
				d := pct(o.Counters["fc.delayed_sends"], o.Counters["fc.sends"])
				delayed += fmt.Sprintf("%8s", fmt.Sprintf("%.1f%%", d))
				if _, ok := first[scheme]; !ok {
					first[scheme] = d
				}
				x.Record("active", map[string]any{"active": active, "scheme": scheme, "slots_per_process": s, "us_per_iter": o.UsPerIter, "reference_us": ref, "delayed_pct": d})
			}
			fmt.Fprintf(w, "%s   overhead (reference %.0f us)\n%s\n", line, ref, delayed)
		}
		if active < n {
			d := first["extoll_dynamic"] - first["extoll_static"]
			fmt.Fprintf(w, "%2d active at %d slots/process: delayed sends dynamic minus static %.1f points   %s\n", active, slots[0], d,
				x.Check("Figs 10, 15 a fraction active", fmt.Sprintf("%d of %d active", active, n), "with few senders active the dynamic scheme gives them the idle ones' quota (delayed %, dynamic − static)", d, experiment.AtMost(0)))
		}
	}
	return nil
}

// activeFracs are the fractions 1/f of ranks active.
func (x *exp) activeFracs() []int {
	if x.Quick {
		return []int{1, 4}
	}
	return []int{1, 2, 4, 8}
}

func (x *exp) phases() error {
	w := x.Out
	n := x.Ranks
	q, h := max(2, n/4), max(2, n/2)
	sp := Spec{Pattern: "phases", Iters: x.iters(10, 4), Phases: []int{n, q, h, n, h, q, n}, Groups: []int{0, q, h}}
	fmt.Fprintf(w, "== Multi-phase alltoall (seed 003 §7.3, Fig 19): %d alltoalls each over ranks [0,%d) [0,%d) [0,%d) [0,%d) [0,%d) [0,%d) [0,%d),\n",
		sp.Iters, n, q, h, n, h, q, n)
	fmt.Fprintln(w, "dynamic scheme, 30 slots/process, 2 credit slots, a barrier after each alltoall. Credits rank 0 holds")
	fmt.Fprintf(w, "toward ranks (0,%d), [%d,%d), [%d,%d): median [min, max] over the phase's iterations.\n", q, q, h, h, n)
	fmt.Fprintln(w, "Paper: the credits follow the pattern — the group in the alltoall gains, the idle groups lose (to their")
	fmt.Fprintln(w, "static slots); ranks outside every alltoall still change a little through the barriers.")
	o, err := x.run(n, Stack{Scheme: "extoll_dynamic", CreditSlots: 2, SlotsPerPeer: 30}, sp)
	if err != nil {
		return err
	}
	x.Record("phases", o)
	fmt.Fprintf(w, "%-7s %-8s %-22s %-22s %-22s\n", "phase", "active", fmt.Sprintf("(0,%d)", q), fmt.Sprintf("[%d,%d)", q, h), fmt.Sprintf("[%d,%d)", h, n))
	allActive := nan
	for ph, active := range sp.Phases {
		var cols [3][]float64
		for i, p := range o.PhaseOf {
			if p != ph {
				continue
			}
			for g := range 3 {
				if g < len(o.Credits[i]) {
					cols[g] = append(cols[g], o.Credits[i][g])
				}
			}
		}
		line := fmt.Sprintf("%-7d %-8d", ph+1, active)
		for _, c := range cols {
			line += fmt.Sprintf(" %-22s", spread(c))
		}
		switch {
		case len(cols[0]) == 0:
		case active == n:
			allActive = experiment.Median(cols[0])
		case active == q && !math.IsNaN(allActive):
			// Only the first group in the alltoall: rank 0's credits
			// toward it grow past what they were when all were active.
			r := experiment.Median(cols[0]) - allActive
			line += " " + x.Check("Fig 19 multi-phase", fmt.Sprintf("phase %d", ph+1), "credits follow the pattern: the group in the alltoall gains (median credits toward it, minus in the last all-active phase)", r, experiment.AtLeast(0.5))
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "steals %d, compulsory requests %d (credits reclaimed %d), monitoring points %d\n",
		o.Counters["fc.steals"], o.Counters["fc.compulsory_requests"], o.Counters["fc.reclaimed_credits"], o.Counters["fc.monitoring_points"])
	return nil
}

// handoff makes the compulsory credit return fire (seed 003 §6.5, Fig
// 13): rank 1 alone sends rank 0 a long stream and grows its quota; then
// the other ranks send while rank 1 is quiet, and rank 0 needs the credits
// rank 1 still holds beyond its reduced quota; then rank 1 again.
func (x *exp) handoff() error {
	w := x.Out
	n := x.Ranks
	rest := make([]int, 0, n-2)
	for r := 2; r < n; r++ {
		rest = append(rest, r)
	}
	sp := Spec{Pattern: "handoff", Iters: x.iters(150, 80), Senders: [][]int{{1}, rest, {1}, rest}}
	st := Stack{Scheme: "extoll_dynamic", CreditSlots: 2, SlotsPerPeer: 12}
	fmt.Fprintf(w, "== Compulsory credit return (seed 003 §6.5, Fig 13): a fan-in to rank 0 of %d ranks, 2 KiB messages, %d each,\n", n, sp.Iters)
	fmt.Fprintf(w, "senders by phase: rank 1 | ranks 2-%d | rank 1 | ranks 2-%d; %v.\n", n-1, n-1, st)
	fmt.Fprintln(w, "Paper: a sender that was busy and went quiet keeps credits above its reduced (intended) quota; when")
	fmt.Fprintln(w, "the monitor needs them, the receiver sends it a compulsory credit return request and it answers.")
	o, err := x.run(n, st, sp)
	if err != nil {
		return err
	}
	x.Record("handoff", o)
	fmt.Fprintf(w, "steals %d (credits %d), compulsory requests %d, responses %d, credits reclaimed %d, monitoring points %d, delayed sends %d of %d\n",
		o.Counters["fc.steals"], o.Counters["fc.stolen_credits"], o.Counters["fc.compulsory_requests"], o.Counters["fc.compulsory_responses"],
		o.Counters["fc.reclaimed_credits"], o.Counters["fc.monitoring_points"], o.Counters["fc.delayed_sends"], o.Counters["fc.sends"])
	fmt.Fprintln(w, x.Check("Fig 13 compulsory return", "handoff", "an idle sender holding credits above its quota is asked to return them (compulsory requests)",
		float64(o.Counters["fc.compulsory_requests"]), experiment.AtLeast(1)))
	return nil
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return fmt.Sprintf("%.1f [%.1f, %.1f]", s[len(s)/2], s[0], s[len(s)-1])
}

// sm is Figure 18: part of every rank's destinations on its own node, over
// shared memory, using no EXTOLL credits.
func (x *exp) sm() error {
	w := x.Out
	n := x.Ranks
	fmt.Fprintf(w, "== Alltoall of 2 KiB, %d ranks, node-local peers over btl/sm using no credits (seed 003 §7.2, Fig 18)\n", n)
	fmt.Fprintln(w, "Paper: with 25% or more of the destinations on the node the dynamic scheme's overhead is lower than")
	fmt.Fprintln(w, "the static one's (the local peers' quota goes to remote ones); at 12.5% and 6.25% they are similar.")
	if !x.smNodes {
		fmt.Fprintln(w, "skipped: needs ranks that are processes (gobtl run) and a btl/sm that can pretend nodes")
		fmt.Fprintln(w, "(a node_size parameter, as btl/extoll has): on one host sm reaches every rank and, with its")
		fmt.Fprintln(w, "higher exclusivity, would carry all the traffic, leaving EXTOLL none.")
		return nil
	}
	slots := x.smSlots()
	head := fmt.Sprintf("%-26s", "slots/process")
	for _, s := range slots {
		head += fmt.Sprintf("%8d", s)
	}
	fmt.Fprintln(w, head)
	sp := Spec{Pattern: "alltoall", Iters: x.iters(20, 5), Warmup: 2}
	for _, node := range x.smNodeSizes() {
		ref, err := x.measure(Stack{Scheme: "none", SlotsPerPeer: Reference().SlotsPerPeer, NodeSize: node}, sp)
		if err != nil {
			return err
		}
		first := map[string]float64{}
		for _, scheme := range []string{"extoll_static", "extoll_dynamic"} {
			line := fmt.Sprintf("%5.2f%% local %-9s", 100*float64(node)/float64(n), strings.TrimPrefix(scheme, "extoll_"))
			for _, s := range slots {
				o, err := x.measure(Stack{Scheme: scheme, CreditSlots: 2, SlotsPerPeer: s, NodeSize: node}, sp)
				if err != nil {
					return err
				}
				over := 100 * (o.UsPerIter/ref.UsPerIter - 1)
				if _, ok := first[scheme]; !ok {
					first[scheme] = over
				}
				line += fmt.Sprintf("%8s", fmt.Sprintf("%.0f%%", over))
				x.Record("sm", map[string]any{"node_size": node, "scheme": scheme, "slots_per_process": s, "us_per_iter": o.UsPerIter, "reference_us": ref.UsPerIter})
			}
			fmt.Fprintf(w, "%s   overhead (reference %.0f us)\n", line, ref.UsPerIter)
		}
		if 4*node >= n {
			d := first["extoll_dynamic"] - first["extoll_static"]
			fmt.Fprintf(w, "%5.2f%% local at %d slots/process: overhead dynamic minus static %.0f points   %s\n", 100*float64(node)/float64(n), slots[0], d,
				x.Check("Fig 18 node-local peers", fmt.Sprintf("%.0f%% local", 100*float64(node)/float64(n)), "with >= 25% of the destinations local, the dynamic scheme's overhead is below the static one's (points, dynamic − static)", d, experiment.AtMost(0)))
		}
	}
	return nil
}

// smNodeSizes are the simulated node sizes of sm: n/2 down to 1 (quick:
// n/4, the 25% of Fig 18's threshold).
func (x *exp) smNodeSizes() []int {
	if x.Quick {
		return []int{max(1, x.Ranks/4)}
	}
	var s []int
	for node := x.Ranks / 2; node >= 1; node /= 2 {
		s = append(s, node)
	}
	return s
}

// none shows what the hardware does without flow control.
func (x *exp) none() error {
	w := x.Out
	fmt.Fprintln(w, "== No flow control, 2 KiB alltoall into a 4-slot-per-process mailbox (seed 003 §2, §4)")
	fmt.Fprintln(w, "Paper: the hardware has no end-to-end flow control; a full mailbox blocks the sender, so software")
	fmt.Fprintln(w, "flow control is required for the system to work at all.")
	st := Stack{Scheme: "none", SlotsPerPeer: 4, StallTimeout: 250 * time.Millisecond}
	_, err := x.run(x.Ranks, st, Spec{Pattern: "alltoall", Iters: 3})
	switch {
	case errors.Is(err, core.ErrStalled) || (err != nil && strings.Contains(err.Error(), core.ErrStalled.Error())):
		fmt.Fprintf(w, "stalled, as the hardware would, and reported after the 250 ms bound:\n  %v\n  %s\n", firstLine(err),
			x.Check("§2 no flow control", "4 slots/process", "without software flow control a full mailbox blocks the senders (stalled: 1)", 1, experiment.AtLeast(1)))
	case err != nil:
		return err
	default:
		fmt.Fprintf(w, "completed: the receivers kept up this time (no stall)   %s\n",
			x.Check("§2 no flow control", "4 slots/process", "without software flow control a full mailbox blocks the senders (stalled: 1)", 0, experiment.AtLeast(1)))
	}
	return nil
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// sweepRuns counts the runs of a sweep: the reference twice, then each
// scheme at each mailbox size that holds its credit slots, Reps times.
func (x *exp) sweepRuns() int {
	n := 0
	for _, k := range append(x.creditSweep(), 2) {
		for _, s := range x.slotsSweep() {
			if s >= 2*k {
				n++
			}
		}
	}
	return (2 + n) * x.Reps
}

// activeRuns counts the runs of active: per fraction of active ranks, the
// reference twice and both schemes at each mailbox size, Reps times.
func (x *exp) activeRuns() int {
	n := 0
	for _, f := range x.activeFracs() {
		if x.Ranks/f >= 2 {
			n += 2 + 2*len(x.activeSlots())
		}
	}
	return n * x.Reps
}

// smRuns counts the runs of sm: per node size, the reference and both
// schemes at each mailbox size, Reps times.
func (x *exp) smRuns() int {
	if !x.smNodes {
		return 0
	}
	n := len(x.smNodeSizes()) * (1 + 2*len(x.smSlots()))
	return n * x.Reps
}
