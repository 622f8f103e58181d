package shm_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
)

// shape is one collective call of the tests.
type shape struct {
	kind    string
	root    int
	count   int // elements
	op      coll.Op
	inPlace bool
	seed    int
}

func (s shape) String() string {
	return fmt.Sprintf("%s root %d, %d elements of %d bytes, in place %v", s.kind, s.root, s.count, s.op.Size, s.inPlace)
}

// check runs s on c and compares its result with the serial reference.
func check(c *coll.Comm, s shape) error {
	n, me := c.Size(), c.Rank()
	size := s.count * s.op.Size
	mine := fill(make([]byte, size), me, s.seed)
	sent := bytes.Clone(mine)
	var err error
	switch s.kind {
	case "barrier":
		return c.Barrier(bg)
	case "bcast":
		buf := make([]byte, size)
		if me == s.root {
			copy(buf, mine)
		}
		if err = c.Bcast(bg, buf, s.root); err == nil {
			err = diff("bcast", buf, fill(make([]byte, size), s.root, s.seed))
		}
	case "reduce", "allreduce":
		recv := make([]byte, size)
		if s.inPlace {
			recv = mine
		}
		if s.kind == "reduce" {
			err = c.Reduce(bg, mine, recv, s.op, s.root)
		} else {
			err = c.Allreduce(bg, mine, recv, s.op)
		}
		if err == nil && (s.kind == "allreduce" || me == s.root) {
			err = diff(s.kind, recv, fold(s.op, size, n, s.seed))
		}
		if err == nil && !s.inPlace && !bytes.Equal(mine, sent) {
			err = fmt.Errorf("the send vector changed")
		}
	case "allgather":
		all := make([]byte, n*size)
		send := mine
		if s.inPlace {
			send = all[me*size : (me+1)*size]
			copy(send, mine)
		}
		if err = c.Allgather(bg, send, all); err == nil {
			for r := range n {
				if err = diff(fmt.Sprint("block ", r), all[r*size:(r+1)*size], fill(make([]byte, size), r, s.seed)); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%v: %w", s, err)
	}
	return nil
}

// served says whether the component takes s on nodes (the node of each
// rank): a reduction that does not commute needs nodes of contiguous
// ranks, an allgather nodes of equal contiguous ranges.
func served(s shape, nodes []int) bool {
	contiguous, equal := true, true
	count := map[int]int{}
	for r, x := range nodes {
		count[x]++
		if r > 0 && x != nodes[r-1] && x != nodes[r-1]+1 {
			contiguous = false
		}
	}
	for _, c := range count {
		equal = equal && c == count[nodes[0]]
	}
	if len(count) == 1 {
		return true
	}
	switch s.kind {
	case "reduce", "allreduce":
		return s.op.Commutative || contiguous
	case "allgather":
		return s.count == 0 || contiguous && equal
	}
	return true
}

// The nodes of the tests: one node, two levels of contiguous equal nodes,
// interleaved nodes, uneven ones with a node of one rank.
var layouts = [][]int{
	{0, 0},
	{0, 0, 0},
	{0, 0, 0, 0, 0},
	{0, 0, 0, 1, 1, 1},
	{0, 1, 0, 1, 0, 1},
	{0, 0, 0, 0, 1, 2},
	{0, 1, 1, 1, 2, 2, 2},
}

// Every collective the component serves, on one node and on several,
// from every root, with vectors that are empty, fit a slot, and take
// several chunk steps (more than the pipeline's depth), gives the serial
// reference on every rank; the calls the component serves go through it
// (its counter), and those it leaves to the point-to-point algorithms
// still give the reference.
func TestEveryCollectiveThroughTheSegmentMatchesTheSerialReference(t *testing.T) {
	for _, f := range []int{-1, 16} {
		flat = f
		t.Run(fmt.Sprint("flat ", f), everyCollective)
	}
	flat = -1
}

func everyCollective(t *testing.T) {
	ls := layouts
	if raceEnabled {
		ls = [][]int{{0, 0, 0}, {0, 1, 0, 1, 0, 1}, {0, 0, 0, 0, 1, 2}}
	}
	for _, nodes := range ls {
		t.Run(fmt.Sprint(nodes), func(t *testing.T) {
			n := len(nodes)
			j := newJob(t, n, forceAll(nodes, nil))
			defer j.close()
			var want, got [5]atomic.Int64
			kinds := []string{"barrier", "bcast", "reduce", "allreduce", "allgather"}
			j.run(t, func(c *coll.Comm) error {
				for ki, kind := range kinds {
					for _, s := range shapes(kind, n) {
						if err := check(c, s); err != nil {
							return err
						}
						if c.Rank() == 0 && served(s, nodes) {
							want[ki].Add(1)
						}
					}
					if c.Rank() == 0 {
						got[ki].Store(calls(c, kind, "shm"))
					}
				}
				return nil
			})
			for ki, kind := range kinds {
				if got[ki].Load() != want[ki].Load() {
					t.Errorf("%s: %d calls went through the component, want %d", kind, got[ki].Load(), want[ki].Load())
				}
			}
			if left := leftIn(j.prefix); len(left) > 0 {
				t.Errorf("left in /dev/shm: %v", left)
			}
		})
	}
}

// shapes are the calls of kind the table test makes on n ranks.
func shapes(kind string, n int) []shape {
	if kind == "barrier" {
		return []shape{{kind: kind, op: sumInt64}, {kind: kind, op: sumInt64}, {kind: kind, op: sumInt64}}
	}
	var out []shape
	for _, op := range []coll.Op{sumInt64, compose} {
		if kind == "bcast" || kind == "allgather" {
			if op.Size != 8 {
				continue
			}
		}
		for _, count := range []int{0, 1, 3, 31, 200} {
			for root := range n {
				if root > 0 && kind != "bcast" && kind != "reduce" {
					break
				}
				for _, inPlace := range []bool{false, true} {
					out = append(out, shape{kind: kind, root: root, count: count, op: op, inPlace: inPlace, seed: count + root})
				}
			}
		}
	}
	return out
}

// Random jobs — ranks, nodes, collectives, roots, lengths, operations,
// several calls in a row — give the serial reference on every rank.
func TestCollectivesOnRandomNodesMatchTheSerialReference(t *testing.T) {
	kinds := []string{"barrier", "bcast", "reduce", "allreduce", "allgather"}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 8).Draw(rt, "ranks")
		nodes := rapid.SliceOfN(rapid.IntRange(0, 2), n, n).Draw(rt, "nodes")
		// Nodes are numbered in order of their first rank, as the
		// component numbers them; any labels will do.
		var calls []shape
		for i := range rapid.IntRange(1, 4).Draw(rt, "calls") {
			kind := rapid.SampledFrom(kinds).Draw(rt, "collective")
			op := rapid.SampledFrom([]coll.Op{sumInt64, compose}).Draw(rt, "op")
			if kind == "bcast" || kind == "allgather" {
				op = sumInt64
			}
			calls = append(calls, shape{kind: kind, op: op, seed: i,
				root:    rapid.IntRange(0, n-1).Draw(rt, "root"),
				count:   rapid.IntRange(0, 400).Draw(rt, "elements"),
				inPlace: rapid.Bool().Draw(rt, "in place")})
		}
		f := rapid.SampledFrom([]int{-1, 3, 16}).Draw(rt, "flat")
		j := newJob(rt, n, forceAll(nodes, func(o shm.Options) shm.Options { o.Flat = f; return o }))
		defer j.close()
		j.run(rt, func(c *coll.Comm) error {
			for _, s := range calls {
				if err := check(c, s); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Split makes communicators whose collectives the component serves
// through segments of their own, beside their parent's.
func TestSplitCommunicatorsGetSegmentsOfTheirOwn(t *testing.T) {
	nodes := []int{0, 0, 0, 1, 1, 1, 1}
	n := len(nodes)
	j := newJob(t, n, forceAll(nodes, nil))
	defer j.close()
	j.run(t, func(c *coll.Comm) error {
		if err := check(c, shape{kind: "allreduce", op: compose, count: 100}); err != nil {
			return err
		}
		sub, err := c.Split(bg, c.Rank()%2, -c.Rank())
		if err != nil {
			return err
		}
		// The two halves make different numbers of calls; the parent's
		// come between the first 40 of each.
		for i, s := range slices.Concat(shapes("allreduce", sub.Size()), shapes("bcast", sub.Size()), shapes("allgather", sub.Size())) {
			if err := check(sub, s); err != nil {
				return fmt.Errorf("split: %w", err)
			}
			if i >= 40 {
				continue
			}
			if err := check(c, shape{kind: "allreduce", op: sumInt64, count: 5 + 40*(i%2)}); err != nil {
				return fmt.Errorf("parent: %w", err)
			}
		}
		if calls(sub, "allreduce", "shm") == 0 {
			return fmt.Errorf("the split communicator's allreduces did not go through the component")
		}
		return nil
	})
}
