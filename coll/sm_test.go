package coll_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/btl/sm"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	"github.com/rs/zerolog"
)

// smSeq makes every smJob a job of its own: its segments' names must not
// meet those of the one before, or another test run's.
var smSeq atomic.Int64

// smJob opens n ranks over btl/sm in this process, each with its
// collective layer: the transport, and so the fused eager paths, that a
// job on one node runs on.
func smJob(t testing.TB, n int, opts pml.Options) []*coll.Comm {
	t.Helper()
	boots := boot.Group(n, fmt.Sprintf("colltest%d-%d", os.Getpid(), smSeq.Add(1)))
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
		o := opts
		o.Metrics = core.NewMetrics()
		p, err := pml.New(r, n, mods[r], o)
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = coll.New(p, nil)
	}
	// Close is collective: each rank's finalize waits for the others'.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Go(func() { pmlOf(c).Close() })
		}
		wg.Wait()
	})
	return comms
}

// lockstep runs one collective on every rank from one goroutine: each
// rank starts it in turn, then each waits for it — ranks that come one
// after the other, as they do with more ranks than cores. start returns
// the rank's request.
func lockstep(t testing.TB, comms []*coll.Comm, reqs []*pml.Request, start func(r int, c *coll.Comm) (*pml.Request, error)) {
	for r, c := range comms {
		q, err := start(r, c)
		if err != nil {
			t.Fatal(err)
		}
		reqs[r] = q
	}
	for r, c := range comms {
		if _, err := pmlOf(c).Wait(reqs[r]); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkAllreduce8B4 is what osu_allreduce at 8 B does on 4 ranks of
// one node, per call — an allreduce of two float32s and the barrier after
// it — and each of the two alone, over sm, the ranks run in turn from one
// goroutine so that the instructions are the same from run to run
// (callgrind).
func BenchmarkAllreduce8B4(b *testing.B) {
	const n = 4
	comms := smJob(b, n, pml.Options{})
	reqs := make([]*pml.Request, n)
	sbuf, rbuf := make([][]float32, n), make([][]float32, n)
	for r := range n {
		sbuf[r], rbuf[r] = []float32{float32(r), 1}, make([]float32, 2)
	}
	sum := coll.Sum[float32]()
	allreduce := func(r int, c *coll.Comm) (*pml.Request, error) {
		return c.Iallreduce(coll.Bytes(sbuf[r]), coll.Bytes(rbuf[r]), sum)
	}
	barrier := func(_ int, c *coll.Comm) (*pml.Request, error) { return c.Ibarrier() }
	for _, bc := range []struct {
		name string
		ops  []func(r int, c *coll.Comm) (*pml.Request, error)
	}{
		{"osu", []func(r int, c *coll.Comm) (*pml.Request, error){allreduce, barrier}},
		{"allreduce", []func(r int, c *coll.Comm) (*pml.Request, error){allreduce}},
		{"barrier", []func(r int, c *coll.Comm) (*pml.Request, error){barrier}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, op := range bc.ops {
					lockstep(b, comms, reqs, op)
				}
			}
		})
	}
	if rbuf[0][0] != 6 || rbuf[3][1] != 4 {
		b.Fatalf("allreduce gave %v on rank 0, %v on rank 3", rbuf[0], rbuf[3])
	}
}

// oversubscribed is how a rank waits on a node with more ranks than CPUs
// (gobtl.Init's choice there): no spin, a yield at every look that finds
// nothing.
var oversubscribed = pml.Backoff{Spin: 0, Yield: math.MaxInt32}

