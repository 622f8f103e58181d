package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/experiment/simjob"
	"github.com/gobtl/gobtl/internal/plot"
)

// rssLimit is the most resident memory a cost run's process may reach
// before it is killed: the machine (23 GiB) is shared with other work.
const rssLimit = 12 << 30

// costRun is what one simulated job cost.
type costRun struct {
	Pattern string
	Ranks   int
	Wall    time.Duration
	// CPU is the process's user and system time (in process: the
	// experiment's during the run), the fairer figure on a shared machine.
	CPU time.Duration
	// RSS is the process's peak resident memory (getrusage ru_maxrss):
	// of the `gobtl sim` process the run had to itself, or, in process,
	// the experiment's whole peak so far, with GoPeak the Go runtime's
	// memory when the first rank finished.
	RSS, GoPeak int64
	InProcess   bool
	Virtual     time.Duration
	Events      int64
	Err         string
}

// costStack is the stack of the cost runs: conf/examples/sim.hcl's,
// seed 000's dynamic scheme on per-peer 2 KiB buffers from 2 per peer.
const costStack = `btl "self" "self" {}
btl "ib" "rail0" {
  provider    = "sim"
  eager_limit = "2016B"
}
policy "recvbuf" {
  builtin        = "perpeer"
  receive_queues = "P,2048,100,1,5"
}
policy "flow_control" {
  builtin           = "ib_dynamic"
  initial           = 2
  max               = 128
  credit_threshold  = 5
  rndv_on_no_credit = true
}
`

// costArgs are a cost run's program arguments: LU's time steps, one
// 8-byte alltoall (osu_alltoall's smallest) twice.
func (x *exp) costArgs(p string) []string {
	if p == "alltoall" {
		return []string{p, "--sizes", "8", "--iters", "2"}
	}
	return []string{p, "--iters", strconv.Itoa(x.Iters)}
}

// cost measures the simulator: wall time and peak memory per simulated
// rank, each run in a `gobtl sim` process of its own when there is a
// launcher (its rusage is the run's alone), else in this process.
func (x *exp) cost() error {
	w := x.Out
	const table = "simulator cost"
	var rs []costRun
	for _, p := range x.CostPatterns {
		// The memory per (rank, peer) pair of the largest run so far: the
		// ranks' per-peer state makes a job's memory grow as n².
		perPair, pairAt := 0.0, 0
		for _, n := range x.CostRanks {
			x.Begin("scale: simulator cost, %s, %d ranks", p, n)
			if est := perPair * float64(n) * float64(n); est > rssLimit {
				rs = append(rs, costRun{Pattern: p, Ranks: n, Err: fmt.Sprintf("not run: %s per (rank, peer) pair at %d ranks (peak RSS / n²) × %d² ≈ %.1f GiB, over the %d GiB a run may take here",
					kib(perPair), pairAt, n, est/(1<<30), rssLimit>>30)})
				continue
			}
			if p == "alltoall" && n > 1024 {
				// Every rank connects to every other: 2 buffers of 2 KiB
				// posted per peer from the start.
				per := float64(n-1) * 2 * 2048
				rs = append(rs, costRun{Pattern: p, Ranks: n, Err: fmt.Sprintf("not run: %d² connections; the dynamic scheme's first 2 buffers per peer alone are %s per rank, %.1f GiB for the job",
					n, mib(per), per*float64(n)/(1<<30))})
				continue
			}
			r := x.costOne(p, n)
			if r.Err == "" && !r.InProcess {
				perPair, pairAt = float64(r.RSS)/float64(n)/float64(n), n
			}
			rs = append(rs, r)
			x.Record(table, r)
		}
	}
	fmt.Fprintf(w, "== The simulator's cost: time and peak memory per simulated rank ==\n")
	fmt.Fprintf(w, "LU: %d time step(s); alltoall: osu-style, 8 B, 2 iterations; stack conf/examples/sim.hcl's. Each run in a process\n", x.Iters)
	fmt.Fprintf(w, "of its own (peak RSS from its rusage) unless marked in-process (then the experiment's peak so far).\n")
	fmt.Fprintf(w, "%-9s %6s %12s %12s %14s %12s %14s %12s %12s\n", "program", "ranks", "wall", "CPU", "CPU/rank", "peak RSS", "RSS/rank", "virtual", "events")
	wallPer, rssPer := map[string]map[int]float64{}, map[string]map[int]float64{}
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "%-9s %6d  %s\n", r.Pattern, r.Ranks, r.Err)
			continue
		}
		mark := ""
		if r.InProcess {
			mark = fmt.Sprintf(" (in-process; Go memory at the peak %s)", mib(float64(r.GoPeak)))
		}
		fmt.Fprintf(w, "%-9s %6d %12v %12v %14v %12s %14s %12v %12d%s\n", r.Pattern, r.Ranks, r.Wall.Round(10*time.Millisecond),
			r.CPU.Round(10*time.Millisecond), (r.CPU / time.Duration(r.Ranks)).Round(time.Microsecond), mib(float64(r.RSS)), kib(float64(r.RSS)/float64(r.Ranks)),
			r.Virtual.Round(time.Microsecond), r.Events, mark)
		if wallPer[r.Pattern] == nil {
			wallPer[r.Pattern], rssPer[r.Pattern] = map[int]float64{}, map[int]float64{}
		}
		wallPer[r.Pattern][r.Ranks] = float64(r.CPU) / float64(r.Ranks) / 1e6
		rssPer[r.Pattern][r.Ranks] = float64(r.RSS) / float64(r.Ranks) / 1024
	}
	var lw, lr []plot.Line
	for _, p := range x.CostPatterns {
		lw = append(lw, plot.Line{Name: p, XY: plot.Curve(wallPer[p])})
		lr = append(lr, plot.Line{Name: p, XY: plot.Curve(rssPer[p])})
	}
	if err := x.Figure("scale-cost-wall", plot.Figure{Title: "Simulator CPU time per simulated rank", XLabel: "ranks", YLabel: "CPU ms per rank", LogX: true, Lines: lw}); err != nil {
		return err
	}
	return x.Figure("scale-cost-rss", plot.Figure{Title: "Simulator peak RSS per simulated rank", XLabel: "ranks", YLabel: "KiB per rank", LogX: true, Lines: lr})
}

