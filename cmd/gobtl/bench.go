package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/gobtl/gobtl/bench"
	_ "github.com/gobtl/gobtl/bench/patterns" // the NPB patterns are benchmarks too
	"github.com/gobtl/gobtl/boot"
	"github.com/spf13/cobra"
)

var benchFlags struct {
	sizes   string
	iters   int
	warmup  int
	window  int
	compute time.Duration
	scale   float64
	json    bool
	config  string
	profile string
}

var benchCmd = &cobra.Command{
	Use:   "bench NAME",
	Short: "run an osu-style benchmark (under gobtl run)",
	Long: `Bench runs one benchmark of the osu-style suite on every rank of the job; rank 0
prints an OSU-like table, or with --json one JSON object: gobtl's version, the
host and the start time, and per size the result with the minimum, median and
maximum over the timed iterations, the iterations counted, and every rank's
counters (rank_counters). Start it under the launcher:

  gobtl run -np 2 -- gobtl bench latency
  gobtl run -np 2 -- gobtl bench bw --sizes 64KiB,1MiB,4MiB --json

The NPB patterns of seed 000 §6.3 (is, ft, cg, mg, lu, bt, sp) run on any
number of ranks (cg: a power of two); class A used 8. They take --iters (time
steps), --scale (message sizes relative to class A) and --compute (the spin of
a compute phase), and report every rank's counters with --json:

  gobtl run -np 8 -c conf/examples/ib.hcl -- gobtl bench lu --json

Benchmarks:
` + benchList(),
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		o := bench.Options{
			Iters: benchFlags.iters, Warmup: benchFlags.warmup, Window: benchFlags.window,
			Compute: benchFlags.compute, Scale: benchFlags.scale, JSON: benchFlags.json, Out: os.Stdout,
		}
		if benchFlags.sizes != "" {
			s, err := bench.ParseSizes(benchFlags.sizes)
			if err != nil {
				return fmt.Errorf("bench: --sizes: %w", err)
			}
			o.Sizes = s
		}
		if stderrIsTerminal() {
			o.Progress = os.Stderr
		}
		comm, config, err := openComm(context.Background(), benchFlags.config)
		if err != nil {
			return err // gobtl.Init's, which names itself
		}
		defer comm.Close()
		if benchFlags.profile != "" {
			f, err := os.Create(fmt.Sprintf("%s.%d", benchFlags.profile, comm.Rank()))
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		o.Config = config
		_, err = bench.Run(comm, args[0], o)
		return err
	},
}

// stderrIsTerminal says whether progress bars can be drawn: standard
// error is a terminal, or the launcher says a rank's is forwarded to one.
func stderrIsTerminal() bool {
	if os.Getenv(boot.EnvStderrTTY) == "1" {
		return true
	}
	st, err := os.Stderr.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func benchList() string {
	var b strings.Builder
	for _, n := range bench.Names() {
		fmt.Fprintf(&b, "  %-15s %s\n", n, bench.Doc(n))
	}
	return b.String()
}

func init() {
	f := benchCmd.Flags()
	f.StringVar(&benchFlags.sizes, "sizes", "", `message sizes: a list "8,1KiB,64k" or a range of powers of two "1:4MiB" (default: per benchmark)`)
	f.IntVar(&benchFlags.iters, "iters", 0, "timed iterations per size (default: by size, as osu): round trips (latency, multi-pingpong), windows of --window messages (bw, bibw, as osu_bw), messages (msgrate, run in whole windows), calls (alltoall); patterns: time steps (default: per pattern)")
	f.IntVar(&benchFlags.warmup, "warmup", 0, "untimed iterations per size, counted as --iters (default: a tenth of --iters)")
	f.IntVar(&benchFlags.window, "window", 64, "messages in flight for bw, bibw and msgrate")
	f.DurationVar(&benchFlags.compute, "compute", 0, "overlap: computation time W (default: twice the transfer time); patterns: spin per compute phase (default 2µs; none: --compute=-1ns)")
	f.Float64Var(&benchFlags.scale, "scale", 0, "patterns: message sizes as a fraction of NPB class A's (default: per pattern)")
	f.BoolVar(&benchFlags.json, "json", false, "print one JSON object instead of a table")
	f.StringVarP(&benchFlags.config, "config", "c", "", "stack file (default: $GOBTL_CONFIG, else the default stack)")
	f.StringVar(&benchFlags.profile, "cpuprofile", "", "write each rank's CPU profile to FILE.<rank>")
	rootCmd.AddCommand(benchCmd)
}
