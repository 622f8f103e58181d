package shm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// The last rank of the job dies — its links drop — while the others are
// inside a collective through the segment, waiting on flags it will
// never move, or on ranks that gave up because of it: on one node, on
// its own node of two, and on a node of its own. Every survivor's
// collective fails with ErrPeerLost; none hangs.
func TestARankLostDuringACollectiveFailsItOnTheOthers(t *testing.T) {
	big := 8 << 10 // 16 chunk steps of the tests' 512 bytes
	ops := []struct {
		name string
		op   func(c *coll.Comm, buf []byte) error
	}{
		{"barrier", func(c *coll.Comm, _ []byte) error { return c.Barrier(bg) }},
		{"allreduce 8 B", func(c *coll.Comm, buf []byte) error { return c.Allreduce(bg, buf[:8], buf[:8], sumInt64) }},
		{"allreduce chunks", func(c *coll.Comm, buf []byte) error { return c.Allreduce(bg, buf, buf, sumInt64) }},
		{"bcast 8 B", func(c *coll.Comm, buf []byte) error { return c.Bcast(bg, buf[:8], 0) }},
		{"bcast chunks", func(c *coll.Comm, buf []byte) error { return c.Bcast(bg, buf, 0) }},
		{"reduce 8 B", func(c *coll.Comm, buf []byte) error { return c.Reduce(bg, buf[:8], buf[:8], sumInt64, 1) }},
		{"allgather", func(c *coll.Comm, buf []byte) error {
			return c.Allgather(bg, buf[:len(buf)/c.Size()/8*8], buf)
		}},
	}
	for _, nodes := range [][]int{{0, 0, 0, 0, 0}, {0, 0, 0, 1, 1}, {0, 0, 1, 1, 2}} {
		for _, tc := range ops {
			t.Run(fmt.Sprint(nodes, " ", tc.name), func(t *testing.T) {
				n := len(nodes)
				j := newJob(t, n, forceAll(nodes, nil), func(o *pml.Options) { o.FinalizeTimeout = 100 * time.Millisecond })
				defer j.close()
				j.run(t, func(c *coll.Comm) error {
					buf := make([]byte, big)
					if c.Rank() == n-1 {
						for range 3 {
							if err := tc.op(c, buf); err != nil {
								return err
							}
						}
						for r := range n - 1 {
							j.f.Drop(0, n-1, r)
						}
						return nil
					}
					for i := 0; ; i++ {
						err := tc.op(c, buf)
						if err == nil {
							if i > 1000 {
								return errors.New("the collective kept succeeding without a rank")
							}
							continue
						}
						if !errors.Is(err, core.ErrPeerLost) {
							return fmt.Errorf("failed with %v, want ErrPeerLost", err)
						}
						// and so does the next one, at once
						if err := tc.op(c, buf); !errors.Is(err, core.ErrPeerLost) {
							return fmt.Errorf("the next collective: %v, want ErrPeerLost", err)
						}
						return nil
					}
				})
			})
		}
	}
}

