package simjob

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench/patterns"
	"github.com/gobtl/gobtl/btl/ib/simrc"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/sim"
)

// perConn picks the per-connection counts the cross-check compares out
// of a rank's metrics.
func perConn(rank int, snap map[string]any, names []string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range snap {
		base, ok := perPeer(k)
		if !ok {
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(base, "."+n) {
				x, _ := number(v)
				out[fmt.Sprintf("rank%d.%s%s", rank, n, k[len(base):])] = x
			}
		}
	}
	return out
}

// realRun runs pattern on n goroutine ranks over softrc (the stack with
// provider "softrc") and returns the per-connection counts.
func realRun(t *testing.T, stack string, n int, pattern string, iters int, names []string) map[string]float64 {
	t.Helper()
	cfg := loadStack(t, strings.ReplaceAll(stack, `provider    = "sim"`, `provider    = "softrc"`))
	var mu sync.Mutex
	all := map[string]float64{}
	err := gobtl.RunLocal(context.Background(), n, gobtl.Options{Config: cfg}, func(c *gobtl.Comm) error {
		if _, err := patterns.Run(c, pattern, patterns.Options{Iters: iters}); err != nil {
			return err
		}
		m := perConn(c.Rank(), c.Metrics().Snapshot(), names)
		mu.Lock()
		defer mu.Unlock()
		for k, v := range m {
			all[k] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func loadStack(t *testing.T, src string) *conf.Config {
	t.Helper()
	c, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "stack.hcl", Bytes: []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return c
}

func diff(a, b map[string]float64) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: sim %v, softrc %v", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: sim -, softrc %v", k, v))
		}
	}
	sort.Strings(out)
	return out
}

// TestSimulatedAndRealRunsCountAlike runs LU on 8 ranks twice, over
// the simulated fabric and over softrc (goroutine ranks, real TCP), with
// static flow control and enough buffers that no frame waits: then every
// count the mechanism decides without regard to timing must be the same
// on every connection — the frames that carry data and control (frames
// less explicit credit frames), the buffers posted, the stalls and the
// rendezvous taken for want of credit. Explicit credit frames are not
// compared: how many go depends on how many frames a receiver handles per
// progress, which is timing (two softrc runs differ too).
func TestSimulatedAndRealRunsCountAlike(t *testing.T) {
	names := []string{"frames", "credit_messages", "posted_max", "stalls", "rndv_no_credit"}
	sim := dataFrames(runSim(t, staticStack, 8, "lu", 3, names))
	real := dataFrames(realRun(t, staticStack, 8, "lu", 3, names))
	if len(real) == 0 {
		t.Fatal("the softrc run reported no per-connection counts")
	}
	if d := diff(sim, real); len(d) > 0 {
		t.Fatalf("%d of %d counts differ:\n%s", len(d), len(real), strings.Join(d, "\n"))
	}
	frames := 0.0
	for k, v := range real {
		if strings.Contains(k, ".data_frames.") {
			frames += v
		}
	}
	if frames == 0 {
		t.Fatal("no frames counted")
	}
}

// dataFrames replaces frames by frames less explicit credit frames and
// drops the credit frames.
func dataFrames(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		switch {
		case strings.Contains(k, ".frames."):
			out[strings.Replace(k, ".frames.", ".data_frames.", 1)] = v - m[strings.Replace(k, ".frames.", ".credit_messages.", 1)]
		case strings.Contains(k, ".credit_messages."):
		default:
			out[k] = v
		}
	}
	return out
}

func runSim(t *testing.T, stack string, n int, pattern string, iters int, names []string) map[string]float64 {
	t.Helper()
	r, err := Run(context.Background(), Config{Ranks: n, Stack: loadStack(t, stack), Pattern: pattern, Iters: iters, KeepRankMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]float64{}
	for rank, m := range r.RankMetrics {
		for k, v := range perConn(rank, m, names) {
			all[k] = v
		}
	}
	return all
}

const staticStack = `
btl "self" "self" {}
btl "ib" "rail0" {
  provider    = "sim"
  eager_limit = "2016B"
}
policy "recvbuf" {
  builtin        = "perpeer"
  receive_queues = "P,2048,100,1,5"
}
policy "flow_control" {
  builtin           = "ib_static"
  pre_post          = 64
  credit_threshold  = 1
  rndv_on_no_credit = false
}
`

// TestFramesBatchUpWhenReceivingCostsCPUOrRanksSleep pins what decides
// the explicit credit frames the cross-check leaves out. With threshold 1
// a receiver returns credits by an explicit frame whenever a progress
// call finds nothing that carried them back; a rank that handles every
// frame the instant it lands (no o_r, woken by each arrival) sends one
// per frame. A receive overhead o_r makes frames that land meanwhile wait
// for the next poll, and sleeping through arrivals (the real back-off on
// an oversubscribed machine) batches more: each must save credit frames
// and change nothing else the mechanism counts. The LU run on softrc that
// TestSimulatedAndRealRunsCountAlike compares against sent 254-404 credit
// frames in five runs on two cores; the simulation with o_r = 3µs and
// sleeping ranks sends 346, with neither 2143.
func TestFramesBatchUpWhenReceivingCostsCPUOrRanksSleep(t *testing.T) {
	names := []string{"frames", "credit_messages", "posted_max", "stalls", "rndv_no_credit"}
	run := func(or time.Duration, sleep bool) (credits float64, rest map[string]float64) {
		l := simrc.DefaultLink
		l.RecvOverhead = or
		r, err := Run(context.Background(), Config{Ranks: 8, Stack: loadStack(t, staticStack), Pattern: "lu", Iters: 3, KeepRankMetrics: true,
			Link: l, Sched: sim.Options{SleepThrough: sleep}})
		if err != nil {
			t.Fatal(err)
		}
		all := map[string]float64{}
		for rank, m := range r.RankMetrics {
			for k, v := range perConn(rank, m, names) {
				all[k] = v
				if strings.Contains(k, ".credit_messages.") {
					credits += v
				}
			}
		}
		return credits, dataFrames(all)
	}
	c0, base := run(0, false)
	c1, withOr := run(3*time.Microsecond, false)
	c2, sleeping := run(3*time.Microsecond, true)
	t.Logf("explicit credit frames: %v without o_r, %v with o_r = 3µs, %v also sleeping through arrivals", c0, c1, c2)
	if !(c0 > c1 && c1 > c2 && c2 > 0) {
		t.Errorf("explicit credit frames %v, %v, %v: want strictly fewer with o_r and fewer still sleeping, but some", c0, c1, c2)
	}
	for _, m := range []map[string]float64{withOr, sleeping} {
		if d := diff(base, m); len(d) > 0 {
			t.Errorf("batching changed %d counts besides the credit frames:\n%s", len(d), strings.Join(d, "\n"))
		}
	}
}
