package extoll

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Options configure the experiments; zero fields take the defaults.
type Options struct {
	// Ranks per run (seed 003: 16 + 16 on two nodes).
	Ranks int
	// Reps repeats each timed configuration; the median is reported.
	Reps  int
	Quick bool
	// InProcess runs the ranks as goroutines of this process, each with
	// its own mailbox in /dev/shm (also when there is no launcher).
	InProcess bool
}

// Names of the experiments, in order.
var Names = []string{"memory", "pingpong", "alltoall", "active", "phases", "sm", "none"}

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
	if o.Reps <= 0 {
		o.Reps = 1
	}
	if o.Ranks <= 0 {
		o.Ranks = 16
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
	fmt.Fprintf(w, "Machine: 2 cores shared with other work, so ranks are oversubscribed %d:1 and times are noisy;\n", max(1, o.Ranks/2))
	fmt.Fprintf(w, "each time is the median of %d run(s). Overhead = time / reference - 1, the reference being no flow\n", o.Reps)
	fmt.Fprintf(w, "control and a %d-slot-per-peer mailbox (§5.3). Delayed = sends that waited for credits.\n\n", Reference().SlotsPerPeer)
	return &experiment.Plan{
		Name:   "extoll",
		Header: w.String(),
		Steps: []experiment.Step{
			{Name: "memory", Run: func() error { x.memory(); return nil }},
			{Name: "pingpong", Runs: x.sweepRuns(), Run: x.pingpong},
			{Name: "alltoall", Runs: x.sweepRuns(), Run: x.alltoall},
			{Name: "active", Runs: x.activeRuns(), Run: x.active},
			{Name: "phases", Runs: 1, Run: x.phases},
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
		return InProcess(n, st, sp)
	}
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
	for range x.Reps {
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

func (x *exp) slotsSweep() []int {
	if x.Quick {
		return []int{8, 24, 40, 58}
	}
	return []int{8, 16, 24, 32, 40, 48, 58, 64}
}

func (x *exp) creditSweep() []int {
	if x.Quick {
		return []int{1, 2, 4}
	}
	return []int{1, 2, 3, 4, 5}
}

func (x *exp) activeSlots() []int {
	if x.Quick {
		return []int{4, 8, 16, 32, 58}
	}
	return []int{4, 8, 12, 16, 24, 32, 48, 64}
}

func (x *exp) smSlots() []int {
	if x.Quick {
		return []int{8, 32}
	}
	return []int{8, 16, 32, 58}
}

func (x *exp) iters(full, quick int) int {
	if x.Quick {
		return quick
	}
	return full
}

// sweep prints overhead and delayed sends of the static scheme over
// credit slots × mailbox sizes, plus a dynamic row.
func (x *exp) sweep(sp Spec) error {
	ref, err := x.reference(sp)
	if err != nil {
		return err
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
		for _, s := range slots {
			if s < 2*st.CreditSlots {
				r.over = append(r.over, "-")
				r.delayed = append(r.delayed, "-")
				continue
			}
			st.SlotsPerPeer = s
			o, err := x.measure(st, sp)
			if err != nil {
				return err
			}
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
	return nil
}

func (x *exp) pingpong() error {
	w := x.Out
	fmt.Fprintf(w, "== Multi-pingpong, 2 KiB, %d pairs across two halves of the job (seed 003 §5.3 Figs 4-5, §7.1 Fig 17)\n", x.Ranks/2)
	fmt.Fprintln(w, "Paper: overhead is high below ~30 slots/process and small above; one credit slot gives the lowest")
	fmt.Fprintln(w, "overhead although more credit slots delay fewer sends; sends stop waiting at the same buffer size")
	fmt.Fprintln(w, "whatever the distance; the dynamic scheme's overhead is much lower (a receiver gives its whole")
	fmt.Fprintln(w, "mailbox to its one partner). Distance (hops) is not modelled here: all ranks share one host.")
	return x.sweep(Spec{Pattern: "multipingpong", Iters: x.iters(2000, 500), Warmup: 50})
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
	return x.sweep(Spec{Pattern: "alltoall", Iters: x.iters(20, 6), Warmup: 2})
}

func (x *exp) active() error {
	w := x.Out
	n := x.Ranks
	fmt.Fprintf(w, "== Alltoall of 2 KiB with a fraction of the %d ranks active, the rest in a barrier (Fig 10 static, Fig 15 dynamic)\n", n)
	fmt.Fprintln(w, "Paper: the static scheme's overhead stays high below ~55 slots/process however few ranks are active")
	fmt.Fprintln(w, "(their quota is wasted on idle senders); the dynamic scheme keeps overhead low at small mailboxes when")
	fmt.Fprintln(w, "few are active, and is about equal to static (slightly worse below 16 slots) when all are.")
	slots := x.activeSlots()
	fracs := []int{1, 2, 4, 8}
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
		sp := Spec{Pattern: "alltoall", Active: active, Iters: x.iters(20, 6), Warmup: 2}
		ref, err := x.reference(sp)
		if err != nil {
			return err
		}
		for _, scheme := range []string{"extoll_static", "extoll_dynamic"} {
			line := fmt.Sprintf("%2d active %-9s", active, strings.TrimPrefix(scheme, "extoll_"))
			delayed := fmt.Sprintf("%-20s", "   delayed sends")
			for _, s := range slots {
				o, err := x.measure(Stack{Scheme: scheme, CreditSlots: 2, SlotsPerPeer: s}, sp)
				if err != nil {
					return err
				}
				line += fmt.Sprintf("%8s", fmt.Sprintf("%.0f%%", 100*(o.UsPerIter/ref-1)))
				delayed += fmt.Sprintf("%8s", fmt.Sprintf("%.1f%%", pct(o.Counters["fc.delayed_sends"], o.Counters["fc.sends"])))
			}
			fmt.Fprintf(w, "%s   overhead (reference %.0f us)\n%s\n", line, ref, delayed)
		}
	}
	return nil
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
	fmt.Fprintf(w, "%-7s %-8s %-22s %-22s %-22s\n", "phase", "active", fmt.Sprintf("(0,%d)", q), fmt.Sprintf("[%d,%d)", q, h), fmt.Sprintf("[%d,%d)", h, n))
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
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "steals %d, compulsory requests %d (credits reclaimed %d), monitoring points %d\n",
		o.Counters["fc.steals"], o.Counters["fc.compulsory_requests"], o.Counters["fc.reclaimed_credits"], o.Counters["fc.monitoring_points"])
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

// memory is Equations 7-8 and Table 3.
func (x *exp) memory() {
	w := x.Out
	fmt.Fprintln(w, "== Memory per receiver (seed 003 §7.5, Eq. 7-8, Table 3)")
	fmt.Fprintln(w, "Paper: structures static 4n+2 B, dynamic 150n B; with the buffers that keep the IMB overhead under 3%")
	fmt.Fprintln(w, "(64 slots/process static, 16 dynamic, 64 B each): static 4n+2+4096n, dynamic 150n+1024n bytes.")
	fmt.Fprintln(w, "Here: velo's per-sender records (both directions, threshold FIFO of k+1, the credit-region guard) and")
	fmt.Fprintf(w, "extoll_dynamic's activity lists; the same mechanism serves both schemes (k=2): %d B + %d B policy per peer.\n",
		velo.StateBytesPerPeer(2), dynamicPolicyBytes)
	fmt.Fprintf(w, "%-9s %14s %14s %16s %16s\n", "n", "paper static", "paper dynamic", "here static", "here dynamic")
	for _, n := range []int{1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18} {
		ps := float64(4*n+2+4096*n) / (1 << 20)
		pd := float64(150*n+1024*n) / (1 << 20)
		hs := float64(velo.StateBytesPerPeer(2)*n+64*64*n) / (1 << 20)
		hd := float64((velo.StateBytesPerPeer(2)+dynamicPolicyBytes)*n+16*64*n) / (1 << 20)
		fmt.Fprintf(w, "%-9s %11.2f MB %11.2f MB %13.2f MB %13.2f MB\n", fmt.Sprintf("%dK", n>>10), ps, pd, hs, hd)
	}
	fmt.Fprintln(w, "Table 3 prints 4/16/64/256/1024 MB static and 1.14/4.6/18.3/73.3/293.5 MB dynamic; the buffers dominate,")
	fmt.Fprintln(w, "so the 4x saving of the dynamic scheme holds here too.")
}

// dynamicPolicyBytes is extoll_dynamic's state per sender: the intended
// quota copy (int), list links (2×int32) and list id (uint8).
const dynamicPolicyBytes = 8 + 4 + 4 + 1

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
	sp := Spec{Pattern: "alltoall", Iters: x.iters(20, 6), Warmup: 2}
	for node := n / 2; node >= 1; node /= 2 {
		ref, err := x.measure(Stack{Scheme: "none", SlotsPerPeer: Reference().SlotsPerPeer, NodeSize: node}, sp)
		if err != nil {
			return err
		}
		for _, scheme := range []string{"extoll_static", "extoll_dynamic"} {
			line := fmt.Sprintf("%5.2f%% local %-9s", 100*float64(node)/float64(n), strings.TrimPrefix(scheme, "extoll_"))
			for _, s := range slots {
				o, err := x.measure(Stack{Scheme: scheme, CreditSlots: 2, SlotsPerPeer: s, NodeSize: node}, sp)
				if err != nil {
					return err
				}
				line += fmt.Sprintf("%8s", fmt.Sprintf("%.0f%%", 100*(o.UsPerIter/ref.UsPerIter-1)))
			}
			fmt.Fprintf(w, "%s   overhead (reference %.0f us)\n", line, ref.UsPerIter)
		}
	}
	return nil
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
		fmt.Fprintf(w, "stalled, as the hardware would, and reported after the 250 ms bound:\n  %v\n", firstLine(err))
	case err != nil:
		return err
	default:
		fmt.Fprintln(w, "completed: the receivers kept up this time (no stall)")
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
	for _, f := range []int{1, 2, 4, 8} {
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
	n := 0
	for node := x.Ranks / 2; node >= 1; node /= 2 {
		n += 1 + 2*len(x.smSlots())
	}
	return n * x.Reps
}
