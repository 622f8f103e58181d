package shm_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	"github.com/rs/zerolog"
)

// smJob opens n ranks over btl/sm in this process, each with its
// collective layer tuned by tune(r): the transport a job on one node
// runs its point-to-point algorithms on, fused paths and CMA included.
func smJob(t testing.TB, n int, tune func(r int) *coll.Tuning) []*coll.Comm {
	t.Helper()
	boots := boot.Group(n, fmt.Sprintf("shmbench%d-%d", os.Getpid(), prefixSeq.Add(1)))
	mods := make([][]core.Module, n)
	for r := range n {
		m, err := sm.Open(core.BTLEnv{Params: core.MustParams(sm.Params), Boot: boots[r], Log: zerolog.Nop(), Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		mods[r] = m
	}
	var wg sync.WaitGroup
	for _, b := range boots {
		wg.Go(func() { b.Fence(context.Background()) })
	}
	wg.Wait()
	comms := make([]*coll.Comm, n)
	for r := range n {
		p, err := pml.New(r, n, mods[r], pml.Options{Metrics: core.NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = coll.New(p, tune(r))
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Go(func() { c.PML().(*pml.Comm).Close() })
		}
		wg.Wait()
	})
	return comms
}

// BenchmarkCollectives2 times, on 2 ranks of one process over btl/sm,
// each on a thread of its own, the barrier, an 8-byte allreduce, an
// 8-byte and a 1 MiB broadcast, a 1 MiB allreduce and an allgather of
// 1 MiB blocks: through the segment (shm) and
// by the decision table's point-to-point algorithms (p2p). More ranks
// than this machine's 2 CPUs would time the scheduler, not the
// collectives.
func BenchmarkCollectives2(b *testing.B) {
	const n = 2
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(n, runtime.GOMAXPROCS(0))))
	node := shm.New(shm.Options{Spin: benchEnv("SHM_SPIN"), Chunk: benchEnv("SHM_CHUNK"), Depth: benchEnv("SHM_DEPTH")})
	jobs := map[string][]*coll.Comm{
		"shm": smJob(b, n, func(int) *coll.Tuning {
			tu := &coll.Tuning{Node: node, Machine: coll.Machine{OwnCore: true}}
			return tu
		}),
		"p2p": smJob(b, n, func(int) *coll.Tuning { return &coll.Tuning{} }),
	}
	big := 1 << 20
	sum := coll.Sum[float64]()
	cases := []struct {
		name string
		run  func(c *coll.Comm, buf []byte) error
	}{
		{"barrier", func(c *coll.Comm, _ []byte) error { return c.Barrier(bg) }},
		{"allreduce_8B", func(c *coll.Comm, buf []byte) error { return c.Allreduce(bg, buf[:8], buf[big:big+8], sum) }},
		{"bcast_8B", func(c *coll.Comm, buf []byte) error { return c.Bcast(bg, buf[:8], 0) }},
		{"bcast_1MiB", func(c *coll.Comm, buf []byte) error { return c.Bcast(bg, buf[:big], 0) }},
		{"allreduce_1MiB", func(c *coll.Comm, buf []byte) error { return c.Allreduce(bg, buf[:big], buf[big:], sum) }},
		{"allgather_1MiB", func(c *coll.Comm, buf []byte) error { return c.Allgather(bg, buf[n*big:], buf[:n*big]) }},
	}
	for _, cs := range cases {
		for _, impl := range []string{"shm", "p2p"} {
			comms := jobs[impl]
			bufs := [][]byte{make([]byte, (n+1)*big), make([]byte, (n+1)*big)}
			b.Run(cs.name+"/"+impl, func(b *testing.B) {
				iters := b.N
				errs := make([]error, n)
				var wg sync.WaitGroup
				for r := 1; r < n; r++ {
					wg.Go(func() {
						for range iters {
							if err := cs.run(comms[r], bufs[r]); err != nil {
								errs[r] = err
								return
							}
						}
					})
				}
				took := make([]time.Duration, iters)
				b.ResetTimer()
				for i := range iters {
					t0 := time.Now()
					if err := cs.run(comms[0], bufs[0]); err != nil {
						errs[0] = err
						break
					}
					took[i] = time.Since(t0)
				}
				wg.Wait()
				// On a loaded machine the mean is the scheduler's; the
				// fastest and the median iterations say more.
				slices.Sort(took)
				b.ReportMetric(float64(took[0].Nanoseconds()), "min-ns")
				b.ReportMetric(float64(took[iters/2].Nanoseconds()), "median-ns")
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchEnv reads a component option from the environment (0: the
// default), for trying others.
func benchEnv(name string) int {
	var v int
	fmt.Sscan(os.Getenv(name), &v)
	return v
}
