package recvbuf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/btl/ib"
	// The simulated verbs provider of the large memory jobs.
	_ "github.com/gobtl/gobtl/btl/ib/simrc"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
	"github.com/gobtl/gobtl/pml"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
	"github.com/gobtl/gobtl/sim"
)

// MemoryLayouts are the three receive layouts whose memory grows
// differently with the job: per-peer buffers for every peer, one shared
// receive queue, and B-SRQ (a small per-peer part and a shared slab).
var MemoryLayouts = []Layout{
	{Name: "per-peer", Policy: "perpeer"},
	{Name: "SRQ", Policy: "srq"},
	{Name: "B-SRQ", Policy: "bsrq"},
}

// memoryRanks are the job sizes whose memory is measured on softrc: a
// real job of that many ranks in this process, rank 0 connected to every
// other.
func memoryRanks(quick bool) []int {
	if quick {
		return []int{8, 16}
	}
	return []int{8, 16, 32, 64}
}

// simRanks are the larger job sizes, measured with the same job on the
// simulated verbs provider (btl/ib/simrc) in virtual time: a softrc job
// is a TCP connection and a goroutine or two per rank and peer, which
// 1024 ranks on two cores do not afford. TestSimAndSoftrcRegisterAlike
// pins that both providers make the ib module register the same bytes.
func simRanks(quick bool) []int {
	if quick {
		return []int{256}
	}
	return []int{128, 256, 512, 1024}
}

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
	if err := j.Run(connectAll); err != nil {
		return 0, err
	}
	return j.Metrics[0].Gauge("ib.recv_registered_bytes").Load(), nil
}

// connectWindow is how many connections rank 0 sets up at once. All
// 1023 peers of a 1024-rank job asking rank 0 at once outrun its
// connection manager: requests are retransmitted until cm_retries gives
// up (seen on the simulator from about 400 ranks). The buffers a
// connection registers do not depend on who asked or when.
const connectWindow = 32

// connectAll is the memory job on one rank: rank 0 exchanges a message
// with every other rank, connectWindow peers at a time, which connects
// it to all of them.
func connectAll(c *pml.Comm) error {
	var b [8]byte
	n := c.Size()
	if c.Rank() != 0 {
		if _, err := c.Recv(b[:], 0, 2); err != nil {
			return err
		}
		return c.Send(b[:], 0, 1)
	}
	reqs := make([]*pml.Request, 0, 2*connectWindow)
	bufs := make([][8]byte, n)
	for lo := 1; lo < n; lo += connectWindow {
		reqs = reqs[:0]
		for p := lo; p < min(lo+connectWindow, n); p++ {
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
		if err := c.Waitall(reqs, nil); err != nil {
			return err
		}
	}
	return nil
}

var simSeq atomic.Int64

// errMeasured ends a simulated memory job without the pml's finalize.
var errMeasured = errors.New("recvbuf: measured")

// MeasureRecvMemorySim is MeasureRecvMemory with the job's n ranks on
// the simulated provider under package sim's scheduler: the same ib
// module, policy, pml and job, the fabric and time simulated.
func MeasureRecvMemorySim(ctx context.Context, l Layout, n int) (int64, error) {
	s := sim.New(fmt.Sprintf("recvbuf-mem-%d-%d", os.Getpid(), simSeq.Add(1)), n, sim.Options{})
	if err := s.Register(); err != nil {
		return 0, fmt.Errorf("recvbuf: %w", err)
	}
	defer s.Unregister()
	comp, ok := core.Lookup(core.KindBTL, "ib")
	if !ok {
		return 0, fmt.Errorf("recvbuf: the ib BTL is not registered")
	}
	open, closePlugins := l.policies()
	defer closePlugins()
	comms := make([]*pml.Comm, n)
	s.OnStall(func(err error) {
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
			}
		}
	})
	got := int64(-1)
	err := s.Run(func(r int) error {
		p := core.MustParams(ib.Params)
		if err := p.SetText("provider", "sim"); err != nil {
			return fmt.Errorf("recvbuf: %w", err)
		}
		env := core.BTLEnv{Params: p, Boot: s.Boot(r), Clock: s, Log: zerolog.Nop(), Metrics: core.NewMetrics()}
		pol, err := open()
		if err != nil {
			return err
		}
		env.RecvBuffers = pol
		mods, err := comp.OpenBTL(env)
		if err != nil {
			return fmt.Errorf("recvbuf: open rank %d: %w", r, err)
		}
		defer func() {
			for _, m := range mods {
				m.Close()
			}
		}()
		if err := env.Boot.Fence(ctx); err != nil {
			return err
		}
		c, err := pml.New(r, n, mods, pml.Options{Clock: s, Metrics: env.Metrics, Log: zerolog.Nop()})
		if err != nil {
			return fmt.Errorf("recvbuf: rank %d: %w", r, err)
		}
		comms[r] = c
		if err := connectAll(c); err != nil {
			c.Abort(err)
			c.Close()
			return err
		}
		if r == 0 {
			got = env.Metrics.Gauge("ib.recv_registered_bytes").Load()
		}
		// Every rank has received what it waits for, so no message is owed
		// once all have come this far. The finalize barrier would connect
		// each rank to log2(n) more peers — per-peer buffers for each, 6 GB
		// at 1024 ranks — and a rank that leaves it may close its device
		// with a barrier frame still queued behind a connection being set
		// up, which stalls the rest (seen at 64 ranks and up). The
		// scheduler's fence, a barrier outside the fabric, ends the job.
		if err := env.Boot.Fence(ctx); err != nil {
			return err
		}
		c.Abort(errMeasured)
		return c.Close()
	})
	if err != nil {
		return 0, fmt.Errorf("recvbuf: simulated job of %d ranks: %w", n, err)
	}
	if got < 0 {
		return 0, fmt.Errorf("recvbuf: simulated job of %d ranks: rank 0 did not finish", n)
	}
	return got, nil
}

