package shm_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/pml"
)

// rootCases are broadcasts and reduces whose ranks pass equal lengths
// but name different roots: roots[r] is the root rank r names. The
// tests' slots hold 256 bytes and their chunks 512, 3 deep: 16 bytes
// take a slot, 1 KiB two chunks (which a broadcast's root fills and
// leaves), 8 KiB sixteen (more than the pipeline holds). untold: every
// rank only writes and leaves, or reads from a rank that names its own
// root, so that no rank can be told (straddle.go).
var rootCases = []struct {
	name   string
	kind   string
	bytes  int
	roots  []int
	untold bool
}{
	{"bcast in a slot on 2, each names the other", "bcast", 16, []int{1, 0}, false},
	{"bcast in a slot on 2, each names itself", "bcast", 16, []int{0, 1}, true},
	{"bcast in a slot on 4, rank 3 names rank 1", "bcast", 16, []int{0, 0, 0, 1}, false},
	{"bcast in a slot on 4, rank 3 names rank 0", "bcast", 16, []int{1, 1, 1, 0}, false},
	{"bcast in a slot on 4, rank 1 names itself", "bcast", 16, []int{0, 1, 0, 0}, true},
	{"bcast in chunks on 2, each names the other", "bcast", 8 << 10, []int{1, 0}, false},
	{"bcast in chunks on 4, rank 3 names rank 1", "bcast", 8 << 10, []int{0, 0, 0, 1}, false},
	{"bcast in chunks on 4, rank 0 names rank 1", "bcast", 8 << 10, []int{1, 0, 0, 0}, false},
	{"bcast in 2 chunks on 4, rank 3 names rank 2", "bcast", 1 << 10, []int{0, 0, 0, 2}, false},
	{"bcast in 2 chunks on 4, rank 1 names itself", "bcast", 1 << 10, []int{0, 1, 1, 1}, true},
	{"reduce in a slot on 2, each names itself", "reduce", 16, []int{0, 1}, false},
	{"reduce in a slot on 2, each names the other", "reduce", 16, []int{1, 0}, false},
	{"reduce in a slot on 4, rank 3 names rank 1", "reduce", 16, []int{0, 0, 0, 1}, false},
	{"reduce in a slot on 4, rank 0 names rank 3", "reduce", 16, []int{3, 2, 2, 2}, false},
	{"reduce in chunks on 2, each names itself", "reduce", 8 << 10, []int{0, 1}, false},
	{"reduce in chunks on 4, rank 3 names rank 1", "reduce", 8 << 10, []int{0, 0, 0, 1}, false},
	{"reduce in 1 chunk on 4, rank 2 names itself", "reduce", 512, []int{3, 3, 2, 3}, false},
}

// Ranks of one broadcast or reduce that pass equal lengths but name
// different roots fail with ErrMismatch, every one that waits for data
// (a stall timeout makes a regression fail with ErrStalled instead of
// hanging), and none takes wrong data for good: a rank that finishes —
// one that only writes and leaves — holds what its own call promises
// (the named root's vector, its own as a root, the sum as a reduce's
// root). The segment is then broken, and every rank's next collective
// fails with ErrMismatch too — unless no rank could be told (untold),
// when every rank finishes and the next collective works.
func TestRanksThatNameDifferentRootsFailWithErrMismatch(t *testing.T) {
	for _, tc := range rootCases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.roots)
			j := newJob(t, n, forceAll(nil, nil), func(o *pml.Options) { o.StallTimeout = 20 * time.Second })
			defer j.close()
			errs := make([]error, n)
			j.run(t, func(c *coll.Comm) error {
				if err := c.Barrier(bg); err != nil {
					return fmt.Errorf("barrier: %w", err)
				}
				me := c.Rank()
				errs[me] = rootedCall(c, tc.kind, tc.bytes, tc.roots[me])
				if errs[me] != nil && !errors.Is(errs[me], coll.ErrMismatch) {
					return fmt.Errorf("root %d (roots %v): %v, want ErrMismatch", tc.roots[me], tc.roots, errs[me])
				}
				return nil
			})
			told := slices.ContainsFunc(errs, func(err error) bool { return err != nil })
			if told == tc.untold {
				t.Fatalf("ranks told: %v, want %v (errors %v)", told, !tc.untold, errs)
			}
			j.run(t, func(c *coll.Comm) error {
				err := c.Barrier(bg)
				if told && !errors.Is(err, coll.ErrMismatch) || !told && err != nil {
					return fmt.Errorf("the barrier after it: %v, want ErrMismatch: %v", err, told)
				}
				return nil
			})
		})
	}
}

// rootedCall runs a broadcast or a reduce of size bytes from root, with
// rank-specific data, and checks what a call that returns nil leaves.
func rootedCall(c *coll.Comm, kind string, size, root int) error {
	me := c.Rank()
	var want []byte
	var err error
	switch kind {
	case "bcast":
		buf := fill(make([]byte, size), me, 1)
		want = fill(make([]byte, size), root, 1)
		err = c.Bcast(bg, buf, root)
		if err == nil {
			return diff("the broadcast's data", buf, want)
		}
	default:
		send, recv := fill(make([]byte, size), me, 1), make([]byte, size)
		err = c.Reduce(bg, send, recv, sumInt64, root)
		if err == nil && me == root {
			return diff("the reduce's result", recv, fold(sumInt64, size, c.Size(), 1))
		}
	}
	return err
}

// A broadcast's rank that takes from the root it names (rank 0) and
// begins a large allreduce fills the allreduce's first chunk step — the
// step after the broadcast's — and rewrites its call's words, while a
// slower rank of the broadcast that names it (rank 1) as the root still
// waits for its fills. That rank must not take the allreduce's fill and
// a rewritten word for its root's and succeed with another collective's
// bytes, but fail with ErrMismatch, as every rank's next collective
// does. Rank 1's allreduce is there first: its context has ended when
// rank 2 comes, and it would fill its first step before the wait that
// returns the context's error.
func TestABroadcastsRankDoesNotTakeTheNextCollectivesFillForItsRoots(t *testing.T) {
	const n, size = 3, 1 << 10 // two chunk steps, fewer than the pipeline's depth
	j := newJob(t, n, forceAll(nil, nil), func(o *pml.Options) { o.StallTimeout = 20 * time.Second })
	defer j.close()
	filled, left := make(chan struct{}), make(chan struct{})
	j.run(t, func(c *coll.Comm) error {
		if err := c.Barrier(bg); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		switch c.Rank() {
		case 0:
			if err := rootedCall(c, "bcast", size, 0); err != nil {
				return fmt.Errorf("the broadcast's root: %v, want none", err)
			}
			<-left
		case 1:
			if err := rootedCall(c, "bcast", size, 0); err != nil {
				return fmt.Errorf("the broadcast from the root it names: %v, want none", err)
			}
			if err := fillAndGiveUp(c, filled); err != nil { // one chunk step
				return err
			}
			<-left
		default:
			<-filled
			err := rootedCall(c, "bcast", size, 1)
			close(left)
			if !errors.Is(err, coll.ErrMismatch) {
				return fmt.Errorf("the broadcast from rank 1: %v, want ErrMismatch", err)
			}
		}
		return nextFails(c)
	})
}
