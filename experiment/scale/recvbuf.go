package scale

import (
	"fmt"
	"strings"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/recvbuf"
	"github.com/gobtl/gobtl/experiment/simjob"
	"github.com/gobtl/gobtl/internal/plot"
)

// paperBound is seed 002 §5's receive memory: B-SRQ runs were "constrained
// to an overall receive buffer memory footprint of less than 25 MB".
const paperBound = 25e6

// memBudget is the most receive-buffer memory a simulated memory job may
// allocate in all: the ranks' buffers are real Go memory, and the
// machine (23 GiB) is shared.
const memBudget = 12 << 30

// recvbuf is seed 002 at scale: receive memory per process by layout and
// job size, and buffer utilization under MG.
func (x *exp) recvbuf() error {
	w := x.Out
	fmt.Fprintf(w, "== Seed 002 at scale: receive memory per process of per-peer, SRQ and B-SRQ (the layouts' defaults) ==\n")
	fmt.Fprintf(w, "Rank 0 of an n-rank simulated job connects to every other rank (a message each way) and reports the receive\n")
	fmt.Fprintf(w, "buffers its ib module allocated and registered (ib.recv_registered_bytes): a process of a fully connected job.\n")
	fmt.Fprintf(w, "Paper (§5): under %.0f MB with B-SRQ at 256 processes.\n", paperBound/1e6)
	s := &memSweep{x: x, got: map[string]map[int]float64{}, fits: map[string]*memFit{}}
	for _, l := range recvbuf.MemoryLayouts {
		s.layout(l)
	}
	lines := x.memTable(s)
	lines = append(lines, plot.Line{Name: "seed 002: 25 MB", XY: plot.Curve(map[int]float64{x.MemRanks[0]: paperBound / (1 << 20), x.MemRanks[len(x.MemRanks)-1]: paperBound / (1 << 20)})})
	if err := x.Figure("scale-recvbuf-memory", plot.Figure{Title: "Receive memory per process (seed 002)", XLabel: "ranks", YLabel: "MiB", LogX: true, LogY: true, LegendLeft: true, Lines: lines}); err != nil {
		return err
	}
	return x.utilization()
}

// memFit is a layout's receive memory on rank 0 as a line through the
// smallest and the largest job size measured so far: bytes = a + b·n.
type memFit struct{ a, b float64 }

// memSweep measures each layout's receive memory over the job sizes,
// leaving out a size whose job would take more than memBudget.
type memSweep struct {
	x *exp
	// got[layout][n] is rank 0's receive memory in bytes on n ranks.
	got    map[string]map[int]float64
	fits   map[string]*memFit
	notRun []string
	// The ranks' own state besides the buffers — the pml's peers, the ib
	// endpoints and their counters — is per (rank, peer) pair: the Go
	// memory a job peaked at, per pair, at the largest size run so far.
	perPair float64
	pairAt  int
}

// layout measures layout l at every size of MemRanks that fits.
func (s *memSweep) layout(l recvbuf.Layout) {
	x := s.x
	s.got[l.Name] = map[int]float64{}
	var xs []int
	for _, n := range x.MemRanks {
		x.Begin("scale: receive memory, %s, %d ranks", l.Name, n)
		if why := s.overBudget(l, n); why != "" {
			s.notRun = append(s.notRun, why)
			continue
		}
		var b int64
		peak, err := peakMemory(func() error {
			var err error
			b, err = recvbuf.MeasureRecvMemorySim(x.Ctx, l, n)
			return err
		})
		release()
		if p := float64(peak) / float64(n) / float64(n); n >= s.pairAt && err == nil {
			s.perPair, s.pairAt = p, n
		}
		if err != nil {
			s.notRun = append(s.notRun, fmt.Sprintf("%s at %d ranks: %v", l.Name, n, err))
			continue
		}
		s.got[l.Name][n] = float64(b)
		xs = append(xs, n)
		if len(xs) >= 2 {
			n0, n1 := xs[0], xs[len(xs)-1]
			slope := (s.got[l.Name][n1] - s.got[l.Name][n0]) / float64(n1-n0)
			s.fits[l.Name] = &memFit{a: s.got[l.Name][n0] - slope*float64(n0), b: slope}
		} else {
			s.fits[l.Name] = &memFit{a: float64(b)}
		}
	}
}