// memoryRow is one job size of the memory table.
type memoryRow struct {
	ranks int
	// on is the provider the job ran on: softrc or sim.
	on    string
	bytes map[string]int64
}

// memory measures per-peer, SRQ and B-SRQ receive memory by job size, to
// 1024 ranks, and prints it beside the paper's "< 25 MB".
func memory(env *experiment.Env) error {
	w := env.Out
	const table = "§5 receive memory"
	soft, simulated := memoryRanks(env.Quick), simRanks(env.Quick)
	fmt.Fprintf(w, "== Receive memory per process by job size (seed 002 §3, §5: runs \"constrained to an overall receive buffer\n")
	fmt.Fprintf(w, "memory footprint of less than 25 MB\" at 256 processes)\n")
	fmt.Fprintf(w, "Measured: rank 0 of a job of n ranks in this process, connected to every other rank (every peer of a\n")
	fmt.Fprintf(w, "fully connected job), reports the receive buffers its ib module allocated and registered\n")
	fmt.Fprintf(w, "(ib.recv_registered_bytes). n = %v run on softrc; n = %v run the same job, module and policy on\n", soft, simulated)
	fmt.Fprintf(w, "the simulated provider (simrc, virtual time), which registers the same bytes as softrc (tested at 8 and 16 ranks).\n")
	if env.Mode() == "plugin" {
		fmt.Fprintf(w, "The simulated sizes open the built-in policies: a plugin process per simulated rank is more processes than\n")
		fmt.Fprintf(w, "this machine runs; the policy code is the same.\n")
	}
	var rows []memoryRow
	for _, n := range soft {
		row := memoryRow{ranks: n, on: "softrc", bytes: map[string]int64{}}
		for _, l := range MemoryLayouts {
			env.Begin("recvbuf: memory, %s, %d ranks", l.Name, n)
			b, err := MeasureRecvMemory(env, l, n)
			if err != nil {
				return fmt.Errorf("memory, %s, %d ranks: %w", l.Name, n, err)
			}
			row.bytes[l.Name] = b
		}
		rows = append(rows, row)
	}
	for _, n := range simulated {
		row := memoryRow{ranks: n, on: "sim", bytes: map[string]int64{}}
		for _, l := range MemoryLayouts {
			env.Begin("recvbuf: memory, %s, %d ranks (simulated)", l.Name, n)
			b, err := MeasureRecvMemorySim(env.Ctx, l, n)
			// Every simulated rank allocated its buffers (an SRQ's 4.5 MiB
			// times 1024): give them back before the next job.
			debug.FreeOSMemory()
			if err != nil {
				return fmt.Errorf("memory, %s, %d ranks (simulated): %w", l.Name, n, err)
			}
			row.bytes[l.Name] = b
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(w, "%-6s %-7s", "ranks", "on")
	for _, l := range MemoryLayouts {
		fmt.Fprintf(w, " %14s", l.Name)
	}
	fmt.Fprintln(w)
	mib := func(v float64) string { return fmt.Sprintf("%.2f MiB", v/(1<<20)) }
	for _, r := range rows {
		fmt.Fprintf(w, "%-6d %-7s", r.ranks, r.on)
		rec := map[string]any{"ranks": r.ranks, "provider": r.on}
		for _, l := range MemoryLayouts {
			fmt.Fprintf(w, " %14s", mib(float64(r.bytes[l.Name])))
			rec[l.Name] = r.bytes[l.Name]
		}
		fmt.Fprintln(w)
		env.Record(table, rec)
	}
	first, last := rows[0], rows[len(rows)-1]
	for _, l := range MemoryLayouts {
		per := float64(last.bytes[l.Name]-first.bytes[l.Name]) / float64(last.ranks-first.ranks)
		fmt.Fprintf(w, "  %-9s %s at %d ranks, then %.1f KiB per further peer (measured, %d to %d ranks)\n",
			l.Name, mib(float64(first.bytes[l.Name])), first.ranks, per/1024, first.ranks, last.ranks)
	}
	fmt.Fprintf(w, "B-SRQ's receive memory is below per-peer's %s.\n", crossing(rows))
	r256 := rowAt(rows, 256)
	if r256 == nil {
		fmt.Fprintf(w, "256 ranks not measured: %s\n",
			env.Unshown(table, "B-SRQ at 256 ranks", "B-SRQ keeps the receive memory under 25 MB at 256 processes", "no 256-rank job was measured"))
		return nil
	}
	bs, pp := float64(r256.bytes["B-SRQ"]), float64(r256.bytes["per-peer"])
	fmt.Fprintf(w, "B-SRQ at 256 ranks: %s: %s\n", mib(bs),
		env.Check(table, "B-SRQ at 256 ranks", "B-SRQ keeps the receive memory under 25 MB at 256 processes", bs/1e6, experiment.AtMost(25)))
	fmt.Fprintf(w, "per-peer at 256 ranks: %s: %s\n", mib(pp),
		env.Check(table, "per-peer / B-SRQ at 256 ranks", "B-SRQ needs far less receive memory than per-peer buffers at scale (per-peer / B-SRQ)", pp/bs, experiment.AtLeast(2)))
	return nil
}

// crossing says from which job size on B-SRQ's measured memory is below
// per-peer's: the first measured size, and where the lines through the
// measured sizes either side of it cross (both grow linearly in the peers).
func crossing(rows []memoryRow) string {
	below := func(r memoryRow) bool { return r.bytes["B-SRQ"] < r.bytes["per-peer"] }
	for i, r := range rows {
		if !below(r) {
			continue
		}
		if i == 0 {
			return fmt.Sprintf("at every measured size (from %d ranks on)", r.ranks)
		}
		p := rows[i-1]
		d0 := float64(p.bytes["per-peer"] - p.bytes["B-SRQ"])
		d1 := float64(r.bytes["per-peer"] - r.bytes["B-SRQ"])
		at := float64(p.ranks) + float64(r.ranks-p.ranks)*(-d0)/(d1-d0)
		return fmt.Sprintf("from %d ranks on, measured (at %d it is not; between them the lines cross at ~%.0f ranks)", r.ranks, p.ranks, at)
	}
	return fmt.Sprintf("at no measured size, up to %d ranks", rows[len(rows)-1].ranks)
}

func rowAt(rows []memoryRow, n int) *memoryRow {
	for i := range rows {
		if rows[i].ranks == n {
			return &rows[i]
		}
	}
	return nil
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
