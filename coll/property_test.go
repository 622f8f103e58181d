package coll_test

import (
	"fmt"
	"runtime"
	"testing"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/pml"
)

// TestCollectivesOfRandomShapesMatchTheSerialReference draws a job size,
// a collective, one of its algorithms, a segment size, a root, vector
// lengths and whether to run its blocking form or its non-blocking one
// (completed by polling Test), runs it, and compares every rank's result
// with the serial one.
func TestCollectivesOfRandomShapesMatchTheSerialReference(t *testing.T) {
	kinds := []string{"bcast", "reduce", "allreduce", "allgather", "alltoall", "reduce_scatter", "gather"}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 9).Draw(rt, "ranks")
		kind := rapid.SampledFrom(kinds).Draw(rt, "collective")
		alg := rapid.SampledFrom(algs(kind)).Draw(rt, "algorithm")
		seg := rapid.IntRange(8, 64<<10).Draw(rt, "segment")
		root := rapid.IntRange(0, n-1).Draw(rt, "root")
		count := rapid.IntRange(0, 3000).Draw(rt, "elements")
		op := rapid.SampledFrom([]coll.Op{sumInt64, compose}).Draw(rt, "op")
		if kind == "alltoall" || kind == "allgather" || kind == "gather" {
			op = sumInt64 // the layout collectives: 8-byte elements
			count = count/n + 1
		}
		nb := rapid.Bool().Draw(rt, "non-blocking")
		size := count * op.Size
		j := newJob(rt, n, forced(kind, alg, seg))
		defer j.close()
		j.run(rt, func(c *coll.Comm) error {
			me := c.Rank()
			// do runs the collective, blocking or not.
			do := func(blocking func() error, start func() (*pml.Request, error)) error {
				if !nb {
					return blocking()
				}
				return testUntilDone(c, start)
			}
			mine := fill(make([]byte, size), me, count)
			switch kind {
			case "bcast":
				buf := make([]byte, size)
				if me == root {
					copy(buf, mine)
				}
				if err := do(func() error { return c.Bcast(bg, buf, root) },
					func() (*pml.Request, error) { return c.Ibcast(buf, root) }); err != nil {
					return err
				}
				return diff("bcast", buf, fill(make([]byte, size), root, count))
			case "reduce":
				recv := make([]byte, size)
				if err := do(func() error { return c.Reduce(bg, mine, recv, op, root) },
					func() (*pml.Request, error) { return c.Ireduce(mine, recv, op, root) }); err != nil {
					return err
				}
				if me != root {
					return nil
				}
				return diff("reduce", recv, fold(op, size, 0, n, count))
			case "allreduce":
				if err := do(func() error { return c.Allreduce(bg, mine, mine, op) },
					func() (*pml.Request, error) { return c.Iallreduce(mine, mine, op) }); err != nil {
					return err
				}
				return diff("allreduce", mine, fold(op, size, 0, n, count))
			case "reduce_scatter":
				all := fill(make([]byte, n*size), me, count)
				recv := make([]byte, size)
				if err := c.ReduceScatterBlock(bg, all, recv, op); err != nil {
					return err
				}
				return diff("reduce_scatter", recv, fold(op, n*size, 0, n, count)[me*size:(me+1)*size])
			case "allgather", "gather":
				all := make([]byte, n*size)
				var err error
				if kind == "gather" {
					err = do(func() error { return c.Gather(bg, mine, all, root) },
						func() (*pml.Request, error) { return c.Igather(mine, all, root) })
				} else {
					err = do(func() error { return c.Allgather(bg, mine, all) },
						func() (*pml.Request, error) { return c.Iallgather(mine, all) })
				}
				if err != nil || kind == "gather" && me != root {
					return err
				}
				for r := range n {
					if err := diff(fmt.Sprintf("%s block %d", kind, r), all[r*size:(r+1)*size], fill(make([]byte, size), r, count)); err != nil {
						return err
					}
				}
			case "alltoall":
				send, recv := make([]byte, n*size), make([]byte, n*size)
				for d := range n {
					fill(send[d*size:(d+1)*size], me, d)
				}
				if err := do(func() error { return c.Alltoall(bg, send, recv, size) },
					func() (*pml.Request, error) { return c.Ialltoall(send, recv, size) }); err != nil {
					return err
				}
				for s := range n {
					if err := diff(fmt.Sprintf("alltoall from %d", s), recv[s*size:(s+1)*size], fill(make([]byte, size), s, me)); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
}

// testUntilDone starts a non-blocking collective and polls its request
// with Test until it completes: the collective must then advance by the
// tests alone, with no Wait.
func testUntilDone(c *coll.Comm, start func() (*pml.Request, error)) error {
	r, err := start()
	if err != nil {
		return err
	}
	p := pmlOf(c)
	for {
		done, st, err := p.Test(r)
		if err != nil {
			return err
		}
		if done {
			return st.Err
		}
		runtime.Gosched()
	}
}
