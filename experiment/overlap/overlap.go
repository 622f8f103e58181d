package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/core"
)

// The InfiniBand experiments that need real processes: each runs the
// bench suite under the launcher over an ib/softrc stack written for the
// run, reads its JSON reports and prints them beside the papers' numbers.

// ibStack is the stack an experiment runs over: self plus one softrc rail
// with the default receive queues, its link at rate (unlimited if empty).
func ibStack(protocol, rate string) string {
	r := ""
	if rate != "" {
		r = fmt.Sprintf("  rate     = %q\n", rate)
	}
	return fmt.Sprintf(`job {
  protocol = %q
  # Two ranks share two cores: a waiting rank yields soon, so that the
  # other's device and progress goroutines get a core (seed 004 ran its
  # overlap tests on a uniprocessor kernel for the same reason).
  progress {
    spin      = 50
    yield     = 10
    sleep     = "10us"
    max_sleep = "200us"
  }
}
btl "self" "self" {}
btl "ib" "rail0" {
  provider = "softrc"
  port     = 1
%s}
`, protocol, r)
}

// benchReport is the part of a bench JSON report the experiments read.
type benchReport struct {
	Bench string           `json:"bench"`
	Rows  []map[string]any `json:"rows"`
}

func (r benchReport) value(size int, field string) (float64, bool) {
	for _, row := range r.Rows {
		if s, ok := row["size"].(float64); ok && int(s) == size {
			v, ok := row[field].(float64)
			return v, ok
		}
	}
	return 0, false
}

