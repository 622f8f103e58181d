package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/experiment/extoll"
	"github.com/gobtl/gobtl/experiment/flowcontrol"
	"github.com/gobtl/gobtl/experiment/multirail"
	"github.com/gobtl/gobtl/experiment/overlap"
	"github.com/gobtl/gobtl/experiment/recvbuf"
	"github.com/gobtl/gobtl/experiment/scale"
)

// experimentCmd groups the papers' experiments (package experiment): each
// runs a workload under several configurations and prints its results
// beside the papers' numbers. This file only turns flags into each
// experiment's options.
var experimentCmd = &cobra.Command{
	Use:   "experiment NAME",
	Short: "run one of the papers' experiments and print the table",
}

func init() {
	experimentCmd.AddCommand(flowcontrolCmd(), multirailCmd(), recvbufCmd(), extollCmd(), overlapCmd(), ibperfCmd(), scaleCmd(), rankCmd())
	rootCmd.AddCommand(experimentCmd)
}

// experimentCommand is the command of e: it sets up the experiment's
// environment and runs the plan. Every experiment takes the same shared
// flags, declared here once: --reps (the median of that many runs is
// reported), --quick, --plots, --json, --plugins, --plugin-dir and --only
// (the steps to run, all by default).
func experimentCommand(e *experiment.Experiment, steps []string, plan func(env *experiment.Env) *experiment.Plan) *cobra.Command {
	var only []string
	env := &experiment.Env{}
	var asJSON bool
	cmd := &cobra.Command{
		Use: e.Name, Short: e.Short, Long: e.Long, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			jobs, err := experiment.NewLauncher(self)
			if err != nil {
				return err
			}
			defer jobs.Close()
			env.Ctx, env.Out, env.Progress, env.Bar, env.Jobs = cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), stderrIsTerminal(), jobs
			if env.Quick && !cmd.Flags().Changed("reps") {
				env.Reps = 1 // quick: one run per point unless told
			}
			if asJSON {
				// The document is the standard output; the tables go
				// beside the progress.
				env.JSON, env.Out, env.Bar = cmd.OutOrStdout(), cmd.ErrOrStderr(), false
			}
			return experiment.Run(env, plan(env), only)
		},
	}
	f := cmd.Flags()
	if len(steps) > 0 {
		f.StringSliceVar(&only, "only", nil, "experiments to run: "+strings.Join(steps, ", "))
	}
	f.IntVar(&env.Reps, "reps", max(e.Reps, 1), "runs per measurement; the median is reported")
	f.BoolVar(&env.Quick, "quick", false, "fewer points and shorter runs, one run each unless --reps is given (under a minute on 2 cores)")
	f.StringVar(&env.Plots, "plots", "out/"+e.Name, `directory for the plots ("" for none)`)
	f.BoolVar(&asJSON, "json", false, "print the run as one JSON document (checks, records, load); the tables go to standard error")
	f.BoolVar(&env.Plugins, "plugins", false, "run every step twice: policies built in, then the same policies as separately compiled plugins")
	f.StringVar(&env.PluginDir, "plugin-dir", "", "directory of the plugins for --plugins (default: plugins/ beside gobtl, else bin/plugins)")
	return cmd
}

func flowcontrolCmd() *cobra.Command {
	var o flowcontrol.Options
	cmd := experimentCommand(flowcontrol.Experiment, flowcontrol.Names, func(env *experiment.Env) *experiment.Plan { return flowcontrol.New(env, o) })
	f := cmd.Flags()
	f.StringSliceVar(&o.Patterns, "patterns", nil, "patterns to run (default: "+strings.Join(flowcontrol.AllPatterns, ",")+")")
	f.IntVar(&o.Ranks, "ranks", 8, "ranks of the pattern runs")
	f.IntVar(&o.Max, "max", 128, "the dynamic scheme's most buffers per peer")
	f.StringVar(&o.RNRTimer, "rnr-timer", "", `the btl's min_rnr_timer, e.g. "100us" (default: the btl's)`)
	return cmd
}

func multirailCmd() *cobra.Command {
	var o multirail.Options
	return experimentCommand(multirail.Experiment, multirail.Names, func(env *experiment.Env) *experiment.Plan { return multirail.New(env, o) })
}

func recvbufCmd() *cobra.Command {
	var o recvbuf.Options
	cmd := experimentCommand(recvbuf.Experiment, recvbuf.Names, func(env *experiment.Env) *experiment.Plan { return recvbuf.New(env, o) })
	f := cmd.Flags()
	f.IntSliceVar(&o.Ranks, "ranks", nil, "job sizes of the utilization runs (default 8,16; --quick 8)")
	f.IntVar(&o.Cycles, "cycles", 0, "V-cycles timed, after one to wire up (default 20; --quick 5)")
	return cmd
}

