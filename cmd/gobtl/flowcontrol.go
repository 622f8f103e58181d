package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/bench"
	fcexp "github.com/gobtl/gobtl/experiment/flowcontrol"
)

// gobtl experiment flowcontrol: the seed 000 §6 experiments over
// ib/softrc; gobtl experiment flowcontrol rank: one rank of its bandwidth
// test (started through gobtl run).
func init() {
	var (
		reps, ranks, maxPosted int
		quick                  bool
		only, patterns         []string
		plots, rnrTimer        string
	)
	cmd := &cobra.Command{
		Use:   "flowcontrol",
		Short: "flow-control experiments over ib/softrc (seed 000 §6): latency, bandwidth vs window, NAS-like patterns",
		Long: `Runs the flow-control experiments of seed 000 §6 over the ib BTL on softrc,
between processes under gobtl run, for the three schemes (hardware, static,
dynamic), and prints the tables next to the paper's numbers; plots go to --plots:

  latency   ping-pong 4 B to 4 KiB, pre-post 100 (Fig 2)
  bw        4-byte messages vs window size, blocking and non-blocking, pre-post 100 and 10 (Figs 3-6)
  bw32k     32 KiB messages vs window size, pre-post 10 (Figs 7-8)
  patterns  the NAS patterns on 8 ranks: explicit credits per connection (Table 1), time (Fig 9),
            slowdown at pre-post 1 (Fig 10), the dynamic scheme's most buffers posted (Table 2)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "gobtl-flowcontrol-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			return fcexp.Experiments(cmd.Context(), fcexp.Options{
				Run: jobRunnerN(self, dir), Out: cmd.OutOrStdout(), Progress: cmd.ErrOrStderr(), Plots: plots,
				Reps: reps, Quick: quick, Only: only, Patterns: patterns, Ranks: ranks, Max: maxPosted, RNRTimer: rnrTimer,
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&reps, "reps", 1, "runs per measurement; the best is kept")
	f.BoolVar(&quick, "quick", false, "fewer points, shorter runs")
	f.StringSliceVar(&only, "only", nil, "experiments to run: "+strings.Join(fcexp.Names, ", "))
	f.StringSliceVar(&patterns, "patterns", nil, "patterns to run (default: "+strings.Join(fcexp.AllPatterns, ",")+")")
	f.IntVar(&ranks, "ranks", 8, "ranks of the pattern runs")
	f.IntVar(&maxPosted, "max", 128, "the dynamic scheme's most buffers per peer")
	f.StringVar(&rnrTimer, "rnr-timer", "", `the btl's min_rnr_timer, e.g. "100us" (default: the btl's)`)
	f.StringVar(&plots, "plots", "out/flowcontrol", `directory for the plots ("" for none)`)

	var (
		size, windows, stack string
		iters, warmup        int
		blocking             bool
	)
	rank := &cobra.Command{
		Use:    "rank",
		Short:  "one rank of the flow-control bandwidth test (started by gobtl experiment flowcontrol through gobtl run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sizes, err := bench.ParseSizes(size)
			if err != nil || len(sizes) != 1 {
				return fmt.Errorf("--size: want one size, got %q (%v)", size, err)
			}
			ws, err := bench.ParseSizes(windows)
			if err != nil {
				return fmt.Errorf("--windows: %w", err)
			}
			c, _, err := openComm(context.Background(), stack)
			if err != nil {
				return err
			}
			err = fcexp.BW(c, fcexp.BWOptions{Size: sizes[0], Windows: ws, Iters: iters, Warmup: warmup, Blocking: blocking}, cmd.OutOrStdout())
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	rf := rank.Flags()
	rf.StringVar(&size, "size", "4", "message size")
	rf.StringVar(&windows, "windows", "1,2,4,8,16,32,64", "window sizes")
	rf.IntVar(&iters, "iters", 300, "windows timed per window size")
	rf.IntVar(&warmup, "warmup", 30, "windows untimed per window size")
	rf.BoolVar(&blocking, "blocking", false, "Send/Recv instead of Isend/Irecv and Waitall")
	rf.StringVarP(&stack, "config", "c", "", "stack file (default: $GOBTL_CONFIG)")
	cmd.AddCommand(rank)
	experimentCmd.AddCommand(cmd)
}

// jobRunnerN runs a job of np processes over a stack written to dir.
func jobRunnerN(self, dir string) fcexp.Runner {
	var seq atomic.Int64
	return func(ctx context.Context, np int, stack string, args []string) ([]byte, error) {
		file := filepath.Join(dir, fmt.Sprintf("stack%d.hcl", seq.Add(1)))
		if err := os.WriteFile(file, []byte(stack), 0o644); err != nil {
			return nil, err
		}
		c := exec.CommandContext(ctx, self, append([]string{"run", "-np", fmt.Sprint(np), "-c", file, "--", self}, args...)...)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("%s: %v\n%s\nstack:\n%s", strings.Join(c.Args, " "), err, errb.String(), stack)
		}
		return out.Bytes(), nil
	}
}