// runBench runs `gobtl run -np N -c stack -- gobtl bench ARGS --json` and
// decodes the report rank 0 prints.
func runBench(dir, protocol, rate string, np int, args ...string) (benchReport, error) {
	self, err := os.Executable()
	if err != nil {
		return benchReport{}, err
	}
	stack := filepath.Join(dir, protocol+"-"+strings.ReplaceAll(rate, "/", "_")+".hcl")
	if _, err := os.Stat(stack); err != nil {
		if err := os.WriteFile(stack, []byte(ibStack(protocol, rate)), 0o644); err != nil {
			return benchReport{}, err
		}
	}
	cmd := exec.Command(self, append([]string{"run", "-np", fmt.Sprint(np), "-c", stack, "--", self, "bench"}, append(args, "--json")...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return benchReport{}, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	var rep benchReport
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&rep); err != nil {
		return benchReport{}, fmt.Errorf("%s: no JSON report (%v) in %q", strings.Join(cmd.Args, " "), err, out.String())
	}
	return rep, nil
}

var overlapFlags struct {
	sizes, compute, protocols, rate string
	iters                           int
}

// Seed 004 §5.1's measured overlap for 1 MB and W = 1800 µs.
const paperOverlap = "seed 004 (1MB, W=1800us): receiver write 59%, read 62.2%, read+interrupt 99.5%; sender: read and read+interrupt nearly complete, write low"

var overlapCmd = &cobra.Command{
	Use:   "overlap",
	Short: "sender and receiver overlap W/T over ib/softrc for rdma_write, rdma_read and rdma_read_async (seed 004 §5.1)",
	Long: `Overlap runs gobtl bench overlap between two processes under gobtl run, over
an ib/softrc stack, for each rendezvous protocol and computation time W, and
prints the sender's and the receiver's overlap ratio W/T next to the paper's.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		dir, err := os.MkdirTemp("", "gobtl-overlap-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		protos := strings.Split(overlapFlags.protocols, ",")
		ws := strings.Split(overlapFlags.compute, ",")
		sizes, err := parseSizeList(overlapFlags.sizes)
		if err != nil {
			return err
		}
		// results[proto][w] is a report covering every size.
		results := map[string]map[string]benchReport{}
		for _, p := range protos {
			results[p] = map[string]benchReport{}
			for _, w := range ws {
				fmt.Fprintf(os.Stderr, "overlap: %s, W=%s ...\n", p, w)
				rep, err := runBench(dir, p, overlapFlags.rate, 2, "overlap", "--sizes", overlapFlags.sizes, "--compute", w, "--iters", fmt.Sprint(overlapFlags.iters))
				if err != nil {
					return err
				}
				results[p][w] = rep
			}
		}
		printOverlap(os.Stdout, overlapFlags.rate, sizes, ws, protos, results)
		return nil
	},
}

func printOverlap(w io.Writer, rate string, sizes []int, ws, protos []string, res map[string]map[string]benchReport) {
	link := "unlimited"
	if rate != "" {
		link = rate
	}
	fmt.Fprintf(w, "# overlap W/T over ib/softrc, two processes on two cores, link rate %s, waiters spin 50 polls then yield (seed 004 §5.1)\n", link)
	fmt.Fprintf(w, "# %s\n", paperOverlap)
	for _, side := range []string{"send", "recv"} {
		for _, sz := range sizes {
			fmt.Fprintf(w, "%s side, %s\n%-8s", map[string]string{"send": "sender", "recv": "receiver"}[side], core.FormatSize(int64(sz)), "W")
			for _, p := range protos {
				fmt.Fprintf(w, " %16s", p)
			}
			fmt.Fprintln(w)
			for _, x := range ws {
				// The W the bench measured (the bench chooses one itself
				// for a W of 0).
				label := x
				if v, ok := res[protos[0]][x].value(sz, "compute_us"); ok {
					label = fmt.Sprintf("%.0fus", v)
				}
				fmt.Fprintf(w, "%-8s", label)
				for _, p := range protos {
					v, ok := res[p][x].value(sz, "overlap_"+side)
					if ok {
						fmt.Fprintf(w, " %15.1f%%", 100*v)
					} else {
						fmt.Fprintf(w, " %16s", "-")
					}
				}
				fmt.Fprintln(w)
			}
		}
	}
}

var perfFlags struct {
	protocol string
	iters    int
}

// Open MPI ob1 + tcp over loopback, measured on this project's machine.
const ompiLatencyUs, ompiBandwidthMBs = 4.18, 5960.0

var perfCmd = &cobra.Command{
	Use:   "ibperf",
	Short: "latency and 1 MiB bandwidth of ib/softrc between two processes, against Open MPI ob1+tcp over loopback",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		dir, err := os.MkdirTemp("", "gobtl-ibperf-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		lat, err := runBench(dir, perfFlags.protocol, "", 2, "latency", "--sizes", "8", "--iters", fmt.Sprint(perfFlags.iters))
		if err != nil {
			return err
		}
		bw, err := runBench(dir, perfFlags.protocol, "", 2, "bw", "--sizes", "1MiB")
		if err != nil {
			return err
		}
		l, okL := lat.value(8, "lat_us")
		b, okB := bw.value(1<<20, "mbps")
		if !okL || !okB {
			return fmt.Errorf("ibperf: reports without lat_us or mbps: %+v %+v", lat.Rows, bw.Rows)
		}
		fmt.Printf("# ib/softrc between two processes vs Open MPI ob1+tcp over loopback (reference measured here)\n")
		fmt.Printf("%-22s %12s %12s %8s %s\n", "", "ib/softrc", "ob1+tcp", "ratio", "goal")
		fmt.Printf("%-22s %10.2fus %10.2fus %7.2fx %s\n", "latency (8 B, one-way)", l, ompiLatencyUs, l/ompiLatencyUs, "≤ 1.0x")
		fmt.Printf("%-22s %8.0fMB/s %8.0fMB/s %7.2fx %s\n", "bandwidth (1 MiB)", b, ompiBandwidthMBs, b/ompiBandwidthMBs, "≥ 0.9x")
		fmt.Printf("# measured %s on a shared machine; protocol %s\n", time.Now().Format(time.DateTime), perfFlags.protocol)
		return nil
	},
}

func parseSizeList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := core.ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, int(n))
	}
	return out, nil
}

func init() {
	f := overlapCmd.Flags()
	f.StringVar(&overlapFlags.sizes, "sizes", "64KiB,256KiB,1MiB", "message sizes")
	f.StringVar(&overlapFlags.compute, "compute", "100us,200us,500us,1000us,1500us,1800us,2000us", "computation times W (W = 0 gives W/T = 0 by definition)")
	f.StringVar(&overlapFlags.protocols, "protocols", "rdma_write,rdma_read,rdma_read_async", "rendezvous protocols")
	f.IntVar(&overlapFlags.iters, "iters", 50, "timed iterations per point")
	f.StringVar(&overlapFlags.rate, "rate", "900MB/s", `softrc link rate; the paper's 4x SDR links moved ~900MB/s, so its transfer times (and overlap ratios at a given W) match; "" is unlimited`)
	experimentCmd.AddCommand(overlapCmd)
	g := perfCmd.Flags()
	g.StringVar(&perfFlags.protocol, "protocol", "rdma_read", "rendezvous protocol")
	g.IntVar(&perfFlags.iters, "iters", 20000, "latency iterations")
	experimentCmd.AddCommand(perfCmd)
}