func scaleCmd() *cobra.Command {
	var o scale.Options
	cmd := experimentCommand(scale.Experiment, scale.Names, func(env *experiment.Env) *experiment.Plan { return scale.New(env, o) })
	f := cmd.Flags()
	f.IntSliceVar(&o.Ranks, "ranks", nil, "seed 000's job sizes (default 64,256,1024; --quick 8,16)")
	f.StringSliceVar(&o.Patterns, "patterns", nil, "seed 000's patterns (default is,ft,lu,cg,mg,bt,sp; --quick lu,mg)")
	f.IntVar(&o.Iters, "iters", 0, "time steps per pattern run (default 2; --quick 1)")
	f.IntVar(&o.AlltoallRanks, "alltoall-ranks", 0, "largest job IS and FT run at (default 256)")
	f.IntSliceVar(&o.MemRanks, "mem-ranks", nil, "seed 002's memory job sizes (default 64,256,1024,4096; --quick 8,16)")
	f.IntSliceVar(&o.UtilRanks, "util-ranks", nil, "seed 002's utilization job sizes (default 64,256; --quick 8)")
	f.IntSliceVar(&o.CostRanks, "cost-ranks", nil, "the simulator cost's job sizes (default 256,1024,4096; --quick 16)")
	f.StringSliceVar(&o.CostPatterns, "cost-programs", nil, "what the simulator cost runs (default lu,alltoall)")
	return cmd
}

func extollCmd() *cobra.Command {
	var o extoll.Options
	cmd := experimentCommand(extoll.Experiment, extoll.Names, func(env *experiment.Env) *experiment.Plan { return extoll.New(env, o) })
	f := cmd.Flags()
	f.IntVar(&o.Ranks, "ranks", 0, "ranks per run, oversubscribing the cores (default 16; --quick 8)")
	f.BoolVar(&o.InProcess, "in-process", false, "run ranks as goroutines instead of processes")
	return cmd
}

func overlapCmd() *cobra.Command {
	var o overlap.Options
	var sizes string
	cmd := experimentCommand(overlap.Overlap, nil, func(env *experiment.Env) *experiment.Plan { return overlap.NewOverlap(env, o) })
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := bench.ParseSizes(sizes)
		if err != nil {
			return fmt.Errorf("overlap: --sizes: %w", err)
		}
		o.Sizes = s
		return run(cmd, args)
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "sizes", "64KiB,256KiB,1MiB", "message sizes")
	f.StringSliceVar(&o.Compute, "compute", []string{"100us", "200us", "500us", "1000us", "1500us", "1800us", "2000us"}, "computation times W (W = 0 gives W/T = 0 by definition)")
	f.StringSliceVar(&o.Protocols, "protocols", []string{"rdma_write", "rdma_read", "rdma_read_async"}, "rendezvous protocols")
	f.IntVar(&o.Iters, "iters", 0, "timed iterations per point (default 50; --quick 10)")
	f.BoolVar(&o.NICThread, "nic-thread", false, "run softrc's NIC work on an OS thread of its own, pinned to a free core (btl ib nic_thread = \"pinned\")")
	f.StringVar(&o.Rate, "rate", "900MB/s", `softrc link rate; the paper's 4x SDR links moved ~900MB/s, so its transfer times (and overlap ratios at a given W) match; "" is unlimited`)
	return cmd
}

func ibperfCmd() *cobra.Command {
	var o overlap.IBPerfOptions
	cmd := experimentCommand(overlap.IBPerf, nil, func(env *experiment.Env) *experiment.Plan { return overlap.NewIBPerf(env, o) })
	f := cmd.Flags()
	f.StringVar(&o.Protocol, "protocol", "rdma_read", "rendezvous protocol")
	f.IntVar(&o.Iters, "iters", 0, "latency iterations (default 20000; --quick 2000)")
	return cmd
}

// rankCmd is one rank of an experiment's job, started by the experiment
// through gobtl run (experiment.Launcher.Rank).
func rankCmd() *cobra.Command {
	var spec, stack string
	cmd := &cobra.Command{
		Use:    "rank NAME",
		Short:  "one rank of an experiment's job (started by gobtl experiment NAME through gobtl run)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, ok := experiment.Lookup(args[0])
			if !ok || e.Rank == nil {
				return fmt.Errorf("experiment rank: no rank program %q", args[0])
			}
			c, _, err := openComm(context.Background(), stack)
			if err != nil {
				return err
			}
			err = e.Rank(c, []byte(spec), cmd.OutOrStdout())
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&spec, "spec", "{}", "the run's parameters, as JSON")
	cmd.Flags().StringVarP(&stack, "config", "c", "", "stack file (default: $GOBTL_CONFIG)")
	return cmd
}
