package recvbuf

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/gobtl/gobtl/btl/ib"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/pml"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
)

// MemoryLayouts are the three receive layouts whose memory grows
// differently with the job: per-peer buffers for every peer, one shared
// receive queue, and B-SRQ (a small per-peer part and a shared slab).
var MemoryLayouts = []Layout{
	{Name: "per-peer", Policy: "perpeer"},
	{Name: "SRQ", Policy: "srq"},
	{Name: "B-SRQ", Policy: "bsrq"},
}

// memoryRanks are the job sizes whose memory is measured: a real job of
// that many ranks in this process, rank 0 connected to every other.
func memoryRanks(quick bool) []int {
	if quick {
		return []int{8, 16}
	}
	return []int{8, 16, 32, 64}
}

// tableRanks are the job sizes of the memory table, 8 to 1024.
var tableRanks = []int{8, 16, 32, 64, 128, 256, 512, 1024}

// MeasureRecvMemory opens a job of n ranks over l, connects rank 0 to
// every other rank (a message each way) and returns the receive memory
// rank 0's ib module registered: the module's own count of the buffers
// it allocated and registered (ib.recv_registered_bytes).
func MeasureRecvMemory(env *experiment.Env, l Layout, n int) (int64, error) {
	j, closeAll, err := l.opened(env).job(env.Ctx, n)
	if err != nil {
		return 0, err
	}
	defer closeAll()
	err = j.Run(func(c *pml.Comm) error {
		var b [8]byte
		if c.Rank() != 0 {
			if err := c.Send(b[:], 0, 1); err != nil {
				return err
			}
			_, err := c.Recv(b[:], 0, 2)
			return err
		}
		reqs := make([]*pml.Request, 0, 2*n)
		bufs := make([][8]byte, n)
		for p := 1; p < n; p++ {
			r, err := c.Irecv(bufs[p][:], p, 1)
			if err != nil {
				return err
			}
			s, err := c.Isend(b[:], p, 2)
			if err != nil {
				return err
			}
			reqs = append(reqs, r, s)
		}
		return c.Waitall(reqs, nil)
	})
	if err != nil {
		return 0, err
	}
	return j.Metrics[0].Gauge("ib.recv_registered_bytes").Load(), nil
}

// fit is bytes = base + perPeer·(n−1), least squares over the measured
// job sizes.
type fit struct{ base, perPeer float64 }

