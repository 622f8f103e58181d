package extoll

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/btl/extoll/velo"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/experiment/simjob"
)

// SimOptions configure SimTable3; zero fields take seed 003's values.
type SimOptions struct {
	// Nodes of the cluster (64) and the processes per node of each
	// configuration ({1, 4}); the processes of a node share its card.
	Nodes   int
	PerNode []int
	// Patterns run in each configuration ({"alltoall", "multipingpong"}:
	// Figures 16 and 17), with Size-byte messages (2048, the size that
	// stresses the mailbox most, §5.3), Warmup untimed and Iters timed
	// iterations (1 and 4; the multi-pingpong, whose iteration is one
	// message each way per pair, runs PingpongIters, 200, after 10 times
	// Warmup: long enough for the dynamic scheme to move the quota to
	// the one sender each receiver hears from).
	Patterns      []string
	Size          int
	Warmup, Iters int
	PingpongIters int
	// Slots per process of each scheme: 64 static and 16 dynamic, the
	// buffers at which each keeps the IMB overhead under 3% (§7.5, the
	// configuration of Eq. 8 and Table 3); the reference has 1024 and no
	// flow control (§5.3). CreditSlots is 2 (§7).
	StaticSlots, DynamicSlots, ReferenceSlots int
	CreditSlots                               int
	// Progress, if set, gets a line per run.
	Progress io.Writer
}

func (o *SimOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Nodes, 64)
	def(&o.Size, 2048)
	def(&o.Warmup, 1)
	def(&o.Iters, 4)
	def(&o.PingpongIters, 200)
	def(&o.StaticSlots, 64)
	def(&o.DynamicSlots, 16)
	def(&o.ReferenceSlots, 1024)
	def(&o.CreditSlots, 2)
	if len(o.PerNode) == 0 {
		o.PerNode = []int{1, 4}
	}
	if len(o.Patterns) == 0 {
		o.Patterns = []string{"alltoall", "multipingpong"}
	}
}

// SimRow is one line of the table: one scheme on one pattern at one job
// shape, on the simulated EXTOLL fabric. Everything in it is virtual
// time or counted, and the same on every run.
type SimRow struct {
	Nodes   int    `json:"nodes"`
	PerNode int    `json:"per_node"`
	Ranks   int    `json:"ranks"`
	Pattern string `json:"pattern"`
	// Scheme is "extoll_static" or "extoll_dynamic".
	Scheme       string `json:"scheme"`
	SlotsPerPeer int    `json:"slots_per_peer"`
	CreditSlots  int    `json:"credit_slots"`
	// Sends and DelayedSends over the timed iterations, all ranks: the
	// trains the engines sent and those that waited for credits.
	Sends        int64   `json:"sends"`
	DelayedSends int64   `json:"delayed_sends"`
	DelayedPct   float64 `json:"delayed_pct"`
	// Flow-control traffic over the timed iterations, all ranks.
	CreditPackets    int64 `json:"credit_packets"`
	PiggybackPackets int64 `json:"piggyback_packets"`
	Steals           int64 `json:"steals"`
	// UsPerIter is one iteration in virtual microseconds; RefUsPerIter
	// the reference's; OverheadPct = 100·(UsPerIter/RefUsPerIter − 1).
	UsPerIter    float64 `json:"us_per_iter"`
	RefUsPerIter float64 `json:"ref_us_per_iter"`
	OverheadPct  float64 `json:"overhead_pct"`
	// Memory per process: the mailbox the card maps (the largest over
	// ranks, from the simulated device's allocation), the flow-control
	// records the engine keeps for its senders (velo.Engine.StateBytes),
	// their sum, and the paper's Eq. 8 for the same n (static
	// 4n+2+4096n, dynamic 150n+1024n bytes).
	MailboxBytes int64 `json:"mailbox_bytes"`
	StateBytes   int64 `json:"state_bytes"`
	MemoryBytes  int64 `json:"memory_bytes"`
	PaperBytes   int64 `json:"paper_eq8_bytes"`
	// MaxSlotsUsed is the most mailbox slots one process had occupied at
	// once: how much of the mailbox the pattern used.
	MaxSlotsUsed int `json:"max_slots_used"`
}

