package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gobtl/gobtl/experiment/recvbuf"
)

var recvbufFlags struct {
	ranks  string
	cycles int
}

var recvbufCmd = &cobra.Command{
	Use:   "recvbuf",
	Short: "receive-buffer utilization of per-peer buffers vs B-SRQ over ib/softrc (seed 002 §4)",
	Long: `Recvbuf runs an MG-like workload (halo exchanges over a 3-D grid of ranks,
message sizes halving per multigrid level, an 8-byte allreduce per cycle) over
the ib BTL on softrc with Open MPI 1.2's per-peer 4KiB/32KiB buffers and with
B-SRQ, and prints buffer utilization (frame size / buffer size), registered
receive memory per process and time. The ranks run in this process, each on
its own softrc HCA.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		var rs []recvbuf.RecvbufResult
		for _, f := range strings.Split(recvbufFlags.ranks, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				return fmt.Errorf("recvbuf: --ranks %q: want numbers of at least 2", recvbufFlags.ranks)
			}
			for _, l := range append(recvbuf.Layouts, recvbuf.SmallSlab) {
				fmt.Fprintf(os.Stderr, "recvbuf: %d ranks, %s ...\n", n, l.Name)
				r, err := recvbuf.RunRecvbuf(context.Background(), n, recvbufFlags.cycles, l)
				if err != nil {
					return fmt.Errorf("recvbuf: %d ranks, %s: %w", n, l.Name, err)
				}
				rs = append(rs, r)
			}
		}
		recvbuf.PrintRecvbuf(os.Stdout, rs)
		return nil
	},
}

func init() {
	f := recvbufCmd.Flags()
	f.StringVar(&recvbufFlags.ranks, "ranks", "8,16", "job sizes")
	f.IntVar(&recvbufFlags.cycles, "cycles", 20, "V-cycles timed (after one to wire up)")
	experimentCmd.AddCommand(recvbufCmd)
}
