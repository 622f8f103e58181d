package simjob

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/bench/patterns"
	"github.com/gobtl/gobtl/core"
)

// Now is the rank's virtual time: the benchmarks of package bench time
// their runs with it (core.Clock) instead of the wall clock.
func (c comm) Now() time.Duration { return c.s.Now() }

// Programs lists what a simulated job runs: the NPB patterns, then the
// osu-style benchmarks and collectives of package bench (seed 003's
// multi-pingpong among them) that time themselves on the rank's clock.
func Programs() []string {
	names := patterns.Names()
	for _, n := range bench.Names() {
		if !slices.Contains(names, n) && !wallClock[n] {
			names = append(names, n)
		}
	}
	return names
}

// wallClock are the benchmarks that time or spin on the wall clock
// (overlap's compute phases, pairs' per-size timer) or start processes
// (init): they would report the simulator's speed, not the fabric's.
var wallClock = map[string]bool{"overlap": true, "pairs": true, "init": true}

// known reports whether a simulated job can run name.
func known(name string) bool { return slices.Contains(Programs(), name) }

// program runs cfg's pattern or benchmark on one rank: its pattern stats,
// or for a benchmark nil and rank 0's report in out.
func program(c comm, cfg Config, bar *stepBar, out *bytes.Buffer) (*patterns.Stats, error) {
	if cfg.Body != nil {
		return &patterns.Stats{}, cfg.Body(c)
	}
	if _, ok := patterns.Lookup(cfg.Pattern); ok {
		o := patterns.Options{Iters: cfg.Iters, Scale: cfg.Scale, Compute: cfg.Compute}
		if c.Rank() == 0 && bar != nil {
			o.Step = bar.step
		}
		return patterns.Run(c, cfg.Pattern, o)
	}
	o := bench.Options{Sizes: cfg.Sizes, Iters: cfg.Iters, JSON: true, Out: io.Discard}
	if c.Rank() == 0 {
		o.Out = out
		if bar != nil {
			o.Progress = bar.w
		}
	}
	if _, err := bench.Run(c, cfg.Pattern, o); err != nil {
		return nil, err
	}
	return nil, nil
}

// stepBar is a progress bar over rank 0's time steps of a pattern, with
// the wall time it took and the time left at that pace.
type stepBar struct {
	w     io.Writer
	p     *mpb.Progress
	b     *mpb.Bar
	total int
}

func newStepBar(w io.Writer, cfg Config) *stepBar {
	if w == nil {
		return nil
	}
	sb := &stepBar{w: w}
	p, ok := patterns.Lookup(cfg.Pattern)
	if !ok {
		return sb // a benchmark draws its own bar over sizes
	}
	sb.total = cfg.Iters
	if sb.total <= 0 {
		sb.total = p.DefaultIters
	}
	// A slow refresh: the bar shares the cores with the simulation.
	sb.p = mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(500*time.Millisecond), mpb.WithWidth(40))
	sb.b = sb.p.AddBar(int64(sb.total),
		mpb.PrependDecorators(decor.Name(fmt.Sprintf("sim %s, %d ranks ", cfg.Pattern, cfg.Ranks)), decor.CountersNoUnit("%d/%d steps")),
		mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO), decor.Name(" "), decor.AverageETA(decor.ET_STYLE_GO)))
	return sb
}

// step is rank 0 beginning time step iter.
func (sb *stepBar) step(iter int) {
	if sb.b != nil && int64(iter) > sb.b.Current() {
		sb.b.SetCurrent(int64(min(iter, sb.total)))
	}
}

func (sb *stepBar) done() {
	if sb == nil || sb.p == nil {
		return
	}
	sb.b.SetTotal(int64(sb.total), true)
	sb.p.Wait()
	sb.p = nil
}

// writeBench prints a benchmark's rows: size, then each field.
func (r *Result) writeBench(w io.Writer) {
	var rep struct {
		Rows []map[string]any `json:"rows"`
	}
	if len(r.Bench) == 0 || json.Unmarshal(r.Bench, &rep) != nil {
		return
	}
	fmt.Fprintf(w, "benchmark rows (virtual time):\n")
	for _, row := range rep.Rows {
		fmt.Fprintf(w, "  size %-9v", row["size"])
		for _, k := range sortedKeys(row) {
			if k != "size" {
				fmt.Fprintf(w, " %s=%v", k, row[k])
			}
		}
		fmt.Fprintln(w)
	}
}

// virtualStart drops the wall-clock start-up times gobtl.Init recorded
// (core.StartupMetrics): they measure the simulator, and a benchmark that
// gathers every rank's metrics would carry them into the job's traffic,
// so that two runs of the same job differ.
func virtualStart(m *core.Metrics) {
	for _, n := range core.StartupMetrics {
		m.Gauge(n).Set(0)
	}
}