// A context that ends while a rank waits in a collective on one node
// returns its error; the collective goes on, and once the next one is
// over on every rank both have the right results.
func TestAContextThatEndsLeavesTheCollectiveToFinish(t *testing.T) {
	const n = 3
	const count = 40 // compose's 16-byte elements: 640 bytes, in chunks
	j := newJob(t, n, forceAll(nil, nil))
	defer j.close()
	// Rank 2 comes once both others have given up (not once rank 0 has:
	// on a loaded machine rank 1 may enter its Allreduce after rank 0's
	// deadline, and would then find rank 2's chunks and succeed).
	var gaveUp sync.WaitGroup
	gaveUp.Add(2)
	j.run(t, func(c *coll.Comm) error {
		me := c.Rank()
		first := fill(make([]byte, count*16), me, 1)
		second := fill(make([]byte, count*16), me, 2)
		r1, r2 := make([]byte, len(first)), make([]byte, len(second))
		// The first collective opens the component, which every rank
		// must join.
		if err := c.Allreduce(bg, second, r2, compose); err != nil {
			return err
		}
		if me == 2 {
			gaveUp.Wait() // the others wait for this rank's chunks
			if err := c.Allreduce(bg, first, r1, compose); err != nil {
				return err
			}
		} else {
			ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
			err := c.Allreduce(ctx, first, r1, compose)
			cancel()
			gaveUp.Done() // before any return: rank 2 must not wait forever
			var pe *coll.PendingError
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) {
				return fmt.Errorf("a collective waiting for a late rank ended with %v, want a PendingError of the context's deadline", err)
			}
			// The next collective waits for this one; its request is
			// then done.
			defer func() {
				if _, err := c.PML().(*pml.Comm).Wait(pe.Request); err != nil {
					t.Errorf("rank %d: the first allreduce's request: %v", me, err)
				}
			}()
		}
		if err := c.Allreduce(bg, second, r2, compose); err != nil {
			return err
		}
		if err := diff("first", r1, fold(compose, len(first), n, 1)); err != nil {
			return err
		}
		return diff("second", r2, fold(compose, len(second), n, 2))
	})
}

// Ranks that pass different lengths — both fitting a slot, or both
// taking chunks — fail with ErrMismatch, every one of them: the rank that
// sees it breaks the segment for the others, which would otherwise wait.
func TestRanksThatDisagreeOnTheLengthFailWithErrMismatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mine, rest int // bytes on rank 0, on the others
		kind       string
	}{
		{"allreduce in slots", 16, 8, "allreduce"},
		{"allreduce in chunks", 4096, 2048, "allreduce"},
		{"bcast in slots", 16, 8, "bcast"},
		{"bcast in chunks", 4096, 2048, "bcast"},
		{"allgather", 1024, 2048, "allgather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4
			j := newJob(t, n, forceAll(nil, nil))
			defer j.close()
			j.run(t, func(c *coll.Comm) error {
				if err := c.Barrier(bg); err != nil {
					return fmt.Errorf("barrier: %w", err)
				}
				size := tc.rest
				if c.Rank() == 0 {
					size = tc.mine
				}
				buf := make([]byte, size*n)
				var err error
				switch tc.kind {
				case "allreduce":
					err = c.Allreduce(bg, buf[:size], buf[:size], sumInt64)
				case "bcast":
					err = c.Bcast(bg, buf[:size], 0)
				default:
					err = c.Allgather(bg, buf[:size], buf)
				}
				if tc.kind == "bcast" && c.Rank() == 0 && err == nil {
					return nil // the root does not wait to learn of it
				}
				if !errors.Is(err, coll.ErrMismatch) {
					return fmt.Errorf("%d bytes against %d: %v, want ErrMismatch", size, tc.mine, err)
				}
				return nil
			})
		})
	}
}