// overBudget says why a job of layout l on n ranks would take more than
// memBudget, extrapolated from the sizes run so far, or "".
func (s *memSweep) overBudget(l recvbuf.Layout, n int) string {
	if state := s.perPair * float64(n) * float64(n); state > memBudget {
		return fmt.Sprintf("%s at %d ranks: the job's memory (the ranks' buffers and per-peer state: pml peers, ib endpoints and their counters) would take ~%.1f GiB: its peak per (rank, peer) pair, %s at %d ranks, × %d²; over this run's %d GiB",
			l.Name, n, state/(1<<30), kib(s.perPair), s.pairAt, n, memBudget>>30)
	}
	if f := s.fits[l.Name]; f != nil {
		// Rank 0 holds a + b·n; every other rank, connected to rank 0
		// alone, about a + b.
		job := f.a + f.b*float64(n) + float64(n-1)*(f.a+f.b)
		if job > memBudget {
			return fmt.Sprintf("%s at %d ranks: the job's buffers would take ~%.1f GiB (n × %s shared + rank 0's %s per peer), over this run's %d GiB; rank 0 extrapolated: %s",
				l.Name, n, job/(1<<30), mib(f.a+f.b), kib(f.b), memBudget>>30, mib(f.a+f.b*float64(n)))
		}
	}
	return ""
}

// memTable prints and checks the sweep's table, a row per job size and a
// column per layout, the layouts' lines and the sizes not run, and
// returns the layouts' curves for the figure.
func (x *exp) memTable(s *memSweep) []plot.Line {
	w := x.Out
	const table = "seed 002 receive memory at scale"
	fmt.Fprintf(w, "%-6s", "ranks")
	for _, l := range recvbuf.MemoryLayouts {
		fmt.Fprintf(w, " %14s", l.Name)
	}
	fmt.Fprintf(w, "   B-SRQ vs %.0f MB\n", paperBound/1e6)
	for _, n := range x.MemRanks {
		fmt.Fprintf(w, "%-6d", n)
		rec := map[string]any{"ranks": n}
		for _, l := range recvbuf.MemoryLayouts {
			v, ok := s.got[l.Name][n]
			if !ok {
				fmt.Fprintf(w, " %14s", "not run")
				continue
			}
			fmt.Fprintf(w, " %14s", mib(v))
			rec[l.Name] = int64(v)
		}
		verdict := ""
		if v, ok := s.got["B-SRQ"][n]; ok {
			verdict = x.Check(table, fmt.Sprintf("B-SRQ at %d ranks", n), "B-SRQ keeps the receive memory under 25 MB (MB)", v/1e6, experiment.AtMost(paperBound/1e6))
		}
		fmt.Fprintf(w, "   %s\n", verdict)
		x.Record(table, rec)
	}
	var lines []plot.Line
	for _, l := range recvbuf.MemoryLayouts {
		if f := s.fits[l.Name]; f != nil {
			fmt.Fprintf(w, "  %-9s %s + %s per peer (line through the smallest and largest measured size)\n", l.Name, mib(f.a), kib(f.b))
		}
		lines = append(lines, plot.Line{Name: l.Name, XY: plot.Curve(mibOf(s.got[l.Name]))})
	}
	for _, r := range s.notRun {
		fmt.Fprintf(w, "not run: %s\n", r)
	}
	return lines
}

func mibOf(m map[int]float64) map[int]float64 {
	out := map[int]float64{}
	for k, v := range m {
		out[k] = v / (1 << 20)
	}
	return out
}

