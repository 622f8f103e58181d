package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/pml"
)

// The collective benchmarks, in the manner of the OSU collective suite
// (osu_allreduce and its siblings): for each size, every rank times each
// call on its own, a barrier after every call keeping the ranks in step
// (outside the timing), and the report gives the mean over ranks of each
// rank's mean latency, with the smallest and largest rank's. Reductions
// sum float32 vectors of size bytes; bcast and reduce have root 0;
// allgather and alltoall move size bytes per rank (per pair).

// collOf returns the collective layer of c: a *gobtl.Comm's own (whose
// stack file may tune it), reached through internal/layers, or one with
// the built-in decision over a bare *pml.Comm.
func collOf(c Comm) (*coll.Comm, error) {
	if _, cc, ok := layers.Of(c); ok {
		return cc, nil
	}
	if x, ok := c.(*pml.Comm); ok {
		return coll.New(x, nil), nil
	}
	return nil, fmt.Errorf("bench: a %T has no collective layer", c)
}

var bg = context.Background()

// sumFloat32 sums float32 vectors with the typed Sum of the root package's
// Allreduce, as MPI_SUM of MPI_FLOAT: the arithmetic is part of what an
// allreduce costs.
var sumFloat32 = coll.Sum[float32]()

var collColumns = []column{{"lat_us", "Avg Latency(us)", "%.2f"}, {"lat_min_us", "Min Latency(us)", "%.2f"}, {"lat_max_us", "Max Latency(us)", "%.2f"}}

func init() {
	sizes := powers(4, 4<<20)
	iters := bySize(1000, 100, 8192)
	add := func(name, doc string, perRank bool, sz []int, op func(b *runner, x *coll.Comm, n int) error) {
		suite[name] = &benchmark{doc: doc, minRanks: 1, perRank: perRank, sizes: sz, iters: iters, columns: collColumns,
			run: func(b *runner, n int) (Row, error) { return b.collective(n, op) }}
	}
	add("allreduce", "osu_allreduce: MPI_SUM of float32 vectors, mean latency per call", false, sizes,
		func(b *runner, x *coll.Comm, n int) error {
			return x.Allreduce(bg, b.sbuf[:n&^3], b.rbuf[:n&^3], sumFloat32)
		})
	add("reduce", "osu_reduce: MPI_SUM of float32 vectors to rank 0, mean latency per call", false, sizes,
		func(b *runner, x *coll.Comm, n int) error {
			return x.Reduce(bg, b.sbuf[:n&^3], b.rbuf[:n&^3], sumFloat32, 0)
		})
	add("bcast", "osu_bcast: broadcast from rank 0, mean latency per call", false, sizes,
		func(b *runner, x *coll.Comm, n int) error { return x.Bcast(bg, b.sbuf[:n], 0) })
	add("allgather", "osu_allgather: size bytes from every rank to every rank, mean latency per call", true, sizes,
		func(b *runner, x *coll.Comm, n int) error {
			return x.Allgather(bg, b.sbuf[:n], b.rbuf[:n*x.Size()])
		})
	add("alltoall", "osu_alltoall: size bytes between every pair of ranks, mean latency per call", true, append([]int{1, 2}, sizes...),
		func(b *runner, x *coll.Comm, n int) error {
			return x.Alltoall(bg, b.sbuf[:n*x.Size()], b.rbuf[:n*x.Size()], n)
		})
	add("barrier", "osu_barrier: mean latency of a barrier", false, []int{0},
		func(b *runner, x *coll.Comm, _ int) error { return x.Barrier(bg) })
}

// collective times op on size bytes, OSU's way.
func (b *runner) collective(n int, op func(b *runner, x *coll.Comm, n int) error) (Row, error) {
	if b.coll == nil {
		x, err := collOf(b.c)
		if err != nil {
			return Row{}, err
		}
		b.coll = x
	}
	x := b.coll
	var total time.Duration
	b.laps = b.laps[:0] // this rank's timed calls, for the row's spread
	for i := 0; i < b.warmup+b.iters; i++ {
		t0 := b.clock.Now()
		if err := op(b, x, n); err != nil {
			return Row{}, err
		}
		if i >= b.warmup {
			d := b.clock.Now() - t0
			total += d
			b.laps = append(b.laps, d)
		}
		if err := x.Barrier(bg); err != nil {
			return Row{}, err
		}
	}
	lats, err := b.gather(micros(total) / float64(b.iters))
	if b.c.Rank() != 0 || err != nil {
		return Row{}, err
	}
	sum := 0.0
	for _, l := range lats {
		sum += l
	}
	return b.row(Field{"lat_us", sum / float64(len(lats))}, micros).with(Field{"lat_min_us", slices.Min(lats)}, Field{"lat_max_us", slices.Max(lats)}), nil
}
