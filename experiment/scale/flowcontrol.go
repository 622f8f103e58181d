package scale

import (
	"fmt"
	"strings"
	"time"

	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/flowcontrol"
	"github.com/gobtl/gobtl/experiment/simjob"
	"github.com/gobtl/gobtl/internal/plot"
)

// fcRun is what one simulated pattern run under one scheme counted.
type fcRun struct {
	Pattern, Scheme string
	Ranks           int
	// Per connection that carried frames: explicit credit frames and all
	// frames (mean and largest), the most buffers posted for it.
	ECM, ECMMax, Frames float64
	Conns               int
	PostedMost          float64
	PostedMean          float64
	// Receive memory per process: the peak bytes of posted receive
	// buffers the device saw (largest and mean over ranks), and the
	// receive buffers the ib module registered (largest rank).
	RecvMax, RecvMean int64
	Registered        float64
	Virtual, Wall     time.Duration
	// Finalize is how many ranks failed their finalize after the
	// pattern (their counts are complete), FinalizeError why.
	Finalize      int
	FinalizeError string
}

// runSim runs pattern on n simulated ranks over the stack text.
func (x *exp) runSim(stack string, n int, pattern string, c simjob.Config) (*simjob.Result, time.Duration, error) {
	cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "scale.hcl", Bytes: []byte(stack)})
	if diags.HasErrors() {
		return nil, 0, conf.Err(diags)
	}
	c.Ranks, c.Stack, c.Pattern = n, cfg, pattern
	t0 := time.Now()
	res, err := simjob.Run(x.Ctx, c)
	wall := time.Since(t0)
	release()
	return res, wall, err
}

// perConn is the per-connection counter whose name ends in .name.
func perConn(r *simjob.Result, name string) *simjob.ConnStat {
	for k, v := range r.PerConn {
		if strings.HasSuffix(k, "."+name) {
			return v
		}
	}
	return &simjob.ConnStat{}
}

// counterMax is the largest value on one rank of the counter or gauge
// whose name ends in name.
func counterMax(r *simjob.Result, name string) float64 {
	m := 0.0
	for k, v := range r.CountersMax {
		if strings.HasSuffix(k, name) {
			m = max(m, v)
		}
	}
	return m
}

// alltoall patterns connect every rank to every other.
var alltoall = map[string]bool{"is": true, "ft": true}

// Seed 000's buffers at scale: hardware and static post fcPrePost per
// connection, dynamic grows to at most fcMost.
const fcPrePost, fcMost = 100, 128

// fcRuns are the runs of seed 000 at scale: [pattern][ranks][scheme].
type fcRuns map[string]map[int]map[string]*fcRun

// flowcontrol is seed 000's Tables 1 and 2 and the schemes' memory at
// scale.
func (x *exp) flowcontrol() error {
	runs, skipped, err := x.runFlowControl()
	if err != nil {
		return err
	}
	w := x.Out
	fmt.Fprintf(w, "== Seed 000 at scale: %d time step(s) of each NPB pattern (class A sizes), per-peer 2 KiB buffers ==\n", x.Iters)
	fmt.Fprintf(w, "Hardware and static post %d buffers per connection; dynamic starts at 1 and grows to at most %d. Counts are\n", fcPrePost, fcMost)
	fmt.Fprintf(w, "per connection that carried frames (ordered pair of ranks), summed over the run's steps: the paper's are per\n")
	fmt.Fprintf(w, "class A run on 8 ranks (BT, SP 16), so compare the shares and maxima, not the counts.\n")
	ecmPct := x.fcTable1(runs)
	mostPosted := x.fcTable2(runs)
	memLU := x.fcMemory(runs)
	x.fcNotes(runs, skipped)
	return x.fcFigures(ecmPct, mostPosted, memLU)
}

