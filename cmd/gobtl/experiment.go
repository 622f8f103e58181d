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
	experimentCmd.AddCommand(flowcontrolCmd(), multirailCmd(), recvbufCmd(), extollCmd(), overlapCmd(), ibperfCmd(), rankCmd())
	rootCmd.AddCommand(experimentCmd)
}

// experimentCommand is the command of e: it sets up the experiment's
// environment and runs the plan. With steps it takes --only (the steps
// to run, all by default); with plots, --plots (where figures go, plots
// by default).
func experimentCommand(e *experiment.Experiment, steps []string, plots string, plan func(env *experiment.Env) *experiment.Plan) *cobra.Command {
	var only []string
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
			env := &experiment.Env{Ctx: cmd.Context(), Out: cmd.OutOrStdout(), Progress: cmd.ErrOrStderr(), Bar: stderrIsTerminal(), Jobs: jobs, Plots: plots}
			return experiment.Run(env, plan(env), only)
		},
	}
	if len(steps) > 0 {
		cmd.Flags().StringSliceVar(&only, "only", nil, "experiments to run: "+strings.Join(steps, ", "))
	}
	if plots != "" {
		cmd.Flags().StringVar(&plots, "plots", plots, `directory for the plots ("" for none)`)
	}
	return cmd
}

func flowcontrolCmd() *cobra.Command {
	var o flowcontrol.Options
	cmd := experimentCommand(flowcontrol.Experiment, flowcontrol.Names, "out/flowcontrol", func(env *experiment.Env) *experiment.Plan { return flowcontrol.New(env, o) })
	f := cmd.Flags()
	f.IntVar(&o.Reps, "reps", 1, "runs per measurement; the best is kept")
	f.BoolVar(&o.Quick, "quick", false, "fewer points, shorter runs")
	f.StringSliceVar(&o.Patterns, "patterns", nil, "patterns to run (default: "+strings.Join(flowcontrol.AllPatterns, ",")+")")
	f.IntVar(&o.Ranks, "ranks", 8, "ranks of the pattern runs")
	f.IntVar(&o.Max, "max", 128, "the dynamic scheme's most buffers per peer")
	f.StringVar(&o.RNRTimer, "rnr-timer", "", `the btl's min_rnr_timer, e.g. "100us" (default: the btl's)`)
	return cmd
}

func multirailCmd() *cobra.Command {
	var o multirail.Options
	cmd := experimentCommand(multirail.Experiment, multirail.Names, "out/multirail", func(env *experiment.Env) *experiment.Plan { return multirail.New(env, o) })
	f := cmd.Flags()
	f.IntVar(&o.Reps, "reps", 3, "runs per measurement; the best is kept")
	f.BoolVar(&o.Quick, "quick", false, "fewer sizes, shorter streams")
	return cmd
}

func recvbufCmd() *cobra.Command {
	var o recvbuf.Options
	cmd := experimentCommand(recvbuf.Experiment, nil, "", func(env *experiment.Env) *experiment.Plan { return recvbuf.New(env, o) })
	f := cmd.Flags()
	f.IntSliceVar(&o.Ranks, "ranks", []int{8, 16}, "job sizes")
	f.IntVar(&o.Cycles, "cycles", 20, "V-cycles timed (after one to wire up)")
	return cmd
}

func extollCmd() *cobra.Command {
	var o extoll.Options
	cmd := experimentCommand(extoll.Experiment, extoll.Names, "", func(env *experiment.Env) *experiment.Plan { return extoll.New(env, o) })
	f := cmd.Flags()
	f.IntVar(&o.Ranks, "ranks", 16, "ranks per run (oversubscribing the cores)")
	f.IntVar(&o.Reps, "reps", 3, "runs per configuration; the median time is reported")
	f.BoolVar(&o.Quick, "quick", false, "fewer configurations and iterations")
	f.BoolVar(&o.InProcess, "in-process", false, "run ranks as goroutines instead of processes")
	return cmd
}

func overlapCmd() *cobra.Command {
	var o overlap.Options
	var sizes string
	cmd := experimentCommand(overlap.Overlap, nil, "", func(env *experiment.Env) *experiment.Plan { return overlap.NewOverlap(env, o) })
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
	f.IntVar(&o.Iters, "iters", 50, "timed iterations per point")
	f.StringVar(&o.Rate, "rate", "900MB/s", `softrc link rate; the paper's 4x SDR links moved ~900MB/s, so its transfer times (and overlap ratios at a given W) match; "" is unlimited`)
	return cmd
}

func ibperfCmd() *cobra.Command {
	var protocol string
	var iters int
	cmd := experimentCommand(overlap.IBPerf, nil, "", func(env *experiment.Env) *experiment.Plan { return overlap.NewIBPerf(env, protocol, iters) })
	f := cmd.Flags()
	f.StringVar(&protocol, "protocol", "rdma_read", "rendezvous protocol")
	f.IntVar(&iters, "iters", 20000, "latency iterations")
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
