package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/btl/ib/simrc"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment/simjob"
	"github.com/gobtl/gobtl/sim"
	"github.com/spf13/cobra"
)

var simFlags struct {
	np       int
	config   string
	iters    int
	scale    float64
	compute  time.Duration
	json     bool
	sizes    string
	latency  time.Duration
	overhead time.Duration
	recvOver time.Duration
	sleep    bool
	gap      time.Duration
	rate     string
	profile  string
	memprof  string
}

var simCmd = &cobra.Command{
	Use:   "sim -np N -c stack.hcl -- PATTERN",
	Short: "run an NPB pattern on N simulated ranks in one process, in virtual time",
	Long: `Sim runs every rank of an N-rank job in this process over a simulated fabric in
virtual time: the real pml, BTLs and policies of the stack file, over the
"sim" verbs provider (its ib blocks must say provider = "sim") or the
simulated EXTOLL card (its extoll blocks must say transport = "sim";
node_size ranks share a card), whose links follow LogGP (--latency,
--overhead, --gap, --rate set every port of either; unset, each device
keeps its own default). It prints virtual
time, message and frame counts (VELO packets and RMA operations on
EXTOLL), credit messages, stalls, buffers posted per connection and the
memory the BTL registered per rank (and the mailbox on EXTOLL); the same
inputs print the same output.

  gobtl sim -np 1024 -c conf/examples/sim.hcl -- lu --iters 3
  gobtl sim -np 256 -c conf/examples/sim-extoll.hcl -- lu

The osu-style benchmarks run too, timed in virtual time (latency, bw,
msgrate, the collectives, seed 003's multi-pingpong):

  gobtl sim -np 64 -c conf/examples/sim.hcl -- multi-pingpong --sizes 8,2048

Patterns and benchmarks: ` + strings.Join(simjob.Programs(), ", "),
	// -np is not a pflag-style flag (as for run): sim rewrites it and
	// parses its own arguments.
	DisableFlagParsing: true,
	RunE: func(cmd *cobra.Command, args []string) error {
		for i, a := range args {
			if a == "-np" || a == "-n" {
				args[i] = "--np"
			}
		}
		if err := cmd.Flags().Parse(args); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		if h, _ := cmd.Flags().GetBool("help"); h {
			return cmd.Help()
		}
		// Flags after "-- PATTERN" belong to the pattern run.
		if args = cmd.Flags().Args(); len(args) > 1 {
			if err := cmd.Flags().Parse(args[1:]); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			args = append(args[:1], cmd.Flags().Args()...)
		}
		if len(args) != 1 {
			return fmt.Errorf("sim: name one pattern or benchmark (%s)", strings.Join(simjob.Programs(), ", "))
		}
		f := &simFlags
		if f.config == "" {
			return fmt.Errorf("sim: -c stack.hcl is required (see conf/examples/sim.hcl)")
		}
		cfg, diags := conf.Load(conf.Options{}, strings.Split(f.config, ",")...)
		if diags.HasErrors() {
			return conf.Err(diags)
		}
		link := simrc.DefaultLink
		link.Latency, link.Overhead, link.RecvOverhead, link.Gap = f.latency, f.overhead, f.recvOver, f.gap
		if f.rate != "" {
			r, err := core.ParseRate(f.rate)
			if err != nil {
				return fmt.Errorf("sim: --rate: %w", err)
			}
			link.Rate = r
		}
		var sizes []int
		if f.sizes != "" {
			s, err := bench.ParseSizes(f.sizes)
			if err != nil {
				return fmt.Errorf("sim: --sizes: %w", err)
			}
			sizes = s
		}
		c := simjob.Config{Ranks: f.np, Stack: cfg, Pattern: args[0], Iters: f.iters, Scale: f.scale, Compute: f.compute, Sizes: sizes,
			Sched: sim.Options{SleepThrough: f.sleep}}
		// Unset, each simulated device keeps its own default link (the
		// flags' defaults are the InfiniBand one's).
		for _, n := range []string{"latency", "overhead", "gap", "rate", "recv-overhead"} {
			if cmd.Flags().Changed(n) {
				c.Link = link
			}
		}
		if stderrIsTerminal() {
			c.Progress = os.Stderr
		}
		if f.profile != "" {
			pf, err := os.Create(f.profile)
			if err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			defer pf.Close()
			if err := pprof.StartCPUProfile(pf); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		if f.memprof != "" {
			c.Peak = func() {
				runtime.GC()
				if pf, err := os.Create(f.memprof); err == nil {
					pprof.WriteHeapProfile(pf)
					pf.Close()
				}
			}
		}
		t0 := time.Now()
		res, err := simjob.Run(context.Background(), c)
		if err != nil {
			return err
		}
		if f.json {
			return res.WriteJSON(os.Stdout)
		}
		res.WriteText(os.Stdout)
		fmt.Fprintf(os.Stderr, "sim: wall time %v\n", time.Since(t0).Round(time.Millisecond))
		return nil
	},
}

func init() {
	f := simCmd.Flags()
	f.IntVar(&simFlags.np, "np", 8, "ranks (-np N)")
	f.BoolP("help", "h", false, "help for sim")
	f.StringVarP(&simFlags.config, "config", "c", "", "stack file(s), comma-separated")
	f.IntVar(&simFlags.iters, "iters", 0, "time steps (0: the pattern's default)")
	f.Float64Var(&simFlags.scale, "scale", 0, "message sizes relative to NPB class A (0: 1)")
	f.DurationVar(&simFlags.compute, "compute", 0, "virtual time of one compute phase (0: the patterns' default, negative: none)")
	f.BoolVar(&simFlags.json, "json", false, "print JSON")
	f.StringVar(&simFlags.sizes, "sizes", "", "a benchmark's message sizes, comma-separated (default: its own)")
	f.DurationVar(&simFlags.latency, "latency", simrc.DefaultLink.Latency, "LogGP L of every port")
	f.DurationVar(&simFlags.overhead, "overhead", simrc.DefaultLink.Overhead, "LogGP o")
	f.DurationVar(&simFlags.recvOver, "recv-overhead", simrc.DefaultLink.RecvOverhead, "LogGP o_r: CPU time a rank spends on each frame it receives")
	f.BoolVar(&simFlags.sleep, "sleep-through", false, "idle ranks sleep their back-off out instead of waking when a frame lands (frames batch up as on an oversubscribed machine)")
	f.DurationVar(&simFlags.gap, "gap", simrc.DefaultLink.Gap, "LogGP g")
	f.StringVar(&simFlags.rate, "rate", "", "link rate (1/G), e.g. 1GB/s (default 1GB/s)")
	f.StringVar(&simFlags.profile, "profile", "", "write a CPU profile of the simulator to this file")
	f.StringVar(&simFlags.memprof, "memprofile", "", "write a heap profile when the first rank has finished the pattern (about the peak)")
	rootCmd.AddCommand(simCmd)
}