// straddles are collectives whose ranks pass lengths on both sides of
// Options.Small (the tests' 256 bytes): those in big pass 8 KiB (16
// chunks of 512 bytes, more than the pipeline's depth of 3, so that a
// broadcast's root waits for the others to take its chunks), the others
// 16 bytes, except where a case says otherwise.
var straddles = []struct {
	name      string
	n         int
	kind      string
	root      int
	big       []int
	rootBytes int  // the root's bytes, if not 16 or 8 KiB
	flat      bool // the flat barrier and small allreduce, not the tree
}{
	{"allreduce, rank 0 in chunks", 4, "allreduce", 0, []int{0}, 0, false},
	{"allreduce, rank 0 in a slot", 4, "allreduce", 0, []int{1, 2, 3}, 0, false},
	{"allreduce, ranks 1 and 3 in chunks", 4, "allreduce", 0, []int{1, 3}, 0, false},
	{"allreduce flat, rank 2 in chunks", 4, "allreduce", 0, []int{2}, 0, true},
	{"allreduce on 2, rank 1 in chunks", 2, "allreduce", 0, []int{1}, 0, false},
	{"bcast, root in a slot", 4, "bcast", 0, []int{1, 2, 3}, 0, false},
	{"bcast, root in chunks", 4, "bcast", 0, []int{0}, 0, false},
	{"bcast, root 1 in 2 chunks, which it leaves", 4, "bcast", 1, []int{1}, 1024, false},
	{"bcast on 3, root 2 in a slot", 3, "bcast", 2, []int{0, 1}, 0, false},
	// Rank 2 waits on rank 1, which takes the root's chunks and is done.
	{"bcast on 6, rank 2 in a slot under rank 1", 6, "bcast", 0, []int{0, 1, 3, 4, 5}, 0, false},
	{"reduce, root 0 in chunks", 4, "reduce", 0, []int{0}, 0, false},
	{"reduce, root 0 in a slot", 4, "reduce", 0, []int{1, 2, 3}, 0, false},
	{"reduce, root 2 in a slot", 4, "reduce", 2, []int{0, 1, 3}, 0, false},
	{"reduce, root 3 in chunks with rank 1", 4, "reduce", 3, []int{1, 3}, 0, false},
}

// Ranks whose lengths fall on both sides of Options.Small take different
// paths, the slots and the chunks, and wait on different lines; every
// rank that waits fails with ErrMismatch, in bounded time (a stall
// timeout makes a regression fail with ErrStalled instead of hanging).
// Only a rank that writes and leaves may finish the collective — a
// broadcast's rank that passed the root's length, a rank of a reduce in
// a slot that only sends — and its next collective fails with
// ErrMismatch, as every rank's does: the segment is broken.
func TestRanksWhoseLengthsStraddleSmallFailWithErrMismatch(t *testing.T) {
	for _, tc := range straddles {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, tc.n, forceAll(nil, func(o shm.Options) shm.Options {
				if tc.flat {
					o.Flat = tc.n
				}
				return o
			}), func(o *pml.Options) { o.StallTimeout = 20 * time.Second })
			defer j.close()
			bytes := func(r int) int {
				switch {
				case r == tc.root && tc.rootBytes != 0:
					return tc.rootBytes
				case slices.Contains(tc.big, r):
					return 8 << 10
				}
				return 16
			}
			j.run(t, func(c *coll.Comm) error {
				if err := c.Barrier(bg); err != nil {
					return fmt.Errorf("barrier: %w", err)
				}
				me := c.Rank()
				buf := make([]byte, bytes(me))
				var err error
				switch tc.kind {
				case "allreduce":
					err = c.Allreduce(bg, buf, buf, sumInt64)
				case "bcast":
					err = c.Bcast(bg, buf, tc.root)
				default:
					err = c.Reduce(bg, buf, buf, sumInt64, tc.root)
				}
				leaves := tc.kind == "bcast" && bytes(me) == bytes(tc.root) ||
					tc.kind == "reduce" && me != tc.root && bytes(me) <= 256
				if err == nil && !leaves || err != nil && !errors.Is(err, coll.ErrMismatch) {
					return fmt.Errorf("%d bytes (root %d: %d): %v, want ErrMismatch", bytes(me), tc.root, bytes(tc.root), err)
				}
				if err := c.Barrier(bg); !errors.Is(err, coll.ErrMismatch) {
					return fmt.Errorf("the barrier after it: %v, want ErrMismatch", err)
				}
				return nil
			})
		})
	}
}