// SimTable3 runs seed 003's comparison of static and dynamic credit flow
// control (§7.1 and §7.5, Table 3) on the simulated EXTOLL fabric
// (btl/extoll/simnic): Nodes nodes with each of PerNode processes per
// node, every pattern with no flow control and a huge mailbox (the
// reference), the static scheme and the dynamic one. It returns a row
// per scheme, pattern and job shape, in that nesting from the inside.
func SimTable3(ctx context.Context, o SimOptions) ([]SimRow, error) {
	o.defaults()
	var rows []SimRow
	for _, ppn := range o.PerNode {
		n := o.Nodes * ppn
		for _, pat := range o.Patterns {
			spec := Spec{Pattern: pat, Size: o.Size, Iters: o.Iters, Warmup: o.Warmup}
			if pat == "multipingpong" {
				spec.Iters, spec.Warmup = o.PingpongIters, 10*o.Warmup
			}
			ref, _, err := simRun(ctx, n, ppn, Reference(), spec, o.Progress)
			if err != nil {
				return nil, err
			}
			for _, sc := range []struct {
				scheme string
				slots  int
				eq8    int64
			}{
				{"extoll_static", o.StaticSlots, int64(4*n + 2 + 4096*n)},
				{"extoll_dynamic", o.DynamicSlots, int64(150*n + 1024*n)},
			} {
				st := Stack{Scheme: sc.scheme, SlotsPerPeer: sc.slots, CreditSlots: o.CreditSlots, Piggyback: true}
				out, res, err := simRun(ctx, n, ppn, st, spec, o.Progress)
				if err != nil {
					return nil, err
				}
				k := out.Counters
				r := SimRow{
					Nodes: o.Nodes, PerNode: ppn, Ranks: n, Pattern: pat, Scheme: sc.scheme, SlotsPerPeer: sc.slots, CreditSlots: o.CreditSlots,
					Sends: k["fc.sends"], DelayedSends: k["fc.delayed_sends"], DelayedPct: pct(k["fc.delayed_sends"], k["fc.sends"]),
					CreditPackets: k["fc.credit_packets"], PiggybackPackets: k["fc.piggyback_packets"], Steals: k["fc.steals"],
					UsPerIter: out.UsPerIter, RefUsPerIter: ref.UsPerIter, OverheadPct: 100 * (out.UsPerIter/ref.UsPerIter - 1),
					MailboxBytes: res.MaxRecvBytesPerRank, StateBytes: int64(n * velo.StateBytesPerPeer(o.CreditSlots)),
					PaperBytes: sc.eq8, MaxSlotsUsed: res.MaxSlotsUsed,
				}
				r.MemoryBytes = r.MailboxBytes + r.StateBytes
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// simRun runs spec on n simulated ranks, ppn to a card, and returns rank
// 0's outcome and the simulator's account of the run.
func simRun(ctx context.Context, n, ppn int, st Stack, spec Spec, progress io.Writer) (*Outcome, *simjob.Result, error) {
	cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "sim-extoll.hcl", Bytes: []byte(st.simHCL(ppn))})
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("extoll: sim stack %v: %w", st, conf.Err(diags))
	}
	var out *Outcome
	res, err := simjob.Run(ctx, simjob.Config{Ranks: n, Stack: cfg, Pattern: spec.Pattern, Body: func(c bench.Comm) error {
		o, err := Run(c, spec)
		if o != nil {
			out = o
		}
		return err
	}})
	if err != nil {
		return nil, nil, fmt.Errorf("extoll: sim %s, %v, %d ranks: %w", spec.Pattern, st, n, err)
	}
	if out == nil {
		return nil, nil, fmt.Errorf("extoll: sim %s, %v, %d ranks: rank 0 reported nothing", spec.Pattern, st, n)
	}
	if progress != nil {
		fmt.Fprintf(progress, "extoll sim: %s, %v, %d ranks (%d per card): %.1f µs per iteration\n", spec.Pattern, st, n, ppn, out.UsPerIter)
	}
	return out, res, nil
}

// simHCL is the stack file of a run on the simulated card: ppn processes
// share a card, and no shared-memory BTL takes their traffic.
func (s Stack) simHCL(ppn int) string {
	s.NodeSize = 0
	const block = "btl \"extoll\" \"x\" {\n"
	return strings.Replace(s.HCL(), block, fmt.Sprintf("%s  transport      = \"sim\"\n  node_size      = %d\n", block, ppn), 1)
}

// WriteSimTable prints rows as a table for people.
func WriteSimTable(w io.Writer, rows []SimRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes×ppn\tpattern\tscheme\tslots/proc\tdelayed\toverhead\tcredit pkts\tsteals\tmailbox/proc\tstate/proc\ttotal/proc\tEq. 8\tmost slots used\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d×%d\t%s\t%s\t%d\t%.2f%%\t%.2f%%\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t\n", r.Nodes, r.PerNode, r.Pattern, strings.TrimPrefix(r.Scheme, "extoll_"),
			r.SlotsPerPeer, r.DelayedPct, r.OverheadPct, r.CreditPackets, r.Steals, bytes(r.MailboxBytes), bytes(r.StateBytes), bytes(r.MemoryBytes), bytes(r.PaperBytes), r.MaxSlotsUsed)
	}
	return tw.Flush()
}
