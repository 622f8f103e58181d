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
		var s shape
		s.n = rapid.IntRange(1, 9).Draw(rt, "ranks")
		s.kind = rapid.SampledFrom(kinds).Draw(rt, "collective")
		alg := rapid.SampledFrom(algs(s.kind)).Draw(rt, "algorithm")
		seg := rapid.IntRange(8, 64<<10).Draw(rt, "segment")
		s.root = rapid.IntRange(0, s.n-1).Draw(rt, "root")
		s.count = rapid.IntRange(0, 3000).Draw(rt, "elements")
		s.op = rapid.SampledFrom([]coll.Op{sumInt64, compose}).Draw(rt, "op")
		if s.kind == "alltoall" || s.kind == "allgather" || s.kind == "gather" {
			s.op = sumInt64 // the layout collectives: 8-byte elements
			s.count = s.count/s.n + 1
		}
		s.nb = rapid.Bool().Draw(rt, "non-blocking")
		s.size = s.count * s.op.Size
		j := newJob(rt, s.n, forced(s.kind, alg, seg))
		defer j.close()
		j.run(rt, s.check)
	})
}

// shape is one drawn collective: its kind, job size, root, vector of count
// elements (size bytes) of op's, and whether it runs non-blocking.
type shape struct {
	kind                 string
	n, root, count, size int
	op                   coll.Op
	nb                   bool
}

// do runs a collective in s's form: blocking, or started and Tested
// until done.
func (s shape) do(c *coll.Comm, blocking func() error, start func() (*pml.Request, error)) error {
	if !s.nb {
		return blocking()
	}
	return testUntilDone(c, start)
}

// check runs s on c's rank and compares its result with the serial one.
func (s shape) check(c *coll.Comm) error {
	me, n, root, count, size, op := c.Rank(), s.n, s.root, s.count, s.size, s.op
	mine := fill(make([]byte, size), me, count)
	switch s.kind {
	case "bcast":
		buf := make([]byte, size)
		if me == root {
			copy(buf, mine)
		}
		if err := s.do(c, func() error { return c.Bcast(bg, buf, root) },
			func() (*pml.Request, error) { return c.Ibcast(buf, root) }); err != nil {
			return err
		}
		return diff("bcast", buf, fill(make([]byte, size), root, count))
	case "reduce":
		recv := make([]byte, size)
		if err := s.do(c, func() error { return c.Reduce(bg, mine, recv, op, root) },
			func() (*pml.Request, error) { return c.Ireduce(mine, recv, op, root) }); err != nil || me != root {
			return err
		}
		return diff("reduce", recv, fold(op, size, 0, n, count))
	case "allreduce":
		if err := s.do(c, func() error { return c.Allreduce(bg, mine, mine, op) },
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
		return s.checkGather(c, mine)
	case "alltoall":
		return s.checkAlltoall(c)
	}
	return nil
}

// checkGather runs s, a gather or an allgather, and checks every block.
func (s shape) checkGather(c *coll.Comm, mine []byte) error {
	all := make([]byte, s.n*s.size)
	var err error
	if s.kind == "gather" {
		err = s.do(c, func() error { return c.Gather(bg, mine, all, s.root) },
			func() (*pml.Request, error) { return c.Igather(mine, all, s.root) })
	} else {
		err = s.do(c, func() error { return c.Allgather(bg, mine, all) },
			func() (*pml.Request, error) { return c.Iallgather(mine, all) })
	}
	if err != nil || s.kind == "gather" && c.Rank() != s.root {
		return err
	}
	for r := range s.n {
		if err := diff(fmt.Sprintf("%s block %d", s.kind, r), all[r*s.size:(r+1)*s.size], fill(make([]byte, s.size), r, s.count)); err != nil {
			return err
		}
	}
	return nil
}

// checkAlltoall runs s, an alltoall, and checks the block from every rank.
func (s shape) checkAlltoall(c *coll.Comm) error {
	n, size, me := s.n, s.size, c.Rank()
	send, recv := make([]byte, n*size), make([]byte, n*size)
	for d := range n {
		fill(send[d*size:(d+1)*size], me, d)
	}
	if err := s.do(c, func() error { return c.Alltoall(bg, send, recv, size) },
		func() (*pml.Request, error) { return c.Ialltoall(send, recv, size) }); err != nil {
		return err
	}
	for r := range n {
		if err := diff(fmt.Sprintf("alltoall from %d", r), recv[r*size:(r+1)*size], fill(make([]byte, size), r, me)); err != nil {
			return err
		}
	}
	return nil
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