// utilStack is the MG stack of a layout on the simulated provider: the
// policy's defaults (per-peer: Open MPI 1.2's 4 KiB and 32 KiB buffers).
func (x *exp) utilStack(policy string) string {
	return "btl \"self\" \"self\" {}\nbtl \"ib\" \"rail0\" {\n  provider = \"sim\"\n}\npolicy \"recvbuf\" {\n" + x.PolicyLines(policy) + "}\n"
}

// utilization is seed 002 §4's buffer utilization (frame size / buffer
// size, every frame received) under the MG pattern at scale.
func (x *exp) utilization() error {
	w := x.Out
	const table = "seed 002 utilization at scale"
	fmt.Fprintf(w, "\n-- Buffer utilization (frame / buffer, every frame received, wire-up included) under MG, %d time step(s) --\n", x.Iters)
	fmt.Fprintf(w, "%-6s %-9s %10s %8s %8s %16s\n", "ranks", "layout", "frames", "util", "<25%", "recv mem/proc")
	layouts := []struct{ name, policy string }{{"per-peer", "perpeer"}, {"B-SRQ", "bsrq"}}
	for _, n := range x.UtilRanks {
		util := map[string]float64{}
		for _, l := range layouts {
			x.Begin("scale: utilization, MG, %s, %d ranks", l.name, n)
			var frames, below int64
			var sum float64
			snap := func(_ int, m map[string]any) {
				for k, v := range m {
					h, ok := v.(core.HistogramSnapshot)
					if !ok || !strings.Contains(k, ".recv_util.") {
						continue
					}
					frames += h.Count
					sum += h.Mean * float64(h.Count)
					for i := 0; i < 5 && i < len(h.Counts); i++ {
						below += h.Counts[i] // buckets of 5 %: the first five are < 25 %
					}
				}
			}
			res, _, err := x.runSim(x.utilStack(l.policy), n, "mg", simjob.Config{Iters: x.Iters, Snapshot: snap})
			if err != nil {
				return fmt.Errorf("utilization, %s, %d ranks: %w", l.name, n, err)
			}
			if frames == 0 {
				return fmt.Errorf("utilization, %s, %d ranks: no frame counted", l.name, n)
			}
			u := sum / float64(frames)
			util[l.name] = u
			fmt.Fprintf(w, "%-6d %-9s %10d %7.1f%% %7.1f%% %16s\n", n, l.name, frames, 100*u, 100*float64(below)/float64(frames), mib(counterMax(res, "recv_registered_bytes")))
			if res.FinalizeFailed > 0 {
				fmt.Fprintf(w, "  FINALIZE FAILED on %d ranks after the pattern (counts complete): %s\n", res.FinalizeFailed, res.FinalizeError)
			}
			x.Record(table, map[string]any{"ranks": n, "layout": l.name, "frames": frames, "util": u, "below25": float64(below) / float64(frames),
				"recv_registered_max": counterMax(res, "recv_registered_bytes")})
		}
		gain := util["B-SRQ"]/util["per-peer"] - 1
		fmt.Fprintf(w, "  %d ranks: B-SRQ over per-peer utilization %+.0f%%: %s\n", n, 100*gain,
			x.Check(table, fmt.Sprintf("%d ranks", n), "B-SRQ raises MG's receive-buffer utilization by over 50% (relative gain)", gain, experiment.AtLeast(0.5)))
	}
	return nil
}

// peakMemory runs fn and returns the most memory the Go runtime had
// mapped meanwhile, sampled every 50 ms.
func peakMemory(fn func() error) (int64, error) {
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		m := goMemory()
		for {
			select {
			case <-stop:
				done <- max(m, goMemory())
				return
			case <-t.C:
				m = max(m, goMemory())
			}
		}
	}()
	err := fn()
	close(stop)
	return <-done, err
}