// runFlowControl simulates every pattern on every rank count under each
// scheme, and returns the runs and why the alltoall patterns beyond
// --alltoall-ranks were not run.
func (x *exp) runFlowControl() (fcRuns, []string, error) {
	runs := fcRuns{}
	var skipped []string
	for _, n := range x.Ranks {
		for _, p := range x.Patterns {
			if runs[p] == nil {
				runs[p] = map[int]map[string]*fcRun{}
			}
			if alltoall[p] && n > x.AlltoallRanks {
				skipped = append(skipped, fcSkipped(p, n))
				for range flowcontrol.Schemes {
					x.Begin("scale: %s on %d ranks: not run (n² connections)", p, n)
				}
				continue
			}
			runs[p][n] = map[string]*fcRun{}
			for _, sc := range flowcontrol.Schemes {
				r, err := x.runScheme(p, n, sc)
				if err != nil {
					return nil, nil, err
				}
				runs[p][n][sc] = r
				x.Record("seed 000 runs", r)
			}
		}
	}
	return runs, skipped, nil
}

// fcSkipped says why alltoall pattern p is not run on n ranks: the
// memory the pre-posting schemes would need.
func fcSkipped(p string, n int) string {
	per := float64(n-1) * fcPrePost * 2048
	return fmt.Sprintf("%s at %d ranks (--alltoall-ranks): every rank connects to %d peers; hardware and static would post %d × 2 KiB per connection, %s per rank, %.1f GiB for the job (dynamic starts at 1: %s per rank)",
		strings.ToUpper(p), n, n-1, fcPrePost, mib(per), per*float64(n)/(1<<30), mib(float64(n-1)*2048))
}

// runScheme simulates pattern p on n ranks under scheme sc and returns
// what it counted.
func (x *exp) runScheme(p string, n int, sc string) (*fcRun, error) {
	first := fcPrePost
	if sc == "dynamic" {
		first = 1 // Table 2: the dynamic scheme starts from one buffer
	}
	x.Begin("scale: %s on %d ranks, %s", p, n, sc)
	res, wall, err := x.runSim(x.stack(sc, first, fcMost), n, p, simjob.Config{Iters: x.Iters})
	if err != nil {
		return nil, fmt.Errorf("%s on %d ranks, %s: %w", p, n, sc, err)
	}
	ecm, frames, posted := perConn(res, "credit_messages"), perConn(res, "frames"), perConn(res, "posted_max")
	return &fcRun{Pattern: p, Scheme: sc, Ranks: n, ECM: ecm.Mean(), ECMMax: ecm.Max, Frames: frames.Mean(), Conns: frames.Conns,
		PostedMost: posted.Max, PostedMean: posted.Mean(), RecvMax: res.MaxRecvBytesPerRank, RecvMean: res.MeanRecvBytesPerRank,
		Registered: counterMax(res, "recv_registered_bytes"), Virtual: res.VirtualTime, Wall: wall,
		Finalize: res.FinalizeFailed, FinalizeError: res.FinalizeError}, nil
}

// fcTable1 prints and checks Table 1 at scale, and returns the ECM share
// per pattern and rank count.
func (x *exp) fcTable1(runs fcRuns) map[string]map[int]float64 {
	w := x.Out
	const t1 = "seed 000 Table 1 at scale"
	fmt.Fprintf(w, "\n-- Table 1: explicit credit messages (ECM) per connection, static scheme, threshold 5 --\n")
	fmt.Fprintf(w, "%-4s %6s %7s %10s %10s %7s %8s %9s  %s\n", "app", "ranks", "conns", "ECM", "all msgs", "ECM %", "ECM max", "paper %", "trend")
	ecmPct := map[string]map[int]float64{}
	x.each(runs, "static", func(p string, n int, r *fcRun) {
		pe := flowcontrol.PaperECM[p]
		pct := 100 * r.ECM / r.Frames
		cond := experiment.AtMost(2)
		if p == "lu" {
			cond = experiment.AtLeast(5)
		}
		v := x.Check(t1, fmt.Sprintf("%s %d ranks", strings.ToUpper(p), n), "explicit credit messages: a large share for LU, almost none elsewhere (ECM %)", pct, cond)
		fmt.Fprintf(w, "%-4s %6d %7d %10.1f %10.1f %6.1f%% %8.0f %8.1f%%  %s\n", strings.ToUpper(p), n, r.Conns, r.ECM, r.Frames, pct, r.ECMMax,
			100*float64(pe[0])/float64(pe[1]), v)
		if ecmPct[p] == nil {
			ecmPct[p] = map[int]float64{}
		}
		ecmPct[p][n] = pct
		x.Record(t1, map[string]any{"app": p, "ranks": n, "ecm": r.ECM, "all": r.Frames, "ecm_max": r.ECMMax, "connections": r.Conns})
	})
	return ecmPct
}