func fitLine(ns []int, bs []int64) fit {
	var sx, sy, sxx, sxy float64
	k := float64(len(ns))
	for i, n := range ns {
		x, y := float64(n-1), float64(bs[i])
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	if d := k*sxx - sx*sx; d != 0 {
		per := (k*sxy - sx*sy) / d
		return fit{base: (sy - per*sx) / k, perPeer: per}
	}
	return fit{base: sy / k}
}

func (f fit) at(n int) float64 { return f.base + f.perPeer*float64(n-1) }

// memory measures per-peer, SRQ and B-SRQ receive memory by job size and
// prints it to 1024 ranks beside the paper's "< 25 MB".
func memory(env *experiment.Env) error {
	w := env.Out
	const table = "§5 receive memory"
	ns := memoryRanks(env.Quick)
	fmt.Fprintf(w, "== Receive memory per process by job size (seed 002 §3, §5: runs \"constrained to an overall receive buffer\n")
	fmt.Fprintf(w, "memory footprint of less than 25 MB\" at 256 processes)\n")
	fmt.Fprintf(w, "Measured: rank 0 of a job of n ranks in this process, connected to every other rank (every peer of a\n")
	fmt.Fprintf(w, "fully connected job), reports the receive buffers its ib module allocated and registered\n")
	fmt.Fprintf(w, "(ib.recv_registered_bytes); measured at n = %v, then a least-squares line base + per-peer·(n−1)\n", ns)
	fmt.Fprintf(w, "through the measured points gives the larger jobs (marked ~).\n")
	meas := map[string][]int64{}
	fits := map[string]fit{}
	for _, l := range MemoryLayouts {
		for _, n := range ns {
			env.Begin("recvbuf: memory, %s, %d ranks", l.Name, n)
			b, err := MeasureRecvMemory(env, l, n)
			if err != nil {
				return fmt.Errorf("memory, %s, %d ranks: %w", l.Name, n, err)
			}
			meas[l.Name] = append(meas[l.Name], b)
		}
		fits[l.Name] = fitLine(ns, meas[l.Name])
	}
	fmt.Fprintf(w, "%-6s", "ranks")
	for _, l := range MemoryLayouts {
		fmt.Fprintf(w, " %14s", l.Name)
	}
	fmt.Fprintln(w)
	mib := func(v float64) string { return fmt.Sprintf("%.2f MiB", v/(1<<20)) }
	for _, n := range tableRanks {
		fmt.Fprintf(w, "%-6d", n)
		rec := map[string]any{"ranks": n}
		for _, l := range MemoryLayouts {
			i := indexOf(ns, n)
			if i >= 0 {
				fmt.Fprintf(w, " %14s", mib(float64(meas[l.Name][i])))
				rec[l.Name] = meas[l.Name][i]
			} else {
				fmt.Fprintf(w, " %14s", "~"+mib(fits[l.Name].at(n)))
				rec[l.Name+"_fit"] = fits[l.Name].at(n)
			}
		}
		fmt.Fprintln(w)
		env.Record(table, rec)
	}
	for _, l := range MemoryLayouts {
		f := fits[l.Name]
		fmt.Fprintf(w, "  %-9s base %s + %.1f KiB per peer\n", l.Name, mib(f.base), f.perPeer/1024)
	}
	pp, bs := fits["per-peer"], fits["B-SRQ"]
	cross := "never, up to 1024 ranks"
	first := 0
	for n := 2; n <= 1024; n++ {
		if bs.at(n) < pp.at(n) {
			first = n
			break
		}
	}
	if first > 0 {
		cross = fmt.Sprintf("from %d ranks on", first)
	}
	fmt.Fprintf(w, "B-SRQ's receive memory is below per-peer's %s (lines through the measured points).\n", cross)
	v256 := bs.at(256)
	fmt.Fprintf(w, "B-SRQ at 256 ranks: ~%s: %s\n", mib(v256),
		env.Check(table, "B-SRQ at 256 ranks", "B-SRQ keeps the receive memory under 25 MB at 256 processes", v256/1e6, experiment.AtMost(25)))
	fmt.Fprintf(w, "per-peer at 256 ranks: ~%s: %s\n", mib(pp.at(256)),
		env.Check(table, "per-peer / B-SRQ at 256 ranks", "B-SRQ needs far less receive memory than per-peer buffers at scale (per-peer / B-SRQ)", pp.at(256)/v256, experiment.AtLeast(2)))
	return nil
}

func indexOf(ns []int, n int) int {
	for i, v := range ns {
		if v == n {
			return i
		}
	}
	return -1
}

// percentiles prints the received sizes as seed 002's Fig. 2(a): the
// share of receives at or below each size.
func percentiles(w io.Writer, r RecvbufResult) {
	var total int64
	for _, c := range r.Sizes {
		total += c
	}
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "  received sizes (InfiniBand level, headers included), %d ranks, %s: %% of receives at or below\n  ", r.Ranks, r.Layout)
	var cum int64
	var parts []string
	for i, c := range r.Sizes {
		cum += c
		if c == 0 && cum == 0 {
			continue
		}
		label := ">" + core.FormatSize(int64(ib.SizeBounds[len(ib.SizeBounds)-1]))
		if i < len(ib.SizeBounds) {
			label = core.FormatSize(int64(ib.SizeBounds[i]))
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", label, 100*float64(cum)/float64(total)))
		if cum == total {
			break
		}
	}
	fmt.Fprintln(w, strings.Join(parts, ", "))
	// The percentiles themselves: the bucket each one falls in.
	fmt.Fprintf(w, "  percentiles:")
	for _, p := range []float64{50, 75, 90, 99} {
		cum = 0
		for i, c := range r.Sizes {
			cum += c
			if float64(cum) >= p/100*float64(total) {
				b := math.Inf(1)
				if i < len(ib.SizeBounds) {
					b = ib.SizeBounds[i]
				}
				fmt.Fprintf(w, " p%.0f <= %s", p, core.FormatSize(int64(min(b, 1<<40))))
				break
			}
		}
	}
	fmt.Fprintln(w)
}

// checkRecvbuf checks seed 002's utilization trend and prints the size
// distributions.
func checkRecvbuf(env *experiment.Env, rs []RecvbufResult) {
	for _, r := range rs {
		if strings.HasPrefix(r.Layout, "per-peer") {
			percentiles(env.Out, r)
		}
		env.Record("utilization", r)
	}
	for i, a := range rs {
		if !strings.HasPrefix(a.Layout, "per-peer") || a.Util <= 0 {
			continue
		}
		for _, b := range rs[i+1:] {
			if b.Ranks == a.Ranks && strings.HasPrefix(b.Layout, "B-SRQ (tiny 128B ×32/peer + 4MiB") {
				gain := b.Util/a.Util - 1
				fmt.Fprintf(env.Out, "  %d ranks: B-SRQ over per-peer utilization %+.0f%%: %s\n", a.Ranks, 100*gain,
					env.Check("Fig 2b utilization", fmt.Sprintf("%d ranks", a.Ranks), "B-SRQ raises MG's receive-buffer utilization by over 50% (relative gain)", gain, experiment.AtLeast(0.5)))
			}
		}
	}
}
