package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/bench"
	multirailexp "github.com/gobtl/gobtl/experiment/multirail"
)

// gobtl experiment multirail: the seed 001 §6 experiments over ib/softrc;
// gobtl experiment multirail rank: one rank of their streams (started
// through gobtl run).
func init() {
	var (
		reps  int
		quick bool
		only  []string
		plots string
	)
	cmd := &cobra.Command{
		Use:   "multirail",
		Short: "multirail experiments over ib/softrc rails (seed 001 §6): equal rails, 4x+1x rails, a loaded rail, window round robin",
		Long: `Runs the multirail experiments of seed 001 §6 between two processes under gobtl run,
over ib/softrc rails with per-port link rates, and prints the tables next to the
paper's numbers; plots go to --plots:

  equal   two 1GB/s rails vs one: latency, bandwidth, bidirectional bandwidth, 4 B to 4 MiB (Figs 5, 7, 8)
  4x1x    1GB/s + 250MB/s rails: even vs weighted 4:1 vs adaptive striping (Figs 17-19)
  load    a second job loads one rail during a long bandwidth run: bandwidth and weights every 100 ms (Fig 20)
  window  window round robin on rails of different latency: out-of-order arrivals as W grows`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "gobtl-multirail-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			multirailexp.SetProgress(cmd.ErrOrStderr())
			return multirailexp.Experiments(cmd.Context(), multirailexp.Options{
				Run: jobRunner(self, dir), Out: cmd.OutOrStdout(), Plots: plots,
				Reps: reps, Quick: quick, Only: only, Tag: fmt.Sprint(os.Getpid()),
			})
		},
	}
	cmd.Flags().IntVar(&reps, "reps", 3, "runs per measurement; the best is kept")
	cmd.Flags().BoolVar(&quick, "quick", false, "fewer sizes, shorter streams")
	cmd.Flags().StringSliceVar(&only, "only", nil, "experiments to run: "+strings.Join(multirailexp.Names, ", "))
	cmd.Flags().StringVar(&plots, "plots", "out/multirail", `directory for the plots ("" for none)`)

	var (
		size, stack        string
		window, count      int
		duration, interval time.Duration
	)
	rank := &cobra.Command{
		Use:    "rank",
		Short:  "one rank of a multirail stream (started by gobtl experiment multirail through gobtl run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sizes, err := bench.ParseSizes(size)
			if err != nil || len(sizes) != 1 {
				return fmt.Errorf("--size: want one size, got %q (%v)", size, err)
			}
			c, _, err := openComm(context.Background(), stack)
			if err != nil {
				return err
			}
			err = multirailexp.Stream(c, multirailexp.StreamOptions{
				Size: sizes[0], Window: window, Count: count, Duration: duration, Interval: interval,
			}, cmd.OutOrStdout())
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	f := rank.Flags()
	f.StringVar(&size, "size", "1MiB", "message size")
	f.IntVar(&window, "window", 16, "messages per window")
	f.IntVar(&count, "count", 0, "stop after this many messages")
	f.DurationVar(&duration, "duration", 0, "stop after this long")
	f.DurationVar(&interval, "interval", 100*time.Millisecond, "sampling period")
	f.StringVarP(&stack, "config", "c", "", "stack file (default: $GOBTL_CONFIG)")
	cmd.AddCommand(rank)
	experimentCmd.AddCommand(cmd)
}

// jobRunner runs a job of two processes over a stack written to dir.
func jobRunner(self, dir string) multirailexp.Runner {
	run := jobRunnerN(self, dir)
	return func(ctx context.Context, stack string, args []string) ([]byte, error) {
		return run(ctx, 2, stack, args)
	}
}