// fcTable2 prints and checks Table 2 at scale, and returns the most
// buffers posted per pattern and rank count.
func (x *exp) fcTable2(runs fcRuns) map[string]map[int]float64 {
	w := x.Out
	const t2 = "seed 000 Table 2 at scale"
	fmt.Fprintf(w, "\n-- Table 2: most buffers posted per connection, dynamic scheme from 1 --\n")
	fmt.Fprintf(w, "%-4s %6s %8s %8s %7s  %s\n", "app", "ranks", "most", "mean", "paper", "trend")
	mostPosted := map[string]map[int]float64{}
	x.each(runs, "dynamic", func(p string, n int, r *fcRun) {
		v := "(LU grows, as in the paper)"
		if p != "lu" {
			v = x.Check(t2, fmt.Sprintf("%s %d ranks", strings.ToUpper(p), n), "few buffers per connection for all but LU (most posted)", r.PostedMost, experiment.AtMost(7))
		}
		fmt.Fprintf(w, "%-4s %6d %8.0f %8.2f %7d  %s\n", strings.ToUpper(p), n, r.PostedMost, r.PostedMean, flowcontrol.PaperMostPosted[p], v)
		if mostPosted[p] == nil {
			mostPosted[p] = map[int]float64{}
		}
		mostPosted[p][n] = r.PostedMost
		x.Record(t2, map[string]any{"app": p, "ranks": n, "most": r.PostedMost, "mean": r.PostedMean, "paper": flowcontrol.PaperMostPosted[p]})
	})
	return mostPosted
}

// fcMemory prints and checks each scheme's receive memory per process,
// and returns LU's (KiB, largest rank) per scheme and rank count.
func (x *exp) fcMemory(runs fcRuns) map[string]map[int]float64 {
	w := x.Out
	const t3 = "seed 000 receive memory at scale"
	fmt.Fprintf(w, "\n-- Receive-buffer memory per process by scheme (seed 000 §5: pre-posted buffers grow with the connections) --\n")
	fmt.Fprintf(w, "Peak bytes of receive buffers posted on the device, largest rank (mean over ranks), as the simulated HCA saw them.\n")
	fmt.Fprintf(w, "%-4s %6s %24s %24s %24s  %s\n", "app", "ranks", "hardware", "static", "dynamic", "dynamic/static, trend")
	memLU := map[string]map[int]float64{}
	x.each(runs, "static", func(p string, n int, _ *fcRun) {
		byScheme := runs[p][n]
		fmt.Fprintf(w, "%-4s %6d", strings.ToUpper(p), n)
		for _, sc := range flowcontrol.Schemes {
			r := byScheme[sc]
			fmt.Fprintf(w, " %24s", fmt.Sprintf("%s (%s)", kib(float64(r.RecvMax)), kib(float64(r.RecvMean))))
			if p == "lu" {
				if memLU[sc] == nil {
					memLU[sc] = map[int]float64{}
				}
				memLU[sc][n] = float64(r.RecvMax) / 1024
			}
		}
		ratio := float64(byScheme["dynamic"].RecvMax) / float64(byScheme["static"].RecvMax)
		v := x.Check(t3, fmt.Sprintf("%s %d ranks", strings.ToUpper(p), n), "the dynamic scheme posts less receive memory than the static one (dynamic / static)", ratio, experiment.AtMost(1))
		fmt.Fprintf(w, "  %.3f %s\n", ratio, v)
		x.Record(t3, map[string]any{"app": p, "ranks": n, "hardware": byScheme["hardware"].RecvMax, "static": byScheme["static"].RecvMax,
			"dynamic": byScheme["dynamic"].RecvMax, "hardware_mean": byScheme["hardware"].RecvMean, "static_mean": byScheme["static"].RecvMean,
			"dynamic_mean": byScheme["dynamic"].RecvMean})
	})
	return memLU
}