// BenchmarkAllreduce8B4Blocking is osu_allreduce at 8 B on 4 ranks of one
// node as the program calls it: each rank a goroutine on a thread of its
// own, a blocking Allreduce then a Barrier per iteration, waiting as a
// rank with more ranks than CPUs does (no spin: every poll that finds
// nothing yields the CPU). The instructions include the polls of the
// waits, as in the real job. Callgrind's toggle-collect cannot follow the
// ranks' goroutines (it flips once per thread that enters a function, and
// loses it when the goroutine parks): count the whole binary at two
// -test.benchtime counts and take the difference.
func BenchmarkAllreduce8B4Blocking(b *testing.B) {
	const n = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n)) // a thread per rank: a yield lets another rank run
	comms := smJob(b, n, pml.Options{Backoff: oversubscribed})
	sum := coll.Sum[float32]()
	iters := b.N
	b.ReportAllocs()
	b.ResetTimer()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			sbuf, rbuf := []float32{float32(r), 1}, make([]float32, 2)
			for range iters {
				if err := c.Allreduce(context.Background(), coll.Bytes(sbuf), coll.Bytes(rbuf), sum); err != nil {
					errs[r] = err
					return
				}
				if err := c.Barrier(context.Background()); err != nil {
					errs[r] = err
					return
				}
			}
			if rbuf[0] != 6 || rbuf[1] != 4 {
				errs[r] = fmt.Errorf("rank %d: allreduce gave %v", r, rbuf)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// A blocking collective waits its rounds on the PML's fused receive path
// (pml.Comm.WaitRound), not as a started operation, under which the
// fused paths are off and messages are delivered by a poll of every
// module. Rank 1 enters each allreduce first and waits for rank 0, which
// comes a millisecond later: rank 0's message must reach rank 1's
// receive by the fused path (pml.fused_recvs).
func TestABlockingCollectiveWaitsOnTheFusedPath(t *testing.T) {
	// Spinning, a waiter looks only at the peer's fast box, but for a
	// poll of everything every 64th look.
	comms := smJob(t, 2, pml.Options{Backoff: pml.Backoff{Spin: 1 << 30, Yield: 1}})
	const iters = 20
	sum := coll.Sum[int64]()
	fused := func(c *coll.Comm) int64 { return pmlOf(c).Metrics().Counter("pml.fused_recvs").Load() }
	before := fused(comms[1])
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			v := []int64{int64(r + 1)}
			for range iters {
				if r == 0 {
					time.Sleep(time.Millisecond)
				}
				if err := c.Allreduce(context.Background(), coll.Bytes(v), coll.Bytes(v), sum); err != nil {
					errs[r] = err
					return
				}
			}
			if want := int64(3) << (iters - 1); v[0] != want {
				errs[r] = fmt.Errorf("rank %d: %d, want %d", r, v[0], want)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A message that lands between a look and the poll of every 64th
	// goes the general way: allow a few.
	if got := fused(comms[1]) - before; got < iters*3/4 {
		t.Fatalf("rank 1 received %d of its %d allreduce messages by the fused path, want nearly all", got, iters)
	}
}

// An 8-byte allreduce and a barrier over sm, blocking, allocate nothing
// once warm, on any rank.
func TestSmallBlockingCollectivesOverSMAllocateNothing(t *testing.T) {
	const n = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n)) // a yield lets another rank run
	comms := smJob(t, n, pml.Options{Backoff: oversubscribed})
	sum := coll.Sum[float32]()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			sbuf, rbuf := []float32{1, 2}, make([]float32, 2)
			step := func() {
				if err := c.Allreduce(context.Background(), coll.Bytes(sbuf), coll.Bytes(rbuf), sum); err != nil {
					panic(err)
				}
				if err := c.Barrier(context.Background()); err != nil {
					panic(err)
				}
			}
			for range 50 {
				step()
			}
			// Every rank runs the same count: AllocsPerRun runs one more.
			// It sets GOMAXPROCS to 1, where a rank's yield does not let
			// another goroutine run until the runtime preempts it (10 ms):
			// a few runs only. It counts every goroutine's allocations, and
			// the pml's pools still grow when ranks drift further apart
			// than they have before (more unexpected messages at once), so
			// the least of three measurements must be 0; an allocation in
			// every call would show in all three.
			if r != 0 {
				for range 3 * 21 {
					step()
				}
				return
			}
			least := math.Inf(1)
			for range 3 {
				least = min(least, testing.AllocsPerRun(20, step))
			}
			if least != 0 {
				errs[r] = fmt.Errorf("an 8-byte allreduce and a barrier allocate %v times", least)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