// A rank that leaves a small reduce (a leaf: it only sends) and begins
// a large allreduce fills the allreduce's first chunk step, the step the
// ranks that passed a large vector wait for in the reduce. A rank of the
// reduce that does not wait again after it (one step, and not the root)
// must not take it for its reduce's and succeed, but fail with
// ErrMismatch, as every rank's next collective does. The leaf's chunk is
// there first: the allreduce's context has ended when the others come,
// and its first step is filled before the wait that returns the
// context's error.
func TestARankDoesNotTakeTheNextCollectivesChunkForItsOwn(t *testing.T) {
	const n = 3
	j := newJob(t, n, forceAll(nil, nil), func(o *pml.Options) { o.StallTimeout = 20 * time.Second })
	defer j.close()
	filled, left := make(chan struct{}), make(chan struct{})
	j.run(t, func(c *coll.Comm) error {
		if err := c.Barrier(bg); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		buf := fill(make([]byte, 512), c.Rank(), 1) // one chunk step
		switch c.Rank() {
		case 2:
			if err := c.Reduce(bg, buf[:16], nil, sumInt64, 0); err != nil {
				return fmt.Errorf("the reduce of a leaf: %v, want none", err)
			}
			if err := fillAndGiveUp(c, filled); err != nil {
				return err
			}
			<-left
		default:
			<-filled
			err := c.Reduce(bg, buf, buf, sumInt64, 0)
			if c.Rank() == 1 {
				close(left)
			}
			if !errors.Is(err, coll.ErrMismatch) {
				return fmt.Errorf("the reduce: %v, want ErrMismatch", err)
			}
		}
		return nextFails(c)
	})
}

// fillAndGiveUp runs a one-step allreduce (512 bytes of this rank's fill)
// whose context has ended: it fills its first step, closes filled, and
// returns the context's error, which it checks.
func fillAndGiveUp(c *coll.Comm, filled chan struct{}) error {
	gone, cancel := context.WithCancel(bg)
	cancel()
	buf := fill(make([]byte, 512), c.Rank(), 1)
	err := c.Allreduce(gone, buf, buf, sumInt64)
	close(filled)
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the allreduce with its context over: %v, want its error", err)
	}
	return nil
}

// nextFails checks that the collective after one the ranks disagreed on
// fails too: the segment is broken.
func nextFails(c *coll.Comm) error {
	if err := c.Barrier(bg); !errors.Is(err, coll.ErrMismatch) {
		return fmt.Errorf("the barrier after it: %v, want ErrMismatch", err)
	}
	return nil
}

// A node whose leader cannot make its segment (its directory does not
// exist) fails the open on every rank alike: the collectives forced to
// "shm" fail with the reason, every time and on every rank, and with
// the decision's own choice (ranks that own their cores) the communicator keeps the
// point-to-point algorithms and gives the right results.
func TestASegmentThatCannotBeMadeFailsTheOpenOnEveryRank(t *testing.T) {
	nodes := []int{0, 0, 0, 1, 1}
	badLeader := func(force bool) func(r int) *coll.Tuning {
		return forceAll(nodes, func(o shm.Options) shm.Options {
			if o.Label == "node1" && o.Dir == "" {
				o.Dir = "/nonexistent/shm" // rank 3, the first of node 1, asks first
			}
			return o
		})
	}
	for _, force := range []bool{true, false} {
		t.Run(fmt.Sprint("forced ", force), func(t *testing.T) {
			tune := badLeader(force)
			j := newJob(t, len(nodes), func(r int) *coll.Tuning {
				tu := tune(r)
				if !force {
					*tu = coll.Tuning{Node: tu.Node, Machine: coll.Machine{OwnCore: true}}
				}
				return tu
			})
			defer j.close()
			j.run(t, func(c *coll.Comm) error {
				for range 2 {
					err := check(c, shape{kind: "allreduce", op: compose, count: 50})
					if force && err == nil {
						return errors.New("a forced allreduce succeeded without a segment")
					}
					if force && c.Rank() == 3 && !strings.Contains(err.Error(), "/nonexistent/shm") {
						return fmt.Errorf("the leader's error does not name its directory: %v", err)
					}
					if !force && err != nil {
						return err
					}
				}
				if !force && calls(c, "allreduce", "shm") != 0 {
					return errors.New("the allreduces went through the component")
				}
				return nil
			})
		})
	}
}