// fcNotes prints the runs whose finalize failed, the runs not run, and
// every run's virtual and wall time.
func (x *exp) fcNotes(runs fcRuns, skipped []string) {
	w := x.Out
	x.each(runs, "static", func(p string, n int, _ *fcRun) {
		for _, sc := range flowcontrol.Schemes {
			if r := runs[p][n][sc]; r.Finalize > 0 {
				fmt.Fprintf(w, "FINALIZE FAILED: %s on %d ranks, %s: %d ranks after the pattern (counts complete): %s\n", strings.ToUpper(p), n, sc, r.Finalize, r.FinalizeError)
			}
		}
	})
	for _, s := range skipped {
		fmt.Fprintf(w, "not run: %s\n", s)
	}
	fmt.Fprintf(w, "\nsimulated runs (virtual time / wall time):")
	x.each(runs, "static", func(p string, n int, _ *fcRun) {
		for _, sc := range flowcontrol.Schemes {
			r := runs[p][n][sc]
			fmt.Fprintf(w, " %s/%d/%s %v/%v;", p, n, sc[:2], r.Virtual.Round(time.Microsecond), r.Wall.Round(100*time.Millisecond))
		}
	})
	fmt.Fprintln(w)
}

// fcFigures plots the ECM share and the most buffers posted per pattern,
// and LU's receive memory per scheme, over the rank counts.
func (x *exp) fcFigures(ecmPct, mostPosted, memLU map[string]map[int]float64) error {
	var ecmLines, postLines, memLines []plot.Line
	for _, p := range x.Patterns {
		ecmLines = append(ecmLines, plot.Line{Name: strings.ToUpper(p), XY: plot.Curve(ecmPct[p])})
		postLines = append(postLines, plot.Line{Name: strings.ToUpper(p), XY: plot.Curve(mostPosted[p])})
	}
	for _, sc := range flowcontrol.Schemes {
		memLines = append(memLines, plot.Line{Name: sc, XY: plot.Curve(memLU[sc])})
	}
	if err := x.Figure("scale-table1-ecm", plot.Figure{Title: "Explicit credit messages, static scheme (seed 000 Table 1)", XLabel: "ranks", YLabel: "ECM % of frames per connection", LogX: true, Lines: ecmLines}); err != nil {
		return err
	}
	if err := x.Figure("scale-table2-posted", plot.Figure{Title: "Most buffers posted per connection, dynamic (seed 000 Table 2)", XLabel: "ranks", YLabel: "buffers", LogX: true, Lines: postLines}); err != nil {
		return err
	}
	return x.Figure("scale-lu-memory", plot.Figure{Title: "LU: receive buffers posted per process", XLabel: "ranks", YLabel: "KiB (largest rank)", LogX: true, LogY: true, Lines: memLines})
}

// each calls fn for every run of scheme, by pattern then size, in the
// options' order.
func (x *exp) each(runs fcRuns, scheme string, fn func(p string, n int, r *fcRun)) {
	for _, p := range x.Patterns {
		for _, n := range x.Ranks {
			if r := runs[p][n][scheme]; r != nil {
				fn(p, n, r)
			}
		}
	}
}
