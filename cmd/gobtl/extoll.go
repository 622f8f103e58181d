package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/core"
	extollexp "github.com/gobtl/gobtl/experiment/extoll"
)

// gobtl experiment extoll: the seed 003 experiments on the EXTOLL BTL;
// gobtl experiment extoll-worker: one rank of one run (started by gobtl run).
func init() {
	var (
		ranks, reps   int
		quick, inproc bool
		only          []string
	)
	exp := &cobra.Command{
		Use:   "extoll",
		Short: "run the EXTOLL flow-control experiments of seed 003 and print their tables",
		Long: `Runs multi-pingpong, alltoall (all and a fraction of ranks active), the multi-phase
run and the memory model of seed 003 §5.3, §6.8 and §7 on the EXTOLL BTL with each flow
control, against a reference with a huge mailbox and no flow control, and prints the
tables next to the paper's trends. Ranks are processes under gobtl run unless
--in-process (goroutines of this process).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := extollexp.Options{Ranks: ranks, Reps: reps, Quick: quick, Only: only, Out: cmd.OutOrStdout()}
			_, _, err := rootCmd.Find([]string{"run"})
			launcher := err == nil
			if inproc || !launcher {
				o.Run, o.Mode = extollexp.InProcess, "ranks are goroutines of one process (each with its own mailbox in /dev/shm)"
				if !inproc {
					o.Mode += "; gobtl run is not compiled in"
				}
			} else {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				dir, err := os.MkdirTemp("", "gobtl-extoll-exp")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				o.Run, o.Mode = processRunner(self, dir), "ranks are processes under gobtl run"
				// Simulated nodes need btl/sm to reach only its node's ranks.
				if sm, ok := core.Lookup(core.KindBTL, "sm"); ok {
					for _, p := range sm.Params {
						o.SM = o.SM || p.Name == "node_size"
					}
				}
			}
			return extollexp.Experiments(o)
		},
	}
	exp.Flags().IntVar(&ranks, "ranks", 16, "ranks per run (oversubscribing the cores)")
	exp.Flags().IntVar(&reps, "reps", 3, "runs per configuration; the median time is reported")
	exp.Flags().BoolVar(&quick, "quick", false, "fewer configurations and iterations")
	exp.Flags().BoolVar(&inproc, "in-process", false, "run ranks as goroutines instead of processes")
	exp.Flags().StringSliceVar(&only, "only", nil, "experiments to run: "+strings.Join(extollexp.Names, ", "))

	var spec string
	worker := &cobra.Command{
		Use:    "extoll-worker",
		Short:  "one rank of an experiment run (started by gobtl experiment extoll through gobtl run)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sp extollexp.Spec
			if err := json.Unmarshal([]byte(spec), &sp); err != nil {
				return fmt.Errorf("--spec: %w", err)
			}
			c, err := gobtl.Init(context.Background(), gobtl.Options{})
			if err != nil {
				return err
			}
			out, err := extollexp.Run(c, sp)
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if out != nil {
				b, _ := json.Marshal(out)
				fmt.Fprintf(cmd.OutOrStdout(), "%s%s\n", resultPrefix, b)
			}
			return nil
		},
	}
	worker.Flags().StringVar(&spec, "spec", "", "the run's extollexp.Spec as JSON")

	// The experiments sit with the others under `gobtl experiment`; the
	// worker is the rank side of one configuration, run by the launcher.
	worker.Hidden = true
	experimentCmd.AddCommand(exp, worker)
}

const resultPrefix = "EXTOLL-RESULT "

// processRunner runs each configuration as a job of real processes:
// gobtl run -np N -c stack.hcl -- gobtl experiment extoll-worker --spec ...
func processRunner(self, dir string) extollexp.Runner {
	count := 0
	return func(n int, st extollexp.Stack, sp extollexp.Spec) (*extollexp.Outcome, error) {
		count++
		file := filepath.Join(dir, fmt.Sprintf("stack%d.hcl", count))
		if err := os.WriteFile(file, []byte(st.HCL()), 0o644); err != nil {
			return nil, err
		}
		js, _ := json.Marshal(sp)
		var stdout, stderr bytes.Buffer
		c := exec.Command(self, "run", "-np", fmt.Sprint(n), "-c", file, "--", self, "experiment", "extoll-worker", "--spec", string(js))
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		sc := bufio.NewScanner(&stdout)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, resultPrefix); i >= 0 {
				var o extollexp.Outcome
				if jerr := json.Unmarshal([]byte(line[i+len(resultPrefix):]), &o); jerr != nil {
					return nil, jerr
				}
				return &o, nil
			}
		}
		if err == nil {
			err = fmt.Errorf("no result")
		}
		return nil, fmt.Errorf("gobtl run -np %d (%v): %w: %s", n, st, err, strings.TrimSpace(stderr.String()))
	}
}