// costOne runs p on n ranks and measures it.
func (x *exp) costOne(p string, n int) costRun {
	r := costRun{Pattern: p, Ranks: n}
	var res simjob.Result
	if x.Jobs != nil {
		ctx, cancel := context.WithCancel(x.Ctx)
		defer cancel()
		t0 := time.Now()
		out, st, err := x.Jobs.SimWatch(ctx, n, costStack, func(pid int) bool { return rssOf(pid) > rssLimit }, x.costArgs(p)...)
		r.Wall = time.Since(t0)
		if st != nil {
			r.CPU = st.UserTime() + st.SystemTime()
			if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
				r.RSS = int64(ru.Maxrss) * 1024
			}
		}
		if err != nil {
			r.Err = fmt.Sprintf("failed after %v at %s RSS: %v", r.Wall.Round(time.Second), mib(float64(r.RSS)), firstLine(err))
			return r
		}
		if err := json.Unmarshal(out, &res); err != nil {
			r.Err = fmt.Sprintf("its report: %v", err)
			return r
		}
	} else {
		r.InProcess = true
		args := x.costArgs(p)
		c := simjob.Config{Peak: func() { r.GoPeak = goMemory() }}
		if p == "alltoall" {
			c.Sizes, c.Iters = []int{8}, 2
		} else {
			c.Iters = x.Iters
		}
		cpu0 := cpuTime()
		got, wall, err := x.runSim(costStack, n, args[0], c)
		r.Wall, r.CPU = wall, cpuTime()-cpu0
		if err != nil {
			r.Err = err.Error()
			return r
		}
		res = *got
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			r.RSS = int64(ru.Maxrss) * 1024
		}
	}
	r.Virtual, r.Events = res.VirtualTime, res.Events
	return r
}

// cpuTime is this process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// goMemory is the memory the Go runtime has mapped.
func goMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// rssOf is a process's resident memory now (0 if it cannot be read).
func rssOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
